"""`ralph nu` end to end with the real opencode CLI (pinned in tests/agents/package.json)
against the fake model server, run inside a network namespace that has only loopback
(`unshare -n`), as tests/agents/test_e2e.py runs the loop.

A named session over a two-task spec, run as a user runs it (`python -m ralph nu --name e2e
... --iterations 3`, a subprocess): one `opencode web` server for the whole session, each
iteration an `opencode run --attach` titled "e2e - Iteration #N". The fake model plays an
honest agent through Ralph's own commands as the prompt shows them
(tests/agents/nu_e2e_driver.py): iteration 1 notes the two tasks as remaining, iterations 2
and 3 each do one (in_progress, the file, completed), and iteration 3 claims completion,
which Ralph accepts: no note left open, the gates pass (each file, once there, must hold its
letter).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from tests.agents.clienv import run_driver
from tests.agents.nu_e2e_driver import NAME, TASKS, first_line, marked
from tests.proc.helpers import group_members, wait_until

DRIVER = Path(__file__).with_name("nu_e2e_driver.py")


def drive(tmp_path: Path) -> dict[str, Any]:
    """Run the driver in a fresh network namespace; its findings."""
    return run_driver(DRIVER, f"--project {tmp_path / 'proj'}", tmp_path / "out.json",
                      cli="opencode", what="nu e2e driver")


def metas(result: dict[str, Any], topic: str) -> list[dict[str, Any]]:
    return [e["meta"] for e in result["events"] if e["topic"] == topic]


def test_a_named_session_with_the_real_opencode(tmp_path: Path) -> None:
    result = drive(tmp_path)
    proj, port = tmp_path / "proj", result["port"]
    output = f"{result['stdout']}\n{result['stderr']}"
    assert result["exit"] == 0, output
    assert "session e2e is verified complete" in output, output
    assert f"Web UI: http://localhost:{port}\n" in output, output

    # One server for the session (`opencode web`, not its `serve` fallback), every
    # iteration attached to it with its title.
    log = result["server_log"]
    assert log.count("Web interface:") == 1 and f"http://127.0.0.1:{port}/" in log, log
    started = metas(result, "agent.started")
    assert [s["argv"][:6] for s in started] == [
        ["opencode", "run", "--attach", f"http://127.0.0.1:{port}", "--title",
         f"{NAME} - Iteration #{n}"] for n in (1, 2, 3)], started
    # While iteration 3 ran: the server's own session list, and its processes.
    seen = result["seen"]
    assert seen is not None, "the fake model never saw iteration 3's prompt"
    sessions = seen.get("sessions")
    assert isinstance(sessions, list), seen
    assert sorted(s["title"] for s in sessions) == [f"{NAME} - Iteration #{n}"
                                                    for n in (1, 2, 3)], sessions
    assert {s["directory"] for s in sessions} == {str(proj.resolve())}
    server_pgid = seen["active_run"]["server_pgid"]
    running_then = seen["marked"]
    servers = [pid for pid, cmd in running_then.items() if cmd.startswith("opencode web ")]
    assert servers == [str(server_pgid)], running_then
    assert running_then[str(server_pgid)] == (f"opencode web --port {port} "
                                              "--hostname 127.0.0.1")
    attached = [cmd for cmd in running_then.values() if cmd.startswith("opencode run ")]
    assert len(attached) == 1 and f"--title {NAME} - Iteration #3" in attached[0], running_then
    assert str(result["pid"]) in running_then

    # The session's record: its iterations, its notes, the claim and Ralph's verdict.
    iterations = metas(result, f"ralph.{NAME}.iteration")
    assert [(m["action"], m["n"]) for m in iterations] == [
        (action, n) for n in (1, 2, 3) for action in ("start", "complete")], iterations
    completes = [m for m in iterations if m["action"] == "complete"]
    assert [m["status"] for m in completes] == ["success"] * 3
    assert [(m["verified"], m["loop_status"]) for m in completes] == [
        (False, "not_done"), (False, "not_done"), (True, "done")], completes
    notes = result["notes"]
    assert [(n["type"], n["iteration"], n["text"]) for n in notes] == [
        ("remaining", 1, TASKS["a"]), ("remaining", 1, TASKS["b"]),
        ("in_progress", 2, TASKS["a"]), ("completed", 2, "Created a.txt containing a"),
        ("in_progress", 3, TASKS["b"]), ("completed", 3, "Created b.txt containing b")], notes
    ids = [n["id"] for n in notes]
    assert [n["resolves"] for n in notes] == [[], [], [ids[0]], [ids[2]], [ids[1]], [ids[4]]]
    controls = metas(result, f"ralph.{NAME}.control")
    assert [(m["action"], m["iteration"]) for m in controls] == [
        ("session_complete", 3), ("completion_accepted", 3)], controls
    finished = metas(result, "iteration.finished")
    assert [f["gates_ok"] for f in finished] == [True] * 3, finished

    # The fake model was asked by each iteration's prompt: the shell call, then the answer.
    asked = [r for r in result["requests"] if r["rule"] is not None and r["rule"] != "default"]
    assert [(r["rule"], r["tool_calls"]) for r in asked] == [
        (f"iteration{n}", calls) for n in (1, 2, 3) for calls in (["bash"], [])], asked
    prompts = [r["last_user_text"] for r in asked[::2]]
    done_line = f"{result['ralph']} nu done --store {result['store']} --name {NAME}\n"
    for n, prompt in enumerate(prompts, 1):
        assert prompt.startswith(first_line(n)) and TASKS["a"] in prompt, prompt
        assert done_line in prompt, prompt
    # The session's state in the prompt: the open notes with their ids, no settled one.
    assert all(f"[{ids[i]}] {TASKS[key]}" in prompts[1] for i, key in ((0, "a"), (1, "b")))
    assert f"[{ids[1]}] {TASKS['b']}" in prompts[2], prompts[2]
    assert ids[0] not in prompts[2] and ids[2] not in prompts[2], prompts[2]
    assert f"completion of session {NAME} claimed in iteration #3" in asked[-1][
        "tool_result_text"]

    # The work, committed by Ralph, one task an iteration; nothing left behind.
    assert (proj / "a.txt").read_text() == "a" and (proj / "b.txt").read_text() == "b"
    commits = result["file_commits"]
    assert [len(commits["a.txt"]), len(commits["b.txt"])] == [1, 1], commits
    assert commits["a.txt"][0].endswith(f"{NAME} - Iteration #2"), commits
    assert commits["b.txt"][0].endswith(f"{NAME} - Iteration #3"), commits
    assert result["dirty"] == [], result["dirty"]
    agent_pids = [f["pid"] for f in metas(result, "agent.finished")]
    assert len(agent_pids) == 3
    groups = (result["pid"], server_pgid, *agent_pids)  # `ralph nu`'s, the server's, agents'

    def left() -> dict[str, Any]:
        """Running processes of those groups, or with the driver's marker (Ralph's guard
        among them: it ends once `ralph nu` has, after one last look)."""
        members = {pgid: group_members(pgid) for pgid in groups}
        return {"groups": {pgid: pids for pgid, pids in members.items() if pids},
                "marked": marked(result["marker"])}

    wait_until(lambda: left() == {"groups": {}, "marked": {}}, 15)
    assert left() == {"groups": {}, "marked": {}}
