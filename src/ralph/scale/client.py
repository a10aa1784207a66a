"""Starting, steering and asking after RalphRun workflows, from any machine that reaches
Temporal (`ralph run --on temporal`, `ralph status/pause/resume/stop --run ID`)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from ralph.errors import RalphError
from ralph.scale.model import DEFAULT_NAMESPACE, DEFAULT_QUEUE, WORKFLOW, RunEnd, RunSpec, RunStatus

if TYPE_CHECKING:
    from temporalio.client import Client, WorkflowHandle

CONNECT_TIMEOUT_S = 10.0


MISSING_EXTRA = ("runs on Temporal need Ralph's scale extra: pip install 'ralph[scale]' "
                 "(temporalio, the Temporal CLI, psycopg)")


class TemporalError(RalphError):
    """Temporal cannot be reached, or does not know the run."""


async def connect(address: str, namespace: str = DEFAULT_NAMESPACE) -> Client:
    """A client of the Temporal server at HOST:PORT; TemporalError in one line otherwise."""
    import asyncio  # noqa: PLC0415

    try:
        from temporalio.client import Client  # noqa: PLC0415 - the scale extra
    except ImportError:
        raise TemporalError(MISSING_EXTRA) from None

    if ":" not in address:
        raise TemporalError(f"--temporal must be HOST:PORT, not {address!r}")
    try:
        return await asyncio.wait_for(Client.connect(address, namespace=namespace),
                                      CONNECT_TIMEOUT_S)
    except (TimeoutError, RuntimeError, OSError) as exc:
        raise TemporalError(f"cannot reach Temporal at {address}: {_reason(exc)}") from None


def _reason(exc: BaseException) -> str:
    """The gist of a connection failure (the SDK's own text is a nest of transport errors)."""
    text = str(exc)
    for gist in ("Connection refused", "No route to host", "Name or service not known",
                 "timed out", "deadline has elapsed"):
        if gist.lower() in text.lower():
            return gist.lower()
    return text.splitlines()[0][:200] if text else "timed out"


async def start(client: Client, spec: RunSpec, queue: str = DEFAULT_QUEUE) -> None:
    """Start the run's workflow (its id is the run id)."""
    from temporalio.service import RPCError  # noqa: PLC0415

    try:
        await client.start_workflow(WORKFLOW, spec, id=spec.run_id, task_queue=queue,
                                    result_type=RunEnd)
    except RPCError as exc:  # an unknown namespace, a server that refuses
        raise TemporalError(f"Temporal refused to start run {spec.run_id}: "
                            f"{exc.message}") from None


def handle(client: Client, run_id: str) -> WorkflowHandle[object, RunEnd]:
    return client.get_workflow_handle(run_id, result_type=RunEnd)


async def status(client: Client, run_id: str) -> RunStatus:
    """The run's status (its workflow answers while it runs; an ended run answers too,
    Temporal replays its history to ask it)."""
    from temporalio.service import RPCError  # noqa: PLC0415

    try:
        answer: RunStatus = await handle(client, run_id).query(
            "status", result_type=RunStatus)
    except RPCError as exc:
        raise _unknown(run_id, exc) from None
    return answer


async def signal(client: Client, run_id: str, action: str) -> bool:
    """Send `stop`, `pause` or `resume`; False if the run has ended (nothing to steer)."""
    from temporalio.client import WorkflowExecutionStatus  # noqa: PLC0415
    from temporalio.service import RPCError  # noqa: PLC0415

    run = handle(client, run_id)
    try:
        described = await run.describe()
        if described.status != WorkflowExecutionStatus.RUNNING:
            return False
        await run.signal(action)
    except RPCError as exc:
        try:  # it may have ended between the two calls
            if (await run.describe()).status != WorkflowExecutionStatus.RUNNING:
                return False
        except RPCError:
            pass
        raise _unknown(run_id, exc) from None
    return True


def _unknown(run_id: str, exc: Exception) -> TemporalError:
    from temporalio.service import RPCError, RPCStatusCode  # noqa: PLC0415

    if isinstance(exc, RPCError) and exc.status == RPCStatusCode.NOT_FOUND:
        return TemporalError(f"Temporal does not know run {run_id}")
    return TemporalError(f"Temporal cannot answer about run {run_id}: "
                         f"{getattr(exc, 'message', exc)}")
