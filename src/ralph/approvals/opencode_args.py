"""The `opencode run` command line the approvals bridge (ralph.approvals.opencode_run) is
given: the options it takes, the ones it refuses, and the prompt (stdin and message words,
joined as `opencode run` joins them)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

# `opencode run`'s options this program takes: the ones with a value (and the field it goes
# to; "" ignored), the flags.
_VALUED = {"-m": "model", "--model": "model", "--agent": "agent", "-s": "session",
           "--session": "session", "--variant": "variant", "--title": "title",
           "--format": "", "--log-level": "log_level"}
_FLAGS = {"--print-logs": "print_logs", "--thinking": "thinking"}
_REFUSED = {
    "--attach": "Ralph starts an opencode server of its own for the session",
    "--auto": "Ralph answers each permission request",
    "--yolo": "Ralph answers each permission request",
    "--dangerously-skip-permissions": "Ralph answers each permission request",
}


class UsageError(Exception):
    """A command line this program cannot run. The message reads as argument parsers' do
    ("error: unknown option ..."): Ralph takes that for a configuration error."""


@dataclass(frozen=True)
class RunArgs:
    """What this program takes from `opencode run`'s command line."""

    program: str
    model: tuple[str, str] | None = None  # (providerID, modelID)
    agent: str | None = None
    session: str | None = None
    variant: str | None = None
    title: str | None = None
    thinking: bool = False
    server_options: tuple[str, ...] = ()  # --print-logs, --log-level: the server's log
    message: tuple[str, ...] = ()


def parse_command_line(argv: Sequence[str]) -> tuple[str, RunArgs]:
    """`POLICY -- <opencode argv>`: the policy (inline or a file's path), the run."""
    if len(argv) < 3 or argv[1] != "--":
        raise UsageError("error: missing required argument: usage: python -m "
                         "ralph.approvals.opencode_run POLICY -- opencode run [options] "
                         "[message..]")
    return argv[0], parse_run(argv[2:])


def parse_run(argv: Sequence[str]) -> RunArgs:
    """`<program> run [options] [message..]`, global options anywhere."""
    program, rest = argv[0], list(argv[1:])
    values: dict[str, str] = {}
    flags: set[str] = set()
    words: list[str] = []
    command: str | None = None
    i = 0
    while i < len(rest):
        arg = rest[i]
        i += 1
        if arg == "--":
            words += rest[i:]
            break
        if not arg.startswith("-") or arg == "-":
            if command is None and arg != "run":
                raise UsageError(f"error: unrecognized subcommand '{arg}': approvals ask and "
                                 f"deny run `{program} run ...`")
            if command is None:
                command = arg
            else:
                words.append(arg)
            continue
        name, has_value, value = arg.partition("=")
        if name in _REFUSED:
            raise UsageError(f"error: option '{name}' is invalid under approvals ask or deny: "
                             f"{_REFUSED[name]}")
        if name in _VALUED:
            if not has_value:
                if i >= len(rest):
                    raise UsageError(f"error: missing required argument: {name} needs a value")
                value = rest[i]
                i += 1
            values[_VALUED[name]] = value
        elif name in _FLAGS and not has_value:
            flags.add(_FLAGS[name])
        else:
            known = ", ".join([*_VALUED, *_FLAGS])
            raise UsageError(f"error: unknown option '{name}': under approvals ask or deny "
                             f"opencode takes only {known}")
    if command is None:
        raise UsageError(f"error: missing required argument: the command (`{program} run "
                         "...`)")
    server = ["--print-logs"] if "print_logs" in flags else []
    if "log_level" in values:
        server += ["--log-level", values["log_level"]]
    return RunArgs(program, _model(values.get("model")), values.get("agent"),
                   values.get("session"), values.get("variant"), values.get("title"),
                   "thinking" in flags, tuple(server), tuple(words))


def _model(text: str | None) -> tuple[str, str] | None:
    if text is None:
        return None
    provider, _, model = text.partition("/")
    if not provider or not model:
        raise UsageError(f"error: invalid value for --model: {text!r} (write provider/model)")
    return provider, model


def prompt_text(words: Sequence[str], stdin: str | None) -> str:
    """The prompt as `opencode run` makes it: the message words (those with spaces quoted),
    then what came on stdin, on a line of its own."""
    message = " ".join('"' + w.replace('"', '\\"') + '"' if " " in w else w for w in words)
    if not message:
        return stdin or ""
    return f"{message}\n{stdin}" if stdin else message
