"""The values of rate and concurrency limits exchanged with a Broker (``LimitOps``): what a
limit is as the broker sees it, a claim, a hold and a usage report."""

from __future__ import annotations

from collections.abc import Sequence
from typing import NamedTuple

QUEUE_CAP = "queue"
"""The kind of a queue's concurrency cap: a concurrency limit on every task of the queue
whose size is set at run time (``Inspector.set_queue_concurrency``), never declared."""


class LimitSpec(NamedTuple):
    """One limit as the broker sees it: kind "concurrency", "rate" or "queue" (a queue's cap,
    name ''), its name, its size and (rate) its period and how many may start at once."""

    kind: str
    name: str
    n: int
    period_ms: int = 0
    burst: int = 0


class LimitClaim(NamedTuple):
    """What one holder asks for: a slot or token of each (limit, key value).

    The holder is a task id (its slots live as long as its lease), or ``m:<id>`` with
    ``hold_until_ms`` set (a manual hold, see ``asyncq.Limiter``)."""

    holder: str
    limits: Sequence[tuple[LimitSpec, str]]
    hold_until_ms: int = 0


class LimitHold(NamedTuple):
    """A concurrency slot of ``spec`` for key value ``key``, held by ``holder``."""

    holder: str
    spec: LimitSpec
    key: str


class LimitUse(NamedTuple):
    """How much of one limit key is in use now."""

    queue: str
    kind: str
    name: str
    key: str
    limit: int
    period_ms: int
    in_use: int
    """Slots held by live holders (concurrency), or starts in the current window (rate)."""
    waiting: int
    """Tasks deferred until a slot or token of this key is free."""
    runtime: bool = False
    """True when the limit in force was set at run time (``Inspector.set_limit``, ``asyncq
    limit set``, the dashboard) and replaces the declared one; a queue's cap always is."""
    declared: int | None = None
    """The size the handlers declare (the last one a worker claimed with), when known: what
    applies again once a run-time value is cleared."""
    declared_period_ms: int | None = None
    """The declared period of a rate (with ``declared``)."""
