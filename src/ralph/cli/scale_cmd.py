"""`ralph worker`, and the `--on temporal` / `--run ID` forms of run, status, stop, pause and
resume: thin faces over ralph.scale (the client of RalphRun workflows, and the worker).

Nothing here imports temporalio until a command runs: `ralph run` alone must not pay for it.
"""

from __future__ import annotations

import contextlib
import os
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, NoReturn

import typer

from ralph.cli.helpfmt import at_least
from ralph.cli.output import error_line, write_json
from ralph.errors import RalphError
from ralph.project import STORE_ENV
from ralph.scale.model import NAMESPACE_ENV, QUEUE_ENV, TEMPORAL_ENV

if TYPE_CHECKING:
    from temporalio.client import Client

    from ralph.cli.log_cmd import _View
    from ralph.scale.model import RunEnd
    from ralph.store import Store


_DRAIN_S = 5.0  # after a run's workflow ended: how long to wait for its last events

TemporalOption = Annotated[str | None, typer.Option(
    "--temporal", metavar="HOST:PORT", show_default=False,
    help="The Temporal server (default: $RALPH_TEMPORAL).")]
NamespaceOption = Annotated[str | None, typer.Option(
    "--namespace", metavar="N", show_default=False,
    help="Temporal namespace (default: $RALPH_TEMPORAL_NAMESPACE, else default).")]
QueueOption = Annotated[str | None, typer.Option(
    "--queue", metavar="Q", show_default=False,
    help="Task queue the workers poll (default: $RALPH_TEMPORAL_QUEUE, else ralph).")]
RunIdOption = Annotated[str | None, typer.Option(
    "--run", metavar="ID", show_default=False,
    help="A run on Temporal (`ralph run --on temporal`), from any machine.")]


def temporal_address(given: str | None) -> str:
    address = given or os.environ.get(TEMPORAL_ENV)
    if not address:
        raise RalphError("name the Temporal server: --temporal HOST:PORT (or set "
                         f"${TEMPORAL_ENV})")
    return address


def namespace_of(given: str | None) -> str:
    from ralph.scale.model import DEFAULT_NAMESPACE

    return given or os.environ.get(NAMESPACE_ENV) or DEFAULT_NAMESPACE


def queue_of(given: str | None) -> str:
    from ralph.scale.model import DEFAULT_QUEUE

    return given or os.environ.get(QUEUE_ENV) or DEFAULT_QUEUE


_connected: list[bool] = []  # a Temporal client was made in this process


async def _client(temporal: str | None, namespace: str | None) -> Client:
    from ralph.scale.client import connect

    address = temporal_address(temporal)
    # Before connecting: a failed connect has started the SDK's threads already.
    _connected.append(True)
    return await connect(address, namespace_of(namespace))


def leave(code: int) -> NoReturn:
    """End the command with `code`. Once a Temporal client exists, the process ends at once,
    its output flushed: the SDK's native threads can abort the interpreter's own shutdown
    ("PyGILState_Release ... finalizing", temporalio/sdk-python#300)."""
    if not _connected:
        raise typer.Exit(code)
    with contextlib.suppress(OSError, ValueError):
        sys.stdout.flush()
    with contextlib.suppress(OSError, ValueError):
        sys.stderr.flush()
    os._exit(code)


def finish(work: Callable[[], int]) -> NoReturn:
    """Run a command's `work` (its exit code); Ralph's errors as one line and exit 2."""
    try:
        code = work()
    except RalphError as exc:
        error_line(str(exc))
        code = 2
    leave(code)


# -- ralph worker ----------------------------------------------------------------------------

def worker(
    temporal: TemporalOption = None,
    namespace: NamespaceOption = None,
    queue: QueueOption = None,
    store: Annotated[str | None, typer.Option(
        "--store", metavar="PATH|URL", show_default=False,
        help="The store every worker and client shares: a postgresql:// URL (default: "
             "$RALPH_STORE, else .ralph/store here).")] = None,
    workdir: Annotated[Path | None, typer.Option(
        "--workdir", metavar="DIR", show_default=False,
        help="Where this worker checks runs out, a directory per run (default: "
             "./ralph-work).")] = None,
    concurrency: Annotated[int, typer.Option(
        "--concurrency", metavar="N", callback=at_least(1),
        help="Iterations this worker runs at once.")] = 2,
    name: Annotated[str | None, typer.Option(
        "--name", metavar="NAME", show_default=False,
        help="This worker's name in events (default: host:pid).")] = None,
) -> None:
    """Run the iterations of runs started with `ralph run --on temporal`, until Ctrl-C or
    SIGTERM. Each run is checked out under --workdir; its agents run as they run locally.

    Exit code: 0 stopped, 2 Temporal or the store cannot be reached."""
    import asyncio
    import signal

    from ralph.project import store_location
    from ralph.scale.worker import WorkerOptions, run_worker

    def options_given() -> WorkerOptions:
        return WorkerOptions(
            address=temporal_address(temporal), store=str(store_location(store)),
            workdir=(workdir or Path("ralph-work")).absolute(),
            namespace=namespace_of(namespace), queue=queue_of(queue),
            concurrency=concurrency, name=name)

    async def serve(options: WorkerOptions) -> None:
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGINT, signal.SIGTERM):
            loop.add_signal_handler(sig, stop.set)

        def ready(worker_name: str) -> None:
            typer.echo(f"worker {worker_name} polls queue {options.queue} on "
                       f"{options.address} (namespace {options.namespace}); work in "
                       f"{options.workdir}; Ctrl-C stops", err=True)

        await run_worker(options, stop, ready)

    def work() -> int:
        options = options_given()
        _connected.append(True)  # the worker's client, made in run_worker
        asyncio.run(serve(options))
        typer.echo("worker stopped", err=True)
        return 0

    finish(work)


# -- ralph run --on temporal -----------------------------------------------------------------

def run_on_temporal(*, temporal: str | None, namespace: str | None, queue: str | None,
                    repo: str | None, branch: str | None, base: str | None,
                    agent: str | None, max_iterations: int | None, store: str | None,
                    detach: bool, json: bool, verbose: bool,
                    heartbeat: float | None = None) -> int:
    """Start a RalphRun; print its id; follow its events until it ends (Ctrl-C detaches).
    The exit code, as a local run's."""
    import asyncio

    from ralph.cli.log_cmd import _View
    from ralph.loop.service import new_run_id
    from ralph.project import store_location
    from ralph.scale import client as runs
    from ralph.scale.model import RunSpec
    from ralph.store import Store

    if not repo:
        raise RalphError("--on temporal needs --repo URL: the git repository every worker "
                         "checks the run out from")
    if not detach and store is None and not os.environ.get(STORE_ENV):
        raise RalphError("name the store the workers share, to follow the run: --store "
                         "PATH|URL (or set $RALPH_STORE), or --detach")
    run_id = new_run_id()
    spec = RunSpec(run_id=run_id, repo=_repo_url(repo), branch=branch or f"ralph/{run_id}",
                   base=base, agent=agent, max_iterations=max_iterations or 0)
    if heartbeat is not None:
        if not 0.5 <= heartbeat <= 3600:
            raise RalphError("--heartbeat-seconds must be between 0.5 and 3600")
        spec.heartbeat_seconds = heartbeat

    async def go() -> int:
        from ralph.scale.gitwork import check_run_target

        await check_run_target(spec.repo, spec.branch, spec.base)
        client = await _client(temporal, namespace)
        await runs.start(client, spec, queue_of(queue))
        if json and detach:
            write_json({"run_id": run_id, "branch": spec.branch, "repo": spec.repo})
        else:
            typer.echo(f"started {run_id} on Temporal (branch {spec.branch}); "
                       f"`ralph stop --run {run_id}` stops it", err=True)
        if detach:
            return 0
        with Store(store_location(store), create=False) as opened:
            view = _View(json=json, verbose=verbose)
            end = await _follow_until_end(client, opened, view, run_id)
        return _exit_code(end)

    try:
        return asyncio.run(go())
    except KeyboardInterrupt:
        typer.echo(f"detached: {run_id} goes on (`ralph log --run {run_id} -f` follows it, "
                   f"`ralph stop --run {run_id}` stops it)", err=True)
        return 0


async def _follow_until_end(client: Client, store: Store, view: _View,
                            run_id: str) -> RunEnd:
    """Show the run's events as they come, until its workflow ends and its `run.stopped` is
    shown (or a few seconds after, if the run never recorded one: it failed to start)."""
    import asyncio
    import contextlib

    from temporalio.client import WorkflowFailureError

    from ralph.cli.log_cmd import _follow
    from ralph.loop.events import run_stream
    from ralph.scale import client as runs

    follow = asyncio.ensure_future(_follow(store, view, 0, run_id))
    try:
        try:
            end: RunEnd = await runs.handle(client, run_id).result()
        except WorkflowFailureError as exc:
            cause = exc.cause
            while cause.__cause__ is not None:
                cause = cause.__cause__
            raise RalphError(f"run {run_id} failed: {cause}") from None
        started = any(True for _ in store.read(stream=run_stream(run_id), limit=1))
        if started:  # its run.stopped was recorded before the workflow ended: show it
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(asyncio.shield(follow), _DRAIN_S)
        if not view.ended and end.reason == "error":  # it never started: say why
            raise RalphError(f"run {run_id} could not start: {end.message}")
        return end
    finally:
        follow.cancel()
        with contextlib.suppress(asyncio.CancelledError, Exception):
            await follow


def _exit_code(end: RunEnd) -> int:
    from ralph.cli.loop_cmd import EXIT_DONE, EXIT_ERROR, EXIT_INCOMPLETE, EXIT_INTERRUPTED

    if end.reason == "complete":
        return EXIT_DONE
    if end.reason == "stopped":
        return EXIT_INTERRUPTED
    return EXIT_ERROR if end.reason == "error" else EXIT_INCOMPLETE


def _repo_url(repo: str) -> str:
    """A local path becomes absolute (workers run elsewhere); a URL is kept as it is."""
    if "://" in repo or (":" in repo and not repo.startswith(("/", "."))):
        return repo  # https://, ssh://, file://, or scp-like user@host:path
    return str(Path(repo).absolute())


# -- ralph status/stop/pause/resume --run ID -------------------------------------------------

def status_of_run(run_id: str, *, temporal: str | None, namespace: str | None,
                  json: bool) -> NoReturn:
    import asyncio
    from dataclasses import asdict

    from ralph.scale.client import TemporalError
    from ralph.scale.view import temporal_status

    async def ask() -> dict[str, object]:
        # The faces' one way of asking (ralph.scale.view): bounded, since an ended run's
        # answer needs a worker to replay its history.
        address = temporal_address(temporal)
        _connected.append(True)
        answer = await temporal_status(address, namespace_of(namespace), run_id)
        if isinstance(answer, str):
            raise TemporalError(f"Temporal does not know run {run_id}")
        return asdict(answer)

    answer = asyncio.run(ask())
    if json:
        write_json(answer)
        leave(0)
    lines = [f"run {answer['run_id']}: {answer['phase']}"
             + (" (paused)" if answer["paused"] and answer["phase"] != "paused" else ""),
             f"  tasks {answer['done']}/{answer['total']} done, iteration "
             f"{answer['iteration']} of at most {answer['max_iterations']}",
             f"  branch {answer['branch']} of {answer['repo']}"]
    if answer.get("last_status"):
        lines.append(f"  last iteration: {answer['last_status']}"
                     + (f" (task {answer['last_task']})" if answer.get("last_task") else ""))
    if answer.get("reason"):
        lines.append(f"  ended: {answer['reason']}: {answer['message']}")
    typer.echo("\n".join(lines))
    leave(0)


def control_run(action: str, run_id: str, *, temporal: str | None, namespace: str | None,
                json: bool) -> NoReturn:
    """Signal the run's workflow; exit 1 when it has ended already."""
    import asyncio

    from ralph.scale import client as runs

    async def send() -> bool:
        client = await _client(temporal, namespace)
        return await runs.signal(client, run_id, action)

    started = time.monotonic()
    ok = asyncio.run(send())
    verb = {"stop": "stopping", "pause": "pausing", "resume": "resuming"}[action]
    message = (f"{verb} {run_id}" if ok else f"run {run_id} has ended: nothing to {action}")
    if json:
        write_json({"ok": ok, "run_id": run_id, "action": action, "message": message,
                    "seconds": round(time.monotonic() - started, 3)})
    else:
        typer.echo(message)
    leave(0 if ok else 1)
