"""A recorded iteration history, written straight into a store: what a long-lived project's
store holds (each iteration's start, its agent's output, its end, in its run's stream),
for the tests and benchmarks of the faces that show it (paging, first paint)."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from ralph.store import Store

OUTPUT_FRAMES = 6  # agent.output frames per iteration
ITERATIONS_PER_RUN = 100


def record_history(store: Store, iterations: int, tasks: int, *, agent: str = "noop") -> None:
    """`iterations` iterations over `tasks` tasks, about ten frames each; every third one
    is not verified done (with a reason), the others are and have a commit."""
    for n in range(1, iterations + 1):
        run_id = f"run_{n // ITERATIONS_PER_RUN:06d}"
        stream = f"runs/{run_id}"
        task = str(n % tasks + 1)
        title = f"Task number {task}"
        store.append("iteration.started", {"iteration": n, "run_id": run_id, "agent": agent,
                                           "task_id": task, "title": title}, stream=stream)
        store.append("agent.started", {"agent": agent, "run_id": run_id}, stream=stream)
        for _ in range(OUTPUT_FRAMES):
            store.append("agent.output", {"kind": "text", "content": "working " * 8,
                                          "iteration": n, "run_id": run_id}, stream=stream)
        store.append("agent.finished", {"status": "ok", "exit_code": 0}, stream=stream)
        verified = n % 3 != 0
        store.append("iteration.finished", {
            "iteration": n, "run_id": run_id, "agent": agent, "task_id": task,
            "task_title": title, "status": "done" if verified else "not_done",
            "verified": verified, "reason": None if verified else "the gates failed",
            "duration_seconds": 30.0 + n % 50, "gates_ran": True, "gates_ok": verified,
            "judge_ok": None, "review_ok": None, "repo_clean": True, "blocked": False,
            "exit_code": 0, "return_code": 0, "tokens_in": 1000 + n, "tokens_out": 200,
            "cost_usd": 0.01, "commit": f"{n:040x}" if verified else None}, stream=stream)
