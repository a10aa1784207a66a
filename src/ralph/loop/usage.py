"""Tokens and cost: what the agents of an iteration, a run and the project used.

The adapters report usage per agent run (`agent.usage`: tokens, and the cost in USD when the
CLI says it or ralph.toml `[prices]` knows the model). These records add them up: per agent
(the worker, a judge and a reviewer may be different agents), per iteration, per run and for
all runs. A cost is never guessed: `cost_usd` stays None until some run reported one, and
`unpriced` counts the agent runs that used tokens without a known price.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # importing ralph.agents loads every adapter: status needs none of them
    from ralph.agents.base import Usage


@dataclass
class Spend:
    """Tokens and cost added up over agent runs."""

    tokens_in: int = 0
    tokens_out: int = 0
    cached_tokens: int = 0
    cost_usd: float | None = None
    agent_runs: int = 0  # agent runs that reported usage
    unpriced: int = 0  # of those, runs whose cost is unknown

    @property
    def tokens(self) -> int:
        return self.tokens_in + self.tokens_out

    def add_usage(self, usage: Usage) -> None:
        self.tokens_in += usage.input_tokens or 0
        self.tokens_out += usage.output_tokens or 0
        self.cached_tokens += usage.cached_tokens or 0
        self.agent_runs += 1
        if usage.cost_usd is None:
            self.unpriced += 1
        else:
            self.cost_usd = round((self.cost_usd or 0.0) + usage.cost_usd, 6)

    def add(self, other: Spend) -> None:
        self.tokens_in += other.tokens_in
        self.tokens_out += other.tokens_out
        self.cached_tokens += other.cached_tokens
        self.agent_runs += other.agent_runs
        self.unpriced += other.unpriced
        if other.cost_usd is not None:
            self.cost_usd = round((self.cost_usd or 0.0) + other.cost_usd, 6)


@dataclass
class SpendByAgent:
    """Spend in all, and per agent name."""

    total: Spend = field(default_factory=Spend)
    agents: dict[str, Spend] = field(default_factory=dict)

    def add_usage(self, agent: str, usage: Usage) -> None:
        self.total.add_usage(usage)
        self.agents.setdefault(agent, Spend()).add_usage(usage)

    def add(self, other: SpendByAgent) -> None:
        self.total.add(other.total)
        for name, spend in other.agents.items():
            self.agents.setdefault(name, Spend()).add(spend)


@dataclass
class RunSpend(SpendByAgent):
    """A run's spend (state.json keeps the last run's and the sum of all runs')."""

    run_id: str | None = None
    iterations: int = 0


def budget_reached(spend: Spend, *, max_cost_usd: float | None,
                   max_tokens: int | None) -> str | None:
    """Why a run must stop for its budget (one line naming the budget), or None."""
    if max_cost_usd is not None and spend.cost_usd is not None and \
            spend.cost_usd >= max_cost_usd:
        return (f"the run's budget is used up: it cost ${spend.cost_usd:.4f} of "
                f"loop.max_cost_usd ${max_cost_usd:g}")
    if max_tokens is not None and spend.tokens >= max_tokens:
        return (f"the run's budget is used up: {spend.tokens:,} tokens of "
                f"loop.max_tokens {max_tokens:,}")
    return None
