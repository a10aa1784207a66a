"""ralph.approvals.opencode_run: opencode under approvals ask / deny. Its command line, its
translation of the server's events (recorded from opencode 1.18.33: tests/approvals/recorded)
into what `opencode run --format json` prints, and whole runs against a stand-in server
(tests/approvals/fake_opencode.py). The real opencode: tests/agents/test_e2e.py."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from fnmatch import fnmatchcase
from pathlib import Path
from typing import Any

import pytest

from ralph.agents import adapter_for
from ralph.agents.opencode import OpencodeAdapter, OpencodeParser
from ralph.approvals.desk import ApprovalDesk
from ralph.approvals.opencode_args import (
    RunArgs,
    UsageError,
    parse_command_line,
    parse_run,
    prompt_text,
)
from ralph.approvals.opencode_events import ASK_ALL, RUN_RULES, Turn, asking
from ralph.approvals.policy import ApprovalPolicy, PolicyFile
from ralph.approvals.rules import ApprovalMode
from ralph.store import Store

RECORDED = Path(__file__).parent / "recorded"
FAKE = Path(__file__).with_name("fake_opencode.py")
OPENCODE_RUN_LINE_KEYS = {"type", "timestamp", "sessionID", "part"}  # its own json output


def recorded(name: str) -> list[dict[str, Any]]:
    path = RECORDED / f"opencode-1.18.33-{name}.jsonl"
    return [json.loads(line) for line in path.read_text().splitlines()]


def session_of(events: list[dict[str, Any]]) -> str:
    return str(next(e["properties"]["info"]["id"] for e in events
                    if e["type"] == "session.created"))


def replay(turn: Turn, events: list[dict[str, Any]]) -> tuple[list[dict[str, Any]], list[Any]]:
    """Feed `events` until the turn ends: the lines printed, the permission requests."""
    lines: list[dict[str, Any]] = []
    asks: list[Any] = []
    for event in events:
        reaction = turn.feed(event)
        lines += reaction.lines
        if reaction.ask is not None:
            asks.append(reaction.ask)
        if turn.ended:
            break
    return lines, asks


# -- the command line --------------------------------------------------------------------------


def test_the_opencode_command_line_is_read_as_opencode_run_reads_it() -> None:
    run = parse_run(["/opt/oc", "--print-logs", "run", "--format", "json", "-m", "fake/m-1",
                     "--agent=build", "-s", "ses_1", "--log-level", "ERROR", "--title", "T",
                     "--variant", "high", "--thinking", "fix", "the bug", "--", "--now"])
    assert run == RunArgs("/opt/oc", ("fake", "m-1"), "build", "ses_1", "high", "T", True,
                          ("--print-logs", "--log-level", "ERROR"),
                          ("fix", "the bug", "--now"))
    assert parse_run(["opencode", "run"]) == RunArgs("opencode")
    assert parse_run(["opencode", "run", "--session", "ses_x", "--model",
                      "openai/gpt-5/mini"]).model == ("openai", "gpt-5/mini")
    policy, run = parse_command_line(['{"mode": "ask"}', "--", "opencode", "run", "hi"])
    assert policy == '{"mode": "ask"}' and run.message == ("hi",)


@pytest.mark.parametrize(("argv", "says"), [
    (["opencode", "run", "--attach", "http://127.0.0.1:1"],
     "error: option '--attach' is invalid under approvals ask or deny: Ralph starts"),
    (["opencode", "run", "--auto"], "error: option '--auto' is invalid"),
    (["opencode", "run", "--dangerously-skip-permissions"],
     "error: option '--dangerously-skip-permissions' is invalid"),
    (["opencode", "run", "--fork"], "error: unknown option '--fork'"),
    (["opencode", "run", "-m"], "error: missing required argument: -m needs a value"),
    (["opencode", "run", "-m", "no-slash"], "error: invalid value for --model: 'no-slash'"),
    (["opencode", "serve"], "error: unrecognized subcommand 'serve'"),
    (["opencode", "--print-logs"], "error: missing required argument: the command"),
])
def test_what_the_bridge_cannot_run_is_refused_in_an_argument_parsers_words(
        argv: list[str], says: str) -> None:
    with pytest.raises(UsageError) as refused:
        parse_run(argv)
    assert str(refused.value).startswith(says), refused.value
    # Ralph reads that wording, on stderr before any event, as a configuration error
    parser = OpencodeParser()
    parser.feed_line("stderr", str(refused.value))
    assert OpencodeAdapter().classify(2, parser).status == "config_error"


def test_the_policy_file_and_the_separator_are_required() -> None:
    for argv in ([], ["/p"], ["/p", "opencode", "run"], ["/p", "--"]):
        with pytest.raises(UsageError, match=r"usage: python -m ralph\.approvals\.opencode_run"):
            parse_command_line(argv)


def test_the_prompt_is_the_message_words_then_stdin_as_opencode_makes_it() -> None:
    assert prompt_text([], "from stdin\n") == "from stdin\n"
    assert prompt_text(["fix", "it"], None) == "fix it"
    assert prompt_text(["fix", 'the "big" bug'], "details") == 'fix "the \\"big\\" bug"\ndetails'
    assert prompt_text([], None) == ""


# -- the events, as `opencode run --format json` prints them -----------------------------------


def test_an_allowed_call_prints_what_opencode_run_prints() -> None:
    events = recorded("allowed")
    session = session_of(events)
    turn = Turn(session)
    lines, asks = replay(turn, events)
    assert turn.ended and not turn.failed
    # the same lines as `opencode run --format json` for this prompt (step by step)
    assert [line["type"] for line in lines] == ["step_start", "tool_use", "step_finish",
                                                "step_start", "text", "step_finish"]
    assert all(set(line) == OPENCODE_RUN_LINE_KEYS and line["sessionID"] == session
               for line in lines)
    own = json.loads((Path(__file__).parents[1] / "agents" / "recorded"
                      / "opencode-shell.stdout").read_text().splitlines()[1])
    assert set(own) == OPENCODE_RUN_LINE_KEYS and own["type"] == "tool_use"
    tool = lines[1]["part"]
    assert tool["state"]["status"] == "completed" and tool["state"]["output"] == "(no output)"
    assert lines[4]["part"]["text"] == "Finished."
    [ask] = asks
    assert (ask.tool_use_id, ask.tool_name) == ("call_767853949000001", "bash")
    assert ask.request_id.startswith("per_")
    assert ask.tool_input == {"command": "echo hi > proof.txt",
                              "patterns": ["echo hi > proof.txt"]}


def test_the_lines_read_as_opencodes_own_output() -> None:
    events = recorded("allowed")
    turn = Turn(session_of(events))
    lines, _ = replay(turn, events)
    parser = OpencodeParser()
    said = [e for line in lines for e in parser.feed_line("stdout", json.dumps(line))]
    assert [(e.kind, e.tool) for e in said] == [
        ("tool_use", "bash"), ("tool_result", "bash"), ("text", None)]
    assert parser.not_json == 0 and parser.session_id == turn.session_id
    assert parser.usage is not None
    assert (parser.usage.input_tokens, parser.usage.output_tokens) == (2400, 80)
    assert OpencodeAdapter().classify(0, parser).status == "ok"


def test_a_rejected_call_is_a_failed_tool_and_the_turn_goes_on() -> None:
    events = recorded("rejected")
    turn = Turn(session_of(events))
    lines, asks = replay(turn, events)
    assert turn.ended and not turn.failed and len(asks) == 1
    [tool] = [line["part"] for line in lines if line["type"] == "tool_use"]
    assert tool["state"]["status"] == "error"
    assert tool["state"]["error"] == ("The user rejected permission to use this specific tool "
                                      "call with the following feedback: denied by X (Ralph): "
                                      "because")
    assert [line["part"]["text"] for line in lines if line["type"] == "text"] == ["Finished."]


def test_a_session_error_is_an_error_line_and_the_turn_ends_at_idle() -> None:
    events = recorded("model-not-found")
    turn = Turn(session_of(events))
    lines, _ = replay(turn, events)
    assert turn.ended and turn.failed
    assert lines == [{"type": "error", "timestamp": lines[0]["timestamp"],
                      "sessionID": turn.session_id,
                      "error": {"name": "UnknownError",
                                "data": {"message": "Model not found: fake/nope."}}}]
    parser = OpencodeParser()
    parser.feed_line("stdout", json.dumps(lines[0]))
    verdict = OpencodeAdapter().classify(1, parser)
    assert (verdict.status, verdict.message) == ("config_error", "Model not found: fake/nope.")


def part_event(part: dict[str, Any]) -> dict[str, Any]:
    return {"type": "message.part.updated",
            "properties": {"sessionID": part["sessionID"], "part": part}}


def test_parts_are_printed_once_when_complete_reasoning_only_with_thinking() -> None:
    text = {"id": "prt_1", "sessionID": "ses_a", "type": "text", "text": "Hel",
            "time": {"start": 1}}
    done = {**text, "text": "Hello", "time": {"start": 1, "end": 2}}
    thought = {"id": "prt_2", "sessionID": "ses_a", "type": "reasoning", "text": "hm",
               "time": {"start": 1, "end": 2}}
    running = {"id": "prt_3", "sessionID": "ses_a", "type": "tool", "tool": "bash",
               "state": {"status": "running", "input": {"command": "ls"}}}
    other = {**done, "id": "prt_4", "sessionID": "ses_other"}
    events = [part_event(p) for p in (text, done, done, thought, running, other)]
    for thinking, kinds in ((False, ["text"]), (True, ["text", "reasoning"])):
        turn = Turn("ses_a", thinking=thinking)
        lines = [line for event in events for line in turn.feed(event).lines]
        assert [line["type"] for line in lines] == kinds
        assert lines[0]["part"]["text"] == "Hello"


def test_the_turn_ends_at_idle_only_after_it_was_busy() -> None:
    def status(session: str, state: str) -> dict[str, Any]:
        return {"type": "session.status",
                "properties": {"sessionID": session, "status": {"type": state}}}

    turn = Turn("ses_a")
    for event in (status("ses_a", "idle"), status("ses_b", "busy"), status("ses_b", "idle"),
                  {"type": "server.heartbeat", "properties": {}}, {"type": "odd"}):
        turn.feed(event)
    assert not turn.ended
    turn.feed(status("ses_a", "busy"))
    turn.feed(status("ses_a", "idle"))
    assert turn.ended and not turn.failed


def asked(session: str, request: str, **extra: Any) -> dict[str, Any]:
    return {"type": "permission.asked",
            "properties": {"id": request, "sessionID": session, "permission": "edit",
                           "patterns": ["src/a.py"], "always": ["*"],
                           "metadata": {"filepath": "/p/src/a.py", "diff": "+x"}, **extra}}


def test_subagents_sessions_are_followed_and_their_requests_asked() -> None:
    turn = Turn("ses_a")
    child: dict[str, Any] = {"id": "ses_child", "parentID": "ses_a", "permission": [
        {"permission": "task", "pattern": "*", "action": "deny"}]}
    created = {"type": "session.created", "properties": {"info": child}}
    assert turn.feed(asked("ses_child", "per_0")).ask is None  # not ours (yet)
    assert turn.feed(created).child == child
    assert turn.feed(created).child is None  # once
    grandchild = {"type": "session.created",
                  "properties": {"info": {"id": "ses_grand", "parentID": "ses_child"}}}
    assert turn.feed(grandchild).child is not None
    stranger = {"type": "session.created",
                "properties": {"info": {"id": "ses_x", "parentID": "ses_other"}}}
    assert turn.feed(stranger).child is None
    ask = turn.feed(asked("ses_grand", "per_1", tool={"callID": "call_9"})).ask
    assert ask is not None and (ask.tool_use_id, ask.tool_name) == ("call_9", "edit")
    # the request's metadata (an edit's filepath: what path rules match) and its patterns
    assert ask.tool_input == {"filepath": "/p/src/a.py", "diff": "+x",
                              "patterns": ["src/a.py"]}
    # the same call's next request (bash outside the project: external_directory, then
    # bash) is decided on its own
    again = turn.feed(asked("ses_grand", "per_5", tool={"callID": "call_9"})).ask
    assert again is not None and again.tool_use_id == "call_9/per_5"
    # a request without a tool call (opencode's doom-loop check) is named by its own id
    lone = turn.feed(asked("ses_a", "per_2")).ask
    assert lone is not None and lone.tool_use_id == "per_2"
    assert turn.feed(asked("ses_x", "per_3")).ask is None


def test_a_session_is_made_to_ask_with_its_own_denials_kept() -> None:
    deny_q = {"permission": "question", "pattern": "*", "action": "deny"}
    allow_bash = {"permission": "bash", "pattern": "*", "action": "allow"}
    assert asking([deny_q, allow_bash]) == [ASK_ALL, deny_q]
    assert asking(None) == [ASK_ALL]
    assert asking([ASK_ALL, *RUN_RULES]) == []  # asks already: nothing to add
    assert asking([ASK_ALL, allow_bash]) == [ASK_ALL]  # a later allow would win: ask again


# -- the adapter -------------------------------------------------------------------------------


def test_the_adapter_runs_opencode_through_the_bridge_under_ask_and_deny(tmp_path: Path) -> None:
    adapter = adapter_for("opencode")
    argv = adapter.default_argv("fake/m")
    policy = PolicyFile(ApprovalPolicy("ask", (), (), 5), tmp_path / "store", "ses_1",
                        tmp_path / "ses_1", tmp_path).encode()
    assert adapter.approvals_argv(argv, "auto", policy, tmp_path) == argv
    for mode in ("ask", "deny"):
        bridged = adapter.approvals_argv(argv, mode, policy, tmp_path)
        assert bridged[bridged.index("-m") + 1:] == ["ralph.approvals.opencode_run", policy,
                                                    "--", *argv]
        assert bridged[0] == sys.executable
        command = adapter.build(bridged, "fake/m", "the prompt", "/p/prompt.md")
        assert command.argv == bridged and command.stdin == b"the prompt"
        assert adapter.approvals_files(mode) == {}
    continued = adapter.approvals_argv(adapter.continue_argv(argv, "ses_9"), "ask", policy,
                                       tmp_path)
    given, run = parse_command_line(continued[continued.index("-m") + 2:])
    assert PolicyFile.load(given).session_id == "ses_1" and run.session == "ses_9"


# -- whole runs, against a stand-in for `opencode serve` ---------------------------------------


class Project:
    """A store, a session folder with its policy file, and the stand-in's paths."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.cwd = root / "work"
        self.cwd.mkdir()
        self.folder = root / "sessions" / "ses_r"
        self.folder.mkdir(parents=True)
        self.store_path = root / "store"
        self.record = root / "requests.jsonl"
        self.pidfile = root / "server.pid"
        self.program = root / "opencode"
        self.program.write_text(f"#!/bin/sh\nexec {sys.executable} {FAKE} \"$@\"\n")
        self.program.chmod(0o755)

    def policy(self, mode: ApprovalMode, allow: tuple[str, ...] = (),
               timeout_s: float = 60) -> str:
        """The session's policy, inline (as the session service gives it)."""
        return PolicyFile(ApprovalPolicy(mode, allow, (), timeout_s), self.store_path,
                          "ses_r", self.folder, self.cwd).encode()

    def start(self, policy: str, *run: str, mode: str = "tool",
              stdin: str = "do it") -> subprocess.Popen[str]:
        env = {**os.environ, "FAKE_OPENCODE_MODE": mode, "FAKE_OPENCODE_RECORD": str(self.record),
               "FAKE_OPENCODE_PIDFILE": str(self.pidfile)}
        prompt = self.root / "stdin.txt"
        prompt.write_text(stdin)
        with prompt.open() as given:
            return subprocess.Popen(
                [sys.executable, "-I", "-m", "ralph.approvals.opencode_run", policy, "--",
                 str(self.program), "run", "--format", "json", *run], cwd=self.cwd, env=env,
                stdin=given, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)

    def requests(self, method: str, path: str) -> list[dict[str, Any]]:
        """The stand-in's requests of `method` whose path matches the glob `path`."""
        found = [json.loads(line) for line in self.record.read_text().splitlines()]
        return [r for r in found if r["method"] == method and fnmatchcase(r["path"], path)]

    def server_gone(self) -> bool:
        return not Path(f"/proc/{self.pidfile.read_text()}").exists()


@pytest.fixture
def project(tmp_path: Path) -> Iterator[Project]:
    made = Project(tmp_path)
    with Store(made.store_path):
        pass
    yield made


def finish(proc: subprocess.Popen[str]) -> tuple[int, list[dict[str, Any]], str]:
    """Exit code, the stdout lines (each must be JSON), stderr."""
    out, err = proc.communicate(timeout=60)
    return proc.returncode, [json.loads(line) for line in out.splitlines()], err


def approvals(store_path: Path, topic: str) -> list[dict[str, Any]]:
    with Store(store_path) as store:
        return [f.meta for f in store.read(topic=topic, stream="sessions/ses_r")]


def test_a_call_a_rule_allows_runs_and_the_turn_is_printed(project: Project) -> None:
    proc = project.start(project.policy("deny", ("Bash(echo hi > *)",)), "-m", "fake/m",
                         "--agent", "build", "--print-logs")
    code, lines, err = finish(proc)
    assert code == 0, err
    assert [line["type"] for line in lines] == ["step_start", "tool_use", "text", "step_finish"]
    assert lines[1]["part"]["state"]["status"] == "completed"
    assert (project.cwd / "proof.txt").read_text() == "hi\n"
    assert "INFO fake log line on stderr" in err  # opencode's log, as `opencode run` shows it
    log = (project.folder / "opencode-server.log").read_text()
    assert "opencode server listening on" in log and "INFO fake log line" in log
    [created] = project.requests("POST", "/session")
    assert created["body"] == {"permission": [ASK_ALL, *RUN_RULES]}
    assert created["query"] == {"directory": [str(project.cwd)]}
    [prompt] = project.requests("POST", "/session/*/prompt_async")
    assert prompt["body"] == {"parts": [{"type": "text", "text": "do it"}], "agent": "build",
                              "model": {"providerID": "fake", "modelID": "m"}}
    [reply] = project.requests("POST", "/permission/*/reply")
    assert reply["body"] == {"reply": "once"}
    [request] = approvals(project.store_path, "session.approval_requested")
    assert (request["tool_use_id"], request["tool_name"]) == ("call_fake_1", "bash")
    [answer] = approvals(project.store_path, "session.approval_answered")
    assert (answer["decision"], answer["by"], answer["rule"]) == ("allow", "rule",
                                                                   "Bash(echo hi > *)")
    parser = OpencodeParser()
    for line in lines:
        parser.feed_line("stdout", json.dumps(line))
    assert parser.usage is not None and parser.usage.cost_usd == 0.25
    assert project.server_gone()


def test_a_persons_denial_reaches_the_model_and_the_turn_goes_on(project: Project) -> None:
    proc = project.start(project.policy("ask"), "--thinking", "look", "here")
    with Store(project.store_path) as store:
        desk = ApprovalDesk(store, "ses_r", project.folder)
        deadline = time.monotonic() + 30
        while not desk.pending() and time.monotonic() < deadline:
            time.sleep(0.05)
        [pending] = desk.pending()
        assert (pending.tool_use_id, pending.input["command"]) == ("call_fake_1",
                                                                   "echo hi > proof.txt")
        desk.answer(pending.tool_use_id, "deny", "not now", by="a person")
    code, lines, err = finish(proc)
    assert code == 0, err
    assert [line["type"] for line in lines] == ["step_start", "tool_use", "text", "reasoning",
                                                "step_finish"]
    assert lines[1]["part"]["state"]["error"].endswith(
        "feedback: denied by a person (Ralph): not now")
    [reply] = project.requests("POST", "/permission/*/reply")
    assert reply["body"] == {"reply": "reject", "message": "denied by a person (Ralph): not now"}
    [prompt] = project.requests("POST", "/session/*/prompt_async")
    assert prompt["body"]["parts"][0]["text"] == "look here\ndo it"
    assert not (project.cwd / "proof.txt").exists()


def test_continuing_a_session_makes_it_ask_and_keeps_its_denials(project: Project) -> None:
    # the policy may also be given as a file's path
    policy = PolicyFile.load(project.policy("deny")).write()
    code, lines, err = finish(project.start(str(policy), "-s", "ses_existing"))
    assert code == 0, err
    assert {line["sessionID"] for line in lines} == {"ses_existing"}
    assert project.requests("POST", "/session") == []
    [patched] = project.requests("PATCH", "/session/ses_existing")
    assert patched["body"] == {"permission": [
        ASK_ALL, {"permission": "question", "pattern": "*", "action": "deny"}]}
    [answer] = approvals(project.store_path, "session.approval_answered")
    assert (answer["decision"], answer["by"]) == ("deny", "mode")


def test_no_subagent_is_started_under_ask_or_deny(project: Project) -> None:
    """A subagent's conversation does not apply the asking rule added to it (opencode
    1.18.33): its calls would run unasked, so its start (the task tool) is denied, even where
    a rule would allow it, and said so; the model goes on without it."""
    code, lines, err = finish(project.start(project.policy("deny", ("task",)), mode="child"))
    assert code == 0, err
    assert project.requests("PATCH", "/session/*") == []
    [request] = approvals(project.store_path, "session.approval_requested")
    assert (request["tool_name"], request["tool_use_id"]) == ("task", "call_fake_task")
    [answer] = approvals(project.store_path, "session.approval_answered")
    assert (answer["decision"], answer["by"]) == ("deny", "ralph")
    [reply] = project.requests("POST", "/permission/*/reply")
    assert reply["body"]["reply"] == "reject"
    assert "subagents are not started" in reply["body"]["message"]
    assert not (project.cwd / "proof.txt").exists()
    assert [line["part"]["state"]["status"] for line in lines
            if line["type"] == "tool_use"] == ["error"]


def test_a_session_error_ends_the_run_with_1(project: Project) -> None:
    code, lines, _ = finish(project.start(project.policy("ask"), mode="error"))
    assert code == 1
    assert [(line["type"], line["error"]["data"]["message"]) for line in lines] == [
        ("error", "Model not found: fake/x.")]


@pytest.mark.parametrize(("mode", "run", "says"), [
    ("exit", (), "`{program} serve` exited with 3 before it answered"),
    ("die", (), "opencode's server ended its event stream before the turn ended (it exited "
                "with 7)"),
    ("tool", ("-s", "ses_nope"), "opencode has no session ses_nope (Session not found)"),
])
def test_what_goes_wrong_is_one_line_and_one_error_event(
        project: Project, mode: str, run: tuple[str, ...], says: str) -> None:
    code, lines, err = finish(project.start(project.policy("ask"), *run, mode=mode))
    message = says.format(program=project.program)
    assert code == 1
    *before, line = lines  # what the turn printed until then (the step begun), the error
    assert [b["type"] for b in before] == (["step_start"] if mode == "die" else [])
    assert line["type"] == "error" and line["error"]["name"] == "RalphBridgeError"
    assert line["error"]["data"]["message"].startswith(message), line
    own = [text for text in err.splitlines() if text.startswith("ralph (opencode")]
    assert len(own) == 1 and message in own[0], err
    assert "Traceback" not in err
    if mode == "exit":
        assert "fake opencode: cannot start (on purpose)" in err  # the server's own reason
    parser = OpencodeParser()
    parser.feed_line("stdout", json.dumps(line))
    assert OpencodeAdapter().classify(code, parser).status == "error"
    assert project.server_gone()


def test_a_command_line_it_cannot_run_prints_nothing_on_stdout(project: Project) -> None:
    proc = project.start(project.policy("ask"), "--attach", "http://127.0.0.1:9")
    code, lines, err = finish(proc)
    assert (code, lines) == (2, [])
    assert err.startswith("error: option '--attach' is invalid") and err.count("\n") == 1
    code, lines, err = finish(project.start(project.policy("ask"), stdin=""))
    assert (code, lines) == (2, [])
    assert err.startswith("error: missing required argument: a message")
    assert not project.pidfile.exists()  # no server started


def test_sigterm_stops_the_server_and_ends_the_run(project: Project) -> None:
    proc = project.start(project.policy("ask"))
    with Store(project.store_path) as store:
        desk = ApprovalDesk(store, "ses_r", project.folder)
        deadline = time.monotonic() + 30
        while not desk.pending() and time.monotonic() < deadline:
            time.sleep(0.05)
        assert desk.pending()
    proc.send_signal(signal.SIGTERM)
    code, lines, err = finish(proc)
    assert code == 128 + signal.SIGTERM, err
    assert [line["type"] for line in lines] == ["step_start"]  # no error: it was stopped
    assert "Traceback" not in err
    assert project.server_gone()
