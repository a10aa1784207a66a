"""`workspace.doctor` and `adapter.status`: the original's check ids, statuses and
messages; Ralph's adapters with the capabilities the adapters themselves report."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

from ralph.company.files import write_yaml
from tests.company.conftest import Client, RpcFailure

CHECKS = ["workspace.schema", "machine.config", "providers.cli", "providers.protocol",
          "repos.mappings", "index.rebuild", "worktrees.references"]


def fake_program(folder: Path, name: str) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / name
    path.write_text("#!/bin/sh\nexit 0\n")
    path.chmod(path.stat().st_mode | stat.S_IXUSR)
    return path


def test_adapter_status_lists_ralphs_adapters_with_their_programs(
        client: Client, workspace: tuple[Path, dict[str, str]], tmp_path: Path,
        monkeypatch: pytest.MonkeyPatch) -> None:
    root, _ids = workspace
    monkeypatch.setenv("PATH", str(tmp_path / "empty-path"))
    claude = fake_program(tmp_path / "bin", "my-claude")
    write_yaml(root / ".local/machine.yaml", {
        "schema_version": 1, "type": "machine", "repo_roots": {},
        "provider_bins": {"claude": str(claude), "gemini": str(tmp_path / "no-gemini")}})
    statuses = client.call("adapter.status", {"workspace_dir": str(root)})
    by_name = {s["name"]: s for s in statuses}
    assert list(by_name) == ["codex_cli", "claude_cli", "gemini_cli", "opencode_cli", "command"]
    assert all(s["mode"] == "cli" for s in statuses)
    assert by_name["claude_cli"]["available"] is True and "reason" not in by_name["claude_cli"]
    assert by_name["codex_cli"]["available"] is False
    assert "codex not found on PATH" in by_name["codex_cli"]["reason"]
    assert by_name["gemini_cli"]["reason"] == f"{tmp_path / 'no-gemini'} does not exist"
    assert by_name["command"]["available"] is True  # it runs whatever command it is given
    asks = {name: s["capabilities"]["supports_interactive_approval_callbacks"]
            for name, s in by_name.items()}
    assert asks == {"codex_cli": False, "claude_cli": True, "gemini_cli": False,
                    "opencode_cli": True, "command": False}
    resumes = {name: s["capabilities"]["supports_resumable_session"]
               for name, s in by_name.items()}
    assert resumes == {"codex_cli": True, "claude_cli": True, "gemini_cli": True,
                       "opencode_cli": True, "command": False}
    assert by_name["command"]["capabilities"]["supports_token_usage"] is False
    assert by_name["codex_cli"]["capabilities"]["supports_token_usage"] is True
    assert set(by_name["codex_cli"]["capabilities"]) == {
        "supports_streaming_events", "supports_resumable_session",
        "supports_structured_output", "supports_token_usage", "supports_patch_export",
        "supports_interactive_approval_callbacks", "supports_worktree_isolation"}


def test_doctor_reports_each_check_in_the_originals_order(
        client: Client, workspace: tuple[Path, dict[str, str]], tmp_path: Path,
        monkeypatch: pytest.MonkeyPatch) -> None:
    root, ids = workspace
    fake_program(tmp_path / "bin", "claude")
    monkeypatch.setenv("PATH", str(tmp_path / "bin"))
    repo = tmp_path / "repo"
    (repo / ".git").mkdir(parents=True)
    plain = tmp_path / "plain"
    plain.mkdir()
    write_yaml(root / ".local/machine.yaml", {
        "schema_version": 1, "type": "machine",
        "repo_roots": {"app": str(repo), "docs": str(plain)}, "provider_bins": {}})
    params = {"workspace_dir": str(root)}
    result = client.call("workspace.doctor", params)
    assert [c["id"] for c in result["checks"]] == CHECKS
    by_id = {c["id"]: c for c in result["checks"]}
    assert by_id["workspace.schema"] == {"id": "workspace.schema", "status": "pass",
                                         "message": "Workspace schema validation passed."}
    assert by_id["providers.cli"] == {"id": "providers.cli", "status": "pass",
                                      "message": "Available provider CLIs: claude_cli"}
    assert by_id["repos.mappings"] == {
        "id": "repos.mappings", "status": "warn",
        "message": "Repo mappings loaded with 1 warning(s).",
        "details": [f"app: OK ({repo})",
                    f"docs: path exists but .git marker not found ({plain})"]}
    assert by_id["index.rebuild"] == {
        "id": "index.rebuild", "status": "warn",
        "message": "SQLite index is missing. Run index:rebuild for fast queries."}
    assert result["summary"] == {"pass": 5, "warn": 2, "fail": 0} and result["ok"] is True

    rebuilt = client.call("workspace.doctor", {**params, "rebuild_index": True})
    index = {c["id"]: c for c in rebuilt["checks"]}["index.rebuild"]
    assert index["status"] == "pass" and index["message"] == "Index rebuilt successfully."
    assert index["details"][0] == f"db_path: {root / '.local/index.sqlite'}"
    fresh = client.call("workspace.doctor", params)
    assert {c["id"]: c for c in fresh["checks"]}["index.rebuild"]["message"] == \
        "SQLite index is present and readable."
    synced = client.call("workspace.doctor", {**params, "sync_index": True})
    assert [c["id"] for c in synced["checks"]][5] == "index.sync"

    # A broken workspace: schema failures, a run spec naming a missing worktree.
    (root / "company/policy.yaml").unlink()
    run_yaml = root / "work/projects" / ids["proj"] / "runs" / ids["run"] / "run.yaml"
    text = run_yaml.read_text().replace("argv:", "worktree_relpath: .local/worktrees/gone\n"
                                                 "  argv:")
    run_yaml.write_text(text)
    write_yaml(root / ".local/machine.yaml", {
        "schema_version": 1, "type": "machine", "repo_roots": {"x": "relative/path"},
        "provider_bins": {}})
    broken = client.call("workspace.doctor", params)
    by_id = {c["id"]: c for c in broken["checks"]}
    assert by_id["workspace.schema"]["status"] == "fail"
    assert "missing_file: Missing file: company/policy.yaml" in \
        by_id["workspace.schema"]["details"]
    assert by_id["repos.mappings"]["status"] == "fail"
    assert by_id["repos.mappings"]["details"] == ["x: path is not absolute (relative/path)"]
    assert by_id["worktrees.references"] == {
        "id": "worktrees.references", "status": "warn",
        "message": "1 referenced worktree path(s) are missing.",
        "details": [f"{ids['proj']}/{ids['run']}: .local/worktrees/gone"]}
    assert broken["ok"] is False and broken["summary"]["fail"] == 2
    monkeypatch.setenv("PATH", str(tmp_path / "nothing"))
    bare = client.call("workspace.doctor", params)
    agents = {c["id"]: c for c in bare["checks"]}["providers.cli"]
    # The command adapter runs anything, so it says nothing about agents being there.
    assert agents["status"] == "fail"
    assert agents["message"] == "No provider CLI adapter is available."
    assert [d.split(":")[0] for d in agents["details"]] == [
        "codex_cli", "claude_cli", "gemini_cli", "opencode_cli"]

    (root / ".local/machine.yaml").write_text("repo_roots: [unclosed\n")
    unreadable = {c["id"]: c for c in client.call("workspace.doctor", params)["checks"]}
    assert unreadable["machine.config"]["status"] == "fail"
    assert unreadable["machine.config"]["message"].startswith(
        "Failed to read .local/machine.yaml: ")
    assert str(root) not in unreadable["machine.config"]["message"]
    assert "repos.mappings" not in unreadable


def test_adapter_status_needs_a_workspace(client: Client, tmp_path: Path) -> None:
    with pytest.raises(RpcFailure) as failure:
        client.call("adapter.status", {"workspace_dir": str(tmp_path)})
    assert failure.value.code == -32000
    assert failure.value.data == {"workspace_dir": str(tmp_path)}
    assert os.listdir(tmp_path) == []  # nothing made in a directory that is not a workspace
