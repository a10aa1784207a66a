"""Tool-permission requests of agent sessions (ralph.approvals): rules, the desk, the policy,
Claude Code's hook (played by tests/sessions/fake_claude.py, which runs hooks as Claude Code
does), the sessions service and `ralph agent approve` / `run --approvals`. The real CLIs:
tests/agents/test_e2e.py."""

from __future__ import annotations

import asyncio
import io
import json
import os
import pty
import select
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from ralph.agents import adapter_for
from ralph.agents.base import AgentError
from ralph.approvals.claude_hook import main as hook_main
from ralph.approvals.claude_hook import settings as claude_settings
from ralph.approvals.desk import ApprovalDesk, NotPending, bounded
from ralph.approvals.policy import ApprovalPolicy, PolicyFile
from ralph.approvals.rules import ApprovalRules, Rule, RuleError, subject_of
from ralph.cli.render import approval_subject
from ralph.config import load_config
from ralph.sessions import SessionError, SessionService, UnknownSession
from ralph.store import FileStore
from tests.cli.helpers import RALPH, TIMEOUT

FAKE_CLAUDE = Path(__file__).with_name("fake_claude.py")


@pytest.fixture
def root(tmp_path: Path) -> Path:
    project = tmp_path / "proj"
    (project / ".ralph").mkdir(parents=True)
    (project / "ralph.toml").write_text(
        '[loop]\ndefault_agent = "hooked"\n\n'
        f'[agents.hooked]\nadapter = "claude"\n'
        f"argv = {json.dumps([sys.executable, str(FAKE_CLAUDE), '-p'])}\n\n"
        '[agents.codex]\n[agents.gemini]\n'
        '[agents.plain]\nargv = ["sh", "-c", "cat"]\n\n'
        '[approvals]\nallow = ["Read", "Bash(touch safe*)"]\ndeny = ["Bash(rm -rf*)"]\n')
    return project


def service(root: Path, store: FileStore, **approvals: Any) -> SessionService:
    config = load_config(root)
    if approvals:
        config = config.model_copy(update={
            "approvals": config.approvals.model_copy(update=approvals)})
    return SessionService(root, config, store)


def events(store: FileStore, session_id: str, topic: str) -> list[dict[str, Any]]:
    return [f.meta for f in store.read(topic=topic, stream=f"sessions/{session_id}")]


# -- rules ------------------------------------------------------------------------------------


def test_rules_match_tool_names_in_any_case_and_subjects_by_glob() -> None:
    rules = ApprovalRules.parse(["Read", "Bash(git status*)", "mcp__*"], ["Bash(rm -rf*)"])
    assert rules.decide("Read", {"file_path": "/etc/passwd"}).decision == "allow"  # type: ignore[union-attr]
    assert rules.decide("read", {"filePath": "x"}).rule == "Read"  # type: ignore[union-attr]
    assert rules.decide("bash", {"command": "git status --short"}).decision == "allow"  # type: ignore[union-attr]
    assert rules.decide("Bash", {"command": "git push"}) is None
    assert rules.decide("Bash", {"command": "rm -rf /"}).decision == "deny"  # type: ignore[union-attr]
    assert rules.decide("mcp__github__list", {}).rule == "mcp__*"  # type: ignore[union-attr]
    both = ApprovalRules.parse(["Bash"], ["Bash(rm *)"])
    assert both.decide("Bash", {"command": "rm x"}).decision == "deny"  # type: ignore[union-attr]
    assert both.decide("Bash", {"command": "ls"}).decision == "allow"  # type: ignore[union-attr]


def test_a_shell_command_is_allowed_only_if_every_command_in_it_is() -> None:
    rules = ApprovalRules.parse(["Bash(git status*)", "Bash(git diff*)", "Bash(echo x > *)"],
                                ["Bash(rm -rf*)"])

    def decided(command: str) -> tuple[str, str] | None:
        found = rules.decide("Bash", {"command": command})
        return None if found is None else (found.decision, found.rule)

    assert decided("git status && git diff | head") is None  # head: nobody allowed it
    assert decided("git  status -s && git diff") == (
        "allow", "Bash(git status*), Bash(git diff*)")
    for sneaky in ("git status; curl x | sh", "git status\nmake", "git status $(make)",
                   "git status `make`", "git status > notes.txt", 'git status "unclosed',
                   "git status >| ~/.bashrc", "git status 2>|x",
                   "git status ${x:=$'\\x24\\x28touch p\\x29'}${x@P}", "git status $[x]"):
        assert decided(sneaky) is None, sneaky
    assert decided("echo x > out.txt") == ("allow", "Bash(echo x > *)")  # spelled out
    for harmful in ("git status; rm -rf ~", " rm  -rf /", "cd / && rm -rf x",
                    "git status\nrm -rf /"):
        assert decided(harmful) == ("deny", "Bash(rm -rf*)"), harmful
    assert decided('echo "a; rm -rf b"') is None  # quoted: one command, echo, not allowed
    assert ApprovalRules.parse(["Bash"], []).decide("bash", {"command": "a; b"}) is not None


def test_a_path_is_matched_relative_to_the_sessions_directory() -> None:
    rules = ApprovalRules.parse(["Edit(src/*)"], [])
    assert rules.decide("Edit", {"file_path": "/p/src/app.py"}, "/p") is not None
    assert rules.decide("Edit", {"file_path": "/p/src/deep/app.py"}, "/p") is not None
    assert rules.decide("Edit", {"file_path": "/p/src/../../etc/x"}, "/p") is None
    assert rules.decide("Edit", {"file_path": "/p/srcx/a"}, "/p") is None
    assert rules.decide("Edit", {"file_path": "src/./a.py"}, "/p") is not None
    # A relative glob speaks of the session's directory only, however wide it is.
    wide = ApprovalRules.parse(["Edit(*.py)", "Read(/usr/share/*)", "Grep"], [])
    assert wide.decide("Edit", {"file_path": "/p/deep/a.py"}, "/p") is not None
    for outside in ("/home/u/x.py", "/p/../etc/x.py", "../x.py", "~/x.py"):
        assert wide.decide("Edit", {"file_path": outside}, "/p") is None, outside
    assert wide.decide("Read", {"file_path": "/usr/share/doc/x"}, "/p") is not None
    assert wide.decide("Grep", {"path": "/anywhere"}, "/p") is not None  # a bare name
    # opencode's requests name their paths in `patterns`
    assert rules.decide("edit", {"patterns": ["/p/src/x.ts"], "always": ["*"]}, "/p") \
        is not None


def test_protected_paths_are_only_read_whatever_the_rules() -> None:
    rules = ApprovalRules.parse(["Edit", "Write(*)", "Read"], [])
    for path in (".ralph/store/index.sqlite", ".claude/settings.json", ".git/hooks/pre-commit",
                 ".git/config", "opencode.json"):
        found = rules.decide("Edit", {"file_path": f"/p/{path}"}, "/p")
        assert found is not None and found.decision == "deny", path
        assert found.rule.startswith("protected path ")
        assert rules.decide("Read", {"file_path": f"/p/{path}"}, "/p").decision == "allow"  # type: ignore[union-attr]
    assert rules.decide("Write", {"file_path": "/p/src/.claude.md"}, "/p").decision == "allow"  # type: ignore[union-attr]


def test_a_calls_subject_is_its_command_path_or_input() -> None:
    assert subject_of({"command": "ls -l", "description": "list"}) == "ls -l"
    assert subject_of({"cmd": ["git", "status", "a b"]}) == "git status 'a b'"
    assert subject_of({"file_path": "/a/b.py", "content": "x"}) == "/a/b.py"
    assert subject_of({"url": "http://x"}) == "http://x"
    assert subject_of({"b": 1, "a": [2]}) == '{"a":[2],"b":1}'


@pytest.mark.parametrize(("text", "words"), [
    ("", "is not a rule"), ("Bash(", "is not a rule"), ("Bash()", "parentheses are empty"),
    ("two words", "is not a rule")])
def test_bad_rules_say_how_a_rule_looks(text: str, words: str) -> None:
    with pytest.raises(RuleError, match=words):
        Rule.parse(text)


def test_recorded_inputs_are_bounded() -> None:
    long = "x" * 10_000
    cut = bounded({"content": long, "nested": [{"deep": long}], "command": long * 6})
    assert cut["content"].endswith("… (cut: the whole is 10000 characters)")
    assert len(cut["content"]) < 4100
    assert cut["command"] == long * 6  # a command is kept whole up to 64 KiB
    huge = bounded({"command": "x" * 70_000})["command"]
    assert approval_subject({"tool_name": "Bash", "input": {"command": huge}}).endswith(
        "… (cut: the whole is 70000 characters) [NOT SHOWN WHOLE: too long to record]")
    assert len(cut["nested"][0]["deep"]) < 4100
    many = bounded({"items": list(range(1000)), **{f"k{n}": n for n in range(300)}})
    assert len(many["items"]) == 201 and many["items"][-1] == "… 800 more"
    assert len(many) == 201 and many["…"] == "101 more keys"


# -- the desk and the policy ------------------------------------------------------------------


def test_one_answer_per_request_and_only_to_a_request(root: Path, store: FileStore) -> None:
    desk = ApprovalDesk(store, "ses_x", root / ".ralph" / "sessions" / "ses_x")
    request = desk.request("toolu_1", "Bash", {"command": "ls"})
    assert desk.request("toolu_1", "Bash", {"command": "ls"}) == request  # asked once
    with pytest.raises(NotPending, match="no permission request 'toolu_9'"):
        desk.answer("toolu_9", "allow", by="t")
    desk.answer("toolu_1", "deny", "no", by="t")
    with pytest.raises(NotPending, match="answered already \\(deny, by t\\)"):
        desk.answer("toolu_1", "allow", by="u")
    assert desk.pending() == []
    assert len(list(store.read(topic="session.approval_answered"))) == 1


def test_the_policy_decides_by_rule_then_mode_then_person_then_timeout(root: Path,
                                                                        store: FileStore) -> None:
    desk = ApprovalDesk(store, "ses_p", root / ".ralph" / "sessions" / "ses_p")

    async def go() -> None:
        ask = ApprovalPolicy("ask", ("Read",), ("Bash(rm*)",), 0.3)
        by_rule = await ask.decide(desk, "t1", "Read", {"file_path": "a"})
        assert (by_rule.decision, by_rule.by, by_rule.rule) == ("allow", "rule", "Read")
        denied = await ask.decide(desk, "t2", "Bash", {"command": "rm x"})
        assert (denied.decision, denied.rule) == ("deny", "Bash(rm*)")
        late = await ask.decide(desk, "t3", "Bash", {"command": "ls"})
        assert (late.decision, late.by) == ("deny", "timeout")
        assert late.message == "nobody answered within 0.3 s"
        by_mode = await ApprovalPolicy("deny", (), (), 5).decide(desk, "t4", "Edit", {})
        assert (by_mode.decision, by_mode.by) == ("deny", "mode")
        person = asyncio.ensure_future(ApprovalPolicy("ask", (), (), 30).decide(
            desk, "t5", "Bash", {"command": "make"}))
        while not desk.pending():
            await asyncio.sleep(0.01)
        desk.answer("t5", "allow", "fine", by="someone")
        answer = await person
        assert (answer.decision, answer.by, answer.message) == ("allow", "someone", "fine")

    asyncio.run(go())
    answered = [f.meta["tool_use_id"] for f in store.read(topic="session.approval_answered")]
    assert answered == ["t1", "t2", "t3", "t4", "t5"]  # every decision is an event


def test_the_hook_denies_when_it_cannot_decide(tmp_path: Path, capfd: pytest.CaptureFixture[str],
                                               monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sys, "stdin", _Stdin(b'{"tool_name": "Bash", "tool_input": {}}'))
    assert hook_main([str(tmp_path / "missing.json")]) == 0
    out = json.loads(capfd.readouterr().out)["hookSpecificOutput"]
    assert out["hookEventName"] == "PreToolUse" and out["permissionDecision"] == "deny"
    assert "Ralph could not decide" in out["permissionDecisionReason"]


def test_the_hook_answers_by_the_policy_it_is_given(root: Path, store: FileStore,
                                                   capfd: pytest.CaptureFixture[str],
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    folder = root / ".ralph" / "sessions" / "ses_h"
    folder.mkdir(parents=True)
    policy = PolicyFile(ApprovalPolicy("deny", ("Bash(echo safe*)", "Edit(src/*)"), (), 5),
                        store.path, "ses_h", folder, root)
    calls = [({"command": "echo safe"}, "Bash", "allow", "allowed by rule Bash(echo safe*)"),
             ({"file_path": str(root / "src" / "a.py")}, "Edit", "allow",
              "allowed by rule Edit(src/*)"),
             ({"command": "echo safe; make"}, "Bash", "deny", "denied by mode")]
    for n, (tool_input, tool, decision, said) in enumerate(calls):
        call = {"tool_name": tool, "tool_input": tool_input, "tool_use_id": f"u{n}"}
        monkeypatch.setattr(sys, "stdin", _Stdin(json.dumps(call).encode()))
        assert hook_main([policy.encode()]) == 0
        out = json.loads(capfd.readouterr().out)["hookSpecificOutput"]
        assert out["permissionDecision"] == decision
        assert out["permissionDecisionReason"].startswith(f"{said} (Ralph)")
    answers = [f.meta for f in store.read(topic="session.approval_answered")]
    assert [a["by"] for a in answers] == ["rule", "rule", "mode"]


def test_the_hook_command_denies_when_python_cannot_run_it(tmp_path: Path) -> None:
    """Claude Code lets a call through when its hook exits with 1: the command line turns
    any failure to start the hook into exit 2 (a denial), and -I keeps a `ralph` package of
    the agent's directory from shadowing Ralph's."""
    settings = claude_settings(PolicyFile(ApprovalPolicy("ask", (), (), 5), tmp_path / "s",
                                          "ses_x", tmp_path).encode(), 5)
    [group] = settings["hooks"]["PreToolUse"]  # type: ignore[index]
    command = group["hooks"][0]["command"]
    assert settings["disableAllHooks"] is False
    (tmp_path / "ralph").mkdir()
    (tmp_path / "ralph" / "__init__.py").write_text("raise SystemExit(1)\n")
    broken = command.replace(sys.executable, "/nonexistent/python", 1)
    done = subprocess.run(broken, shell=True, cwd=tmp_path, input="{}", capture_output=True,
                          text=True, timeout=TIMEOUT, check=False)
    assert done.returncode == 2 and "the call is denied" in done.stderr
    shadowed = subprocess.run(command, shell=True, cwd=tmp_path, capture_output=True,
                              text=True, timeout=TIMEOUT, check=False,
                              input='{"tool_name": "Bash", "tool_input": {"command": "ls"}}')
    assert shadowed.returncode == 0, shadowed.stderr  # Ralph's hook ran, not ./ralph
    out = json.loads(shadowed.stdout)["hookSpecificOutput"]
    assert out["permissionDecision"] == "deny"  # the store is not there: it cannot ask


class _Stdin:
    def __init__(self, data: bytes) -> None:
        self.buffer = io.BytesIO(data)


# -- sessions -----------------------------------------------------------------------------------


def test_a_request_is_found_by_its_id_alone(root: Path, store: FileStore) -> None:
    sessions = service(root, store)

    async def go() -> tuple[str, str | None, str | None]:
        session_id = await sessions.launch("RUN: true", approvals="ask")
        while not sessions.pending(session_id):
            await asyncio.sleep(0.02)
        found = (sessions.asking("toolu_1"), sessions.asking("toolu_9"))
        sessions.answer(session_id, "toolu_1", "allow", by="test")
        await sessions.wait(session_id, 60)
        return session_id, *found

    session_id, found, missing = asyncio.run(go())
    assert (found, missing) == (session_id, None)


def _launch_and_answer(sessions: SessionService, prompt: str, mode: str,
                       answer: tuple[str, str] | None = None) -> tuple[str, Any]:
    async def go() -> tuple[str, Any]:
        session_id = await sessions.launch(prompt, approvals=mode)  # type: ignore[arg-type]
        if answer is not None:
            while not sessions.pending(session_id):
                assert not sessions.get(session_id).ended, sessions.get(session_id)
                await asyncio.sleep(0.02)
            [request] = sessions.pending(session_id)
            sessions.answer(session_id, request.tool_use_id, answer[0],  # type: ignore[arg-type]
                            answer[1], by="test")
        return session_id, await sessions.wait(session_id, 60)

    return asyncio.run(go())


def test_ask_waits_for_a_person_and_does_what_they_say(root: Path, store: FileStore) -> None:
    sessions = service(root, store)
    allowed_id, allowed = _launch_and_answer(sessions, "RUN: echo hi > hi.txt", "ask",
                                             ("allow", ""))
    assert allowed.status == "completed" and (root / "hi.txt").read_text() == "hi\n"
    assert allowed.approvals == "ask"
    [request] = events(store, allowed_id, "session.approval_requested")
    assert request == {"session_id": allowed_id, "tool_use_id": "toolu_1", "tool_name": "Bash",
                       "input": {"command": "echo hi > hi.txt"}}
    [answer] = events(store, allowed_id, "session.approval_answered")
    assert answer == {"session_id": allowed_id, "tool_use_id": "toolu_1", "decision": "allow",
                      "message": "", "by": "test", "rule": None}
    denied_id, denied = _launch_and_answer(sessions, "RUN: echo no > no.txt", "ask",
                                           ("deny", "not today"))
    assert denied.status == "completed" and not (root / "no.txt").exists()
    final = sessions.text(denied.final_text_hash)
    assert final == "denied: denied by test (Ralph): not today"  # the agent is told why
    assert sessions.pending(denied_id) == []


def test_rules_and_the_mode_answer_without_a_person(root: Path, store: FileStore) -> None:
    sessions = service(root, store)
    prompt = "RUN: touch safe.txt\nRUN: rm -rf nothing\nRUN: touch other.txt"
    for mode in ("ask", "deny"):
        if mode == "ask":
            sessions = service(root, store, timeout_seconds=1)
        session_id, info = _launch_and_answer(sessions, prompt, mode)
        assert info.status == "completed"
        answers = events(store, session_id, "session.approval_answered")
        assert [(a["decision"], a["by"], a["rule"]) for a in answers] == [
            ("allow", "rule", "Bash(touch safe*)"), ("deny", "rule", "Bash(rm -rf*)"),
            ("deny", "timeout" if mode == "ask" else "mode", None)]
        assert (root / "safe.txt").exists() and not (root / "other.txt").exists()
        (root / "safe.txt").unlink()


def test_auto_runs_without_asking(root: Path, store: FileStore) -> None:
    _, info = _launch_and_answer(service(root, store), "RUN: touch auto.txt", "auto")
    assert info.status == "completed" and (root / "auto.txt").exists()
    assert "--settings" not in info.argv
    assert list(store.read(topic="session.approval_requested")) == []


def test_agents_that_cannot_ask_say_what_they_offer(root: Path, store: FileStore) -> None:
    sessions = service(root, store)

    async def go() -> None:
        with pytest.raises(AgentError, match=r"codex cannot run with approvals 'ask'.*"
                                             r"--sandbox read-only"):
            await sessions.launch("x", "codex", approvals="ask")
        with pytest.raises(AgentError, match=r"gemini cannot run with approvals 'ask'.*"
                                             r"--approval-mode plan"):
            await sessions.launch("x", "gemini", approvals="ask")
        with pytest.raises(AgentError, match="adapter 'command' cannot run with approvals"):
            await sessions.launch("x", "plain", approvals="deny")
        with pytest.raises(Exception, match="unknown approvals mode 'maybe'"):
            await sessions.launch("x", approvals="maybe")  # type: ignore[arg-type]

    asyncio.run(go())
    assert list(store.read()) == []  # nothing recorded


def test_answers_to_what_is_not_pending_are_refused(root: Path, store: FileStore) -> None:
    sessions = service(root, store)
    session_id, _ = _launch_and_answer(sessions, "RUN: true", "ask", ("allow", ""))
    with pytest.raises(NotPending, match="has ended"):
        sessions.answer(session_id, "toolu_1", "deny", by="late")
    with pytest.raises(UnknownSession):
        sessions.answer("ses_nope", "toolu_1", "deny", by="late")
    assert len(events(store, session_id, "session.approval_answered")) == 1


def test_the_adapters_map_deny_onto_their_own_flags() -> None:
    codex, gemini, claude = (adapter_for(n) for n in ("codex", "gemini", "claude"))
    folder = Path("/p/.ralph/sessions/ses_x")
    policy = PolicyFile(ApprovalPolicy("deny", (), (), 5), Path("/p/.ralph/store"), "ses_x",
                        folder).encode()
    assert codex.approvals_argv(["codex", "exec", "--yolo", "-s", "workspace-write",
                                 "-sdanger-full-access", "-"], "deny", policy, folder) == [
        "codex", "exec", "--sandbox", "read-only", "-"]
    assert gemini.approvals_argv(["gemini", "--approval-mode=yolo", "-y", "--yolo=true",
                                  "--approvalMode", "yolo", "-p", "{prompt}"], "deny", policy,
                                 folder) == ["gemini", "--approval-mode", "plan", "--policy",
                                             str(folder / "gemini-policy.toml"), "-p",
                                             "{prompt}"]
    assert 'toolName = ["exit_plan_mode", "enter_plan_mode"]' in \
        gemini.approvals_files("deny")["gemini-policy.toml"]
    argv = claude.approvals_argv(["claude", "-p", "--verbose"], "ask", policy, folder)
    assert argv[:3] == ["claude", "-p", "--settings"] and argv[4:] == ["--verbose"]
    inline = json.loads(argv[3])
    assert inline["disableAllHooks"] is False
    assert policy in inline["hooks"]["PreToolUse"][0]["hooks"][0]["command"]
    with pytest.raises(AgentError, match="with --settings in its argv"):
        claude.approvals_argv(["claude", "-p", "--settings", "x.json"], "deny", policy, folder)
    for adapter in (codex, gemini, claude):
        assert adapter.approvals_argv(["x", "y"], "auto", policy, folder) == ["x", "y"]
        assert adapter.approvals_files("auto") == {}


# -- the CLI ------------------------------------------------------------------------------------


def ralph(root: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*RALPH, "agent", *args], cwd=root, capture_output=True, text=True,
                          timeout=TIMEOUT, check=False, stdin=subprocess.DEVNULL)


def _pending(root: Path, session_id: str) -> list[dict[str, Any]]:
    deadline = time.monotonic() + TIMEOUT
    while time.monotonic() < deadline:
        shown = json.loads(ralph(root, "show", session_id, "--json").stdout)
        if shown["pending_approvals"]:
            return list(shown["pending_approvals"])
        assert shown["status"] == "running", shown
        time.sleep(0.05)
    raise AssertionError("no request came")


def test_approve_from_another_process(root: Path) -> None:
    started = ralph(root, "run", "RUN: echo hi > hi.txt", "--approvals", "ask", "--detach")
    assert started.returncode == 0, started.stderr
    session_id = started.stdout.strip()
    [request] = _pending(root, session_id)
    assert request == {"tool_use_id": "toolu_1", "tool_name": "Bash",
                       "input": {"command": "echo hi > hi.txt"}}
    text = ralph(root, "show", session_id).stdout
    assert (f"waiting for an answer: Bash: echo hi > hi.txt  (ralph agent approve {session_id} "
            "toolu_1 --allow|--deny)") in text
    neither = ralph(root, "approve", session_id, "toolu_1")
    assert neither.returncode == 2 and "--allow or --deny" in neither.stderr
    unknown = ralph(root, "approve", session_id, "toolu_9", "--allow")
    assert unknown.returncode == 1
    assert unknown.stderr == f"error: session {session_id} has no permission request 'toolu_9'\n"
    answered = ralph(root, "approve", session_id, "toolu_1", "--allow", "-m", "ok")
    assert (answered.returncode, answered.stdout) == (0, "toolu_1: allowed\n")
    watched = ralph(root, "watch", session_id)
    assert watched.returncode == 0, watched.stderr
    assert "permission asked: Bash: echo hi > hi.txt" in watched.stderr
    assert "allowed by ralph agent approve: ok" in watched.stderr
    assert (root / "hi.txt").read_text() == "hi\n"
    again = ralph(root, "approve", session_id, "toolu_1", "--deny")
    assert again.returncode == 1 and "has ended" in again.stderr
    missing = ralph(root, "approve", "ses_nope", "toolu_1", "--deny")
    assert missing.returncode == 1 and "no agent session 'ses_nope'" in missing.stderr
    answers = json.loads(ralph(root, "show", session_id, "--json").stdout)
    assert answers["approvals"] == "ask" and answers["pending_approvals"] == []


def test_run_refuses_what_cannot_ask(root: Path) -> None:
    for args, words in [(["--agent", "codex", "--approvals", "ask"], "codex cannot run with"),
                        (["--approvals", "maybe"], "unknown approvals mode 'maybe'")]:
        refused = ralph(root, "run", "x", *args)
        assert refused.returncode == 2, refused.stderr
        assert refused.stderr.count("\n") == 1 and words in refused.stderr


def test_ask_on_the_terminal(root: Path) -> None:
    """`ralph agent run --approvals ask` in a terminal asks there: y allows, anything else
    denies."""
    prompt = "RUN: echo yes > yes.txt\nRUN: echo no > no.txt"
    controller, terminal = pty.openpty()
    proc = subprocess.Popen([*RALPH, "agent", "run", prompt, "--approvals", "ask"], cwd=root,
                            stdin=terminal, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            start_new_session=True)
    os.close(terminal)
    assert proc.stderr is not None and proc.stdout is not None
    err = b""
    try:
        err += _read_until(proc.stderr.fileno(), b"Allow Bash: echo yes > yes.txt? [y/N]\n")
        os.write(controller, b"y\n")
        err += _read_until(proc.stderr.fileno(), b"Allow Bash: echo no > no.txt? [y/N]\n")
        os.write(controller, b"\n")
        out, rest = proc.communicate(timeout=TIMEOUT)
        err += rest
    finally:
        os.close(controller)
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    text = err.decode()
    assert proc.returncode == 0, text
    assert (root / "yes.txt").exists() and not (root / "no.txt").exists()
    assert out.decode() == ("ran: echo yes > yes.txt\ndenied: denied by terminal (Ralph): "
                            "denied on the terminal\n")
    for line in ("permission asked: Bash: echo yes > yes.txt", "allowed by terminal",
                 "permission asked: Bash: echo no > no.txt",
                 "denied by terminal: denied on the terminal"):
        assert line in text, (line, text)


def _read_until(fd: int, text: bytes) -> bytes:
    """What `fd` gives up to and including `text`, waiting at most TIMEOUT in all."""
    seen = b""
    deadline = time.monotonic() + TIMEOUT
    while text not in seen:
        left = deadline - time.monotonic()
        assert left > 0, seen
        ready, _, _ = select.select([fd], [], [], left)
        if ready:
            chunk = os.read(fd, 4096)
            assert chunk, seen  # the process ended without asking
            seen += chunk
    return seen


def test_an_opencode_conversation_run_under_ask_is_not_continued_under_auto(
        root: Path, store: FileStore) -> None:
    """opencode keeps the conversation's asking rule: `opencode run` would reject every
    tool call of it. Refused before anything is recorded."""
    stream = "sessions/ses_asked"
    store.append("session.started", {"session_id": "ses_asked", "agent": "opencode",
                                     "title": None, "cwd": str(root), "argv": [],
                                     "continue_from": None, "approvals": "ask",
                                     "owner_pid": 1, "owner": "x", "log_path": ""},
                 stream=stream)
    store.append("session.finished", {"session_id": "ses_asked", "status": "completed",
                                      "agent_session_id": "ses_oc1"}, stream=stream)
    sessions = service(root, store)
    with pytest.raises(SessionError, match=r"ran opencode with approvals 'ask'.*continue it "
                                           r"with approvals ask or deny"):
        asyncio.run(sessions.launch("more", continue_from="ses_asked"))
    assert [f.topic for f in store.read()] == ["session.started", "session.finished"]


WATCHDOG = """
import sys, time
from ralph.approvals import claude_hook
claude_hook.WATCHDOG_GRACE_S = 0
answer = claude_hook._Answer()
answer.watchdog(0.2)
if sys.argv[1] == "answered":
    answer.give(b"the decision\\n")
time.sleep(2)
print("still here")
"""


@pytest.mark.parametrize("case", ["stuck", "answered"])
def test_the_hooks_watchdog_denies_a_stuck_decision_and_only_that(case: str) -> None:
    done = subprocess.run([sys.executable, "-c", WATCHDOG, case], capture_output=True,
                          text=True, timeout=TIMEOUT, check=False)
    assert done.returncode == 0, done.stderr
    if case == "stuck":  # denied, and the process ended there
        out = json.loads(done.stdout)["hookSpecificOutput"]
        assert out["permissionDecision"] == "deny"
    else:  # the decision was given: the watchdog neither answers again nor exits early
        assert done.stdout == "the decision\nstill here\n"
