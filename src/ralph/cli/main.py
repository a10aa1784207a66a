"""Entry point: runs the Typer app and turns every failure into one line on stderr.

Start-up time is part of the interface (editors and scripts call `ralph` often), so this
module imports nothing heavy at the top: `ralph --version` is answered before Typer, Rich or
pydantic are imported, the plain forms of the read-only commands run without Typer
(`ralph.cli.fastpath`), and otherwise only the command that was asked for is loaded
(`ralph.cli.commands`)."""

from __future__ import annotations

import os
import re
import sys
from collections.abc import Callable
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import typer

EXIT_ERROR = 1
EXIT_USAGE = 2
EXIT_INTERRUPTED = 130
EXIT_INTERNAL = 70
_LINE_BREAK = re.compile(r"[ \t]*\n[ \t]*")


def main(argv: list[str] | None = None) -> None:
    """`ralph ...`: exit 0 on success, 1 on a failed operation, 2 on bad usage."""
    sys.exit(run(argv))


def run(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if args == ["--version"]:
        return _version()
    from ralph.cli.fastpath import plain_command
    from ralph.cli.output import setup_logging

    setup_logging()
    work = plain_command(args)
    if work is not None:
        return _guarded(lambda: _interruptible(work))
    return _guarded(lambda: _run_typer(args))


def _version() -> int:
    """`ralph --version` without Typer: the root command's eager --version option prints the
    same line, but importing Typer alone takes longer than the rest of this process."""
    from ralph import __version__

    try:
        sys.stdout.write(f"ralph {__version__}\n")
        sys.stdout.flush()
    except BrokenPipeError:
        _silence_stdout()
    return 0


def _interruptible(work: Callable[[], None]) -> int:
    """A command run without Typer, interrupted as Typer's main ends one: Ctrl-C exits 130
    quietly, the end of input 130 after a new line."""
    try:
        work()
    except KeyboardInterrupt:
        return EXIT_INTERRUPTED
    except EOFError:
        sys.stderr.write("\n")
        return EXIT_INTERRUPTED
    return 0


def _run_typer(args: list[str]) -> object:
    """`ralph ARGS` parsed and run by Typer, with only the command it names loaded."""
    from ralph.cli.commands import build_app

    return run_app(build_app(args[0] if args else None), args, "ralph")


def run_guarded(app: typer.Typer, args: list[str], prog_name: str) -> int:
    """Another console script's Typer `app` (`ac`) run as `ralph` is: usage errors and
    failures one line on stderr, its exit codes."""
    from ralph.cli.output import setup_logging

    setup_logging()
    return _guarded(lambda: run_app(app, args, prog_name))


def run_app(app: typer.Typer, args: list[str], prog_name: str) -> object:
    """`app` on `args`; its exit requests and usage errors as exit codes."""
    import typer

    command = typer.main.get_command(app)
    try:
        return command.main(args=args, prog_name=prog_name, standalone_mode=False)
    except typer.Exit as exc:
        return int(exc.exit_code)
    except typer.Abort:
        return EXIT_INTERRUPTED
    except typer.TyperException as exc:  # click's usage errors (bad option, missing argument)
        return _usage_error(exc)


def _guarded(work: Callable[[], object]) -> int:
    """Run a command's work: its exit code, and every failure as one line on stderr."""
    from ralph.cli.output import error_line
    from ralph.errors import RalphError

    try:
        result = work()
    except RalphError as exc:
        error_line(str(exc))
        return EXIT_ERROR
    except KeyboardInterrupt:
        sys.stderr.write("\n")
        return EXIT_INTERRUPTED
    except BrokenPipeError:
        # The reader went away (`ralph store cat | head`): not an error of ours.
        _silence_stdout()
        return 0
    except SystemExit as exc:
        # Typer and Rich catch a closed stdout themselves and call sys.exit(1), even when
        # Typer is not in standalone mode: the same reader gone away.
        if isinstance(exc.__context__, BrokenPipeError):
            _silence_stdout()
            return 0
        raise
    except Exception as exc:
        if os.environ.get("RALPH_DEBUG"):
            import traceback

            traceback.print_exc()
        error_line(f"unexpected {type(exc).__name__}: {exc} (set RALPH_DEBUG=1 for details)")
        return EXIT_INTERNAL
    return result if isinstance(result, int) else 0


def _usage_error(exc: typer.TyperException) -> int:
    from ralph.cli.output import error_line

    format_message = getattr(exc, "format_message", None)
    message = format_message() if callable(format_message) else str(exc)
    if type(exc).__name__ == "NoArgsIsHelpError":
        # `ralph`, `ralph store`: a group given no command shows its help as is (stderr, exit 2,
        # like click's standalone mode), not folded into one `error:` line.
        sys.stderr.write(message.rstrip("\n") + "\n")
        return EXIT_USAGE
    ctx = getattr(exc, "ctx", None)
    hint = f" (see '{ctx.command_path} --help')" if ctx is not None else ""
    error_line(one_line(f"{message}{hint}"))
    return int(getattr(exc, "exit_code", EXIT_USAGE))


def one_line(message: str) -> str:
    """A usage error's message on one line: click lists choices on lines of their own, indented
    by a tab ("Choose from:\n\tcompleted,\n\t..."), and pydantic prefixes a validator's
    message with "Value error, "."""
    return _LINE_BREAK.sub(" ", message).replace("Value error, ", "")


def _silence_stdout() -> None:
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, sys.stdout.fileno())
    os.close(devnull)
