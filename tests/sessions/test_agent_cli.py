"""`ralph agent run|list|show|stop` in child processes, with command agents."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
from pathlib import Path

from tests.cli.helpers import RALPH, TIMEOUT
from tests.sessions.test_service import AGENTS, alive


def project(tmp_path: Path) -> Path:
    root = tmp_path / "proj"
    (root / ".ralph").mkdir(parents=True)
    (root / "ralph.toml").write_text("[loop]\ndefault_agent = \"echo\"\n\n" + "".join(
        f"[agents.{name}]\nargv = {json.dumps(argv)}\n\n" for name, argv in AGENTS.items()))
    return root


def ralph(root: Path, *args: str, stdin: str = "") -> subprocess.CompletedProcess[str]:
    return subprocess.run([*RALPH, *args], cwd=root, input=stdin, capture_output=True,
                          text=True, timeout=TIMEOUT, check=False)


def test_run_prints_the_final_text_and_the_session_is_listed_and_shown(tmp_path: Path) -> None:
    root = project(tmp_path)
    done = ralph(root, "agent", "run", "say hello", "--title", "greet")
    assert done.returncode == 0, done.stderr
    assert done.stdout == "say hello\nfinished\n"
    session_id = done.stderr.split()[1]
    listed = ralph(root, "agent", "list", "--json")
    assert [s["session_id"] for s in json.loads(listed.stdout)] == [session_id]
    table = ralph(root, "agent", "list").stdout
    assert session_id in table and "completed" in table and "greet" in table
    shown = ralph(root, "agent", "show", session_id, "--json")
    record = json.loads(shown.stdout)
    assert (record["status"], record["prompt"], record["title"]) == ("completed", "say hello",
                                                                     "greet")
    assert record["final_text"] == "say hello\nfinished"  # the text the agent said
    text = ralph(root, "agent", "show", session_id).stdout
    assert text.startswith(f"session {session_id}: echo, completed")
    assert "prompt:\nsay hello" in text


def test_run_reads_stdin_for_dash_and_json_gives_the_record(tmp_path: Path) -> None:
    root = project(tmp_path)
    done = ralph(root, "agent", "run", "-", "--json", stdin="from stdin")
    assert done.returncode == 0, done.stderr
    record = json.loads(done.stdout)
    assert record["prompt"] == "from stdin" and record["status"] == "completed"


def test_exit_codes_of_failures_and_bad_input(tmp_path: Path) -> None:
    root = project(tmp_path)
    failed = ralph(root, "agent", "run", "x", "--agent", "fail")
    assert failed.returncode == 1
    assert failed.stderr.splitlines()[-1].startswith("error: session ses_")
    assert "failed" in failed.stderr
    for args, code, words in [
            (["run", ""], 2, "prompt is empty"),
            (["run", "x", "--agent", "nobody"], 2, "unknown agent 'nobody'"),
            (["run", "x", "--agent", "missing"], 2, "agent 'missing'"),
            (["show", "ses_nope"], 1, "no agent session 'ses_nope'"),
            (["stop", "ses_nope"], 1, "no agent session 'ses_nope'")]:
        result = ralph(root, "agent", *args)
        assert result.returncode == code, (args, result.stderr)
        assert result.stderr.count("\n") == 1 and words in result.stderr, result.stderr
        assert "Traceback" not in result.stderr
    assert json.loads(ralph(root, "agent", "list", "--json").stdout)[0]["status"] == "failed"


def _running(root: Path, agent: str) -> tuple[subprocess.Popen[str], str]:
    proc = subprocess.Popen([*RALPH, "agent", "run", "x", "--agent", agent], cwd=root,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            start_new_session=True)
    assert proc.stderr is not None
    first = proc.stderr.readline()
    assert first.startswith("session ses_"), first
    return proc, first.split()[1]


def test_stop_from_another_terminal_ends_run_with_130(tmp_path: Path) -> None:
    root = project(tmp_path)
    proc, session_id = _running(root, "slow")
    try:
        deadline = time.monotonic() + 30
        while '"pgid"' not in ralph(root, "store", "cat", "--store", ".ralph/store",
                                     "--topic", "session.process").stdout:
            assert time.monotonic() < deadline
            time.sleep(0.1)
        stopped = ralph(root, "agent", "stop", session_id)
        assert stopped.returncode == 0, stopped.stderr
        assert stopped.stdout == f"session {session_id}: stopped\n"
        assert proc.wait(TIMEOUT) == 130
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()


def test_ctrl_c_stops_the_session(tmp_path: Path) -> None:
    root = project(tmp_path)
    proc, session_id = _running(root, "slow")
    try:
        time.sleep(0.5)
        proc.send_signal(signal.SIGINT)
        assert proc.wait(TIMEOUT) == 130
        shown = json.loads(ralph(root, "agent", "show", session_id, "--json").stdout)
        assert shown["status"] == "stopped"
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()


def test_watch_shows_a_session_and_exits_by_how_it_ended(tmp_path: Path) -> None:
    root = project(tmp_path)
    done = ralph(root, "agent", "run", "say hello", "--quiet")
    assert done.returncode == 0 and done.stderr.count("\n") == 1  # --quiet: the id alone
    session_id = done.stderr.split()[1]
    watched = ralph(root, "agent", "watch", session_id)
    assert watched.returncode == 0, watched.stderr
    lines = [line[9:] for line in watched.stderr.splitlines()]  # after the HH:MM:SS stamp
    assert lines[0] == f"session {session_id}  agent echo"
    assert "say hello" in watched.stderr and lines[-1].startswith("  session completed")
    failed = ralph(root, "agent", "run", "x", "--agent", "fail", "--quiet")
    assert ralph(root, "agent", "watch", failed.stderr.split()[1]).returncode == 1
    assert ralph(root, "agent", "watch", "ses_nope").returncode == 1


def test_detach_leaves_the_session_running_in_a_background_owner(tmp_path: Path) -> None:
    root = project(tmp_path)
    started = ralph(root, "agent", "run", "x", "--agent", "slow", "--detach")
    assert started.returncode == 0, started.stderr
    session_id = started.stdout.strip()
    assert session_id.startswith("ses_") and started.stderr == ""
    record = json.loads(ralph(root, "agent", "show", session_id, "--json").stdout)
    owner = record["owner_pid"]
    try:
        assert record["status"] == "running" and owner != os.getpid()
        assert ralph(root, "agent", "stop", session_id).stdout == f"session {session_id}: stopped\n"
        deadline = time.monotonic() + 30
        while alive(owner):  # the owner ends with its session
            assert time.monotonic() < deadline, "the background owner outlived its session"
            time.sleep(0.05)
    finally:
        if alive(owner):
            os.kill(owner, signal.SIGKILL)
    refused = ralph(root, "agent", "run", "", "--detach")
    assert refused.returncode == 2 and refused.stdout == ""
    assert refused.stderr == "error: the prompt is empty: say what the agent should do\n"



def test_outside_a_project_nothing_is_made_and_a_broken_toml_keeps_sessions_readable(
        tmp_path: Path) -> None:
    empty = tmp_path / "empty"
    empty.mkdir()
    for args in (["list"], ["show", "ses_x"], ["run", "x"]):
        result = ralph(empty, "agent", *args, "--root", str(empty))
        assert result.returncode in (1, 2) and "Traceback" not in result.stderr, result.stderr
        assert result.stderr.count("\n") == 1
    assert list(empty.iterdir()) == []
    root = project(tmp_path)
    session_id = ralph(root, "agent", "run", "x", "--quiet").stderr.split()[1]
    (root / "ralph.toml").write_text("[loop\n")  # broken
    assert ralph(root, "agent", "show", session_id).returncode == 0
    assert session_id in ralph(root, "agent", "list").stdout
    bad = ralph(root, "agent", "run", "x")
    assert bad.returncode == 2 and "invalid TOML" in bad.stderr


def test_a_prompt_on_stdin_that_is_not_utf8_is_bad_input(tmp_path: Path) -> None:
    root = project(tmp_path)
    result = subprocess.run([*RALPH, "agent", "run", "-"], cwd=root, input=b"\xff\xfe",
                            capture_output=True, timeout=TIMEOUT, check=False)
    assert result.returncode == 2
    assert result.stderr == b"error: the prompt on stdin is not valid UTF-8\n"


def test_continue_needs_an_agent_that_can_and_a_session_that_ended(tmp_path: Path) -> None:
    root = project(tmp_path)
    first = ralph(root, "agent", "run", "x", "--quiet")
    session_id = first.stderr.split()[1]
    for args, words in [
            (["--continue", session_id], "cannot be continued: its agent 'echo' reported no "
                                         "conversation id"),
            (["--continue", "ses_nope"], "no agent session 'ses_nope'")]:
        result = ralph(root, "agent", "run", "more", *args)
        assert result.returncode == 2 and words in result.stderr, result.stderr
        assert result.stderr.count("\n") == 1


def test_list_all_adds_the_clis_conversations_and_they_continue_only_with_their_cli(
        tmp_path: Path) -> None:
    root = project(tmp_path)
    home = tmp_path / "home"
    name = "".join(ch if ch.isalnum() else "-" for ch in str(root.resolve()))
    convo = home / ".claude" / "projects" / name / "c9.jsonl"
    convo.parent.mkdir(parents=True)
    convo.write_text(json.dumps({"type": "user", "timestamp": "2026-11-03T00:00:00Z",
                                 "message": {"role": "user", "content": "Earlier work"}}) + "\n")
    env = {**os.environ, "HOME": str(home)}
    env.pop("CLAUDE_CONFIG_DIR", None)
    listed = subprocess.run([*RALPH, "agent", "list", "--all", "--json"], cwd=root, env=env,
                            capture_output=True, text=True, timeout=TIMEOUT, check=False)
    assert listed.returncode == 0, listed.stderr
    [native] = json.loads(listed.stdout)
    assert (native["kind"], native["id"], native["summary"], native["messages"]) == (
        "native", "claude:c9", "Earlier work", 1)
    table = subprocess.run([*RALPH, "agent", "list", "--all"], cwd=root, env=env,
                           capture_output=True, text=True, timeout=TIMEOUT, check=False).stdout
    assert "claude:c9" in table and "Earlier work" in table
    (root / "ralph.toml").write_text("[loop\n")  # broken: listing still works
    relative = subprocess.run([*RALPH, "agent", "list", "--all", "--json", "--root",
                               root.name], cwd=root.parent, env=env, capture_output=True,
                              text=True, timeout=TIMEOUT, check=False)
    assert relative.returncode == 0, relative.stderr
    assert [n["id"] for n in json.loads(relative.stdout)] == ["claude:c9"]
    (root / "ralph.toml").write_text("[loop]\ndefault_agent = \"echo\"\n\n" + "".join(
        f"[agents.{name}]\nargv = {json.dumps(argv)}\n\n" for name, argv in AGENTS.items()))
    wrong = ralph(root, "agent", "run", "more", "--agent", "echo", "--continue", "claude:c9")
    assert wrong.returncode == 2
    assert "claude:c9 is a claude conversation: continue it with an agent whose adapter is " \
           "claude, not 'echo' (command)" in wrong.stderr
