"""The values of rate and concurrency limits exchanged with a Broker (``LimitOps``): what a
limit is as the broker sees it, a claim, a hold and a usage report."""

from __future__ import annotations

from collections.abc import Sequence
from typing import NamedTuple


class LimitSpec(NamedTuple):
    """One limit as the broker sees it: kind "concurrency" or "rate", its name, its size and
    (rate) its period and how many may start at once."""

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
