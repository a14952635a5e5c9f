"""Limits changed at run time: a queue's concurrency limit, and values replacing declared limits.

Both are kept in Redis, in the queue's limit registry, and read by the script that admits a
start, so every worker obeys the same value from its next start, without polling or a restart.
A queue's cap exists only there (it is a setting of the queue, like a pause: a value per
worker process could disagree between workers). A run-time value of a handler's limit wins over
what the code declares until it is cleared; then the declaration applies again.
"""

from __future__ import annotations

from .._broker import QUEUE_SPEC, LimitOps, LimitSpec, LimitUse
from .._validate import validate_queue_name
from ._gate import spec_of
from ._spec import ConcurrencyLimit, Limit, RateLimit, check_size

KINDS = ("concurrency", "rate")


async def set_queue_cap(ops: LimitOps, queue: str, n: int | None) -> int:
    """Cap ``queue`` at ``n`` tasks running at once (None: no cap); returns how many waiting
    tasks the change let start."""
    queue = validate_queue_name(queue)
    value = None if n is None else QUEUE_SPEC._replace(
        n=check_size(n, "a queue's concurrency limit"))
    _, _, woken = await ops.set_value(queue, QUEUE_SPEC, value)
    return woken


async def queue_cap(ops: LimitOps, queue: str) -> LimitUse | None:
    """The cap of ``queue`` with what it counts now; None when the queue has none."""
    (cap,) = await ops.queue_caps([validate_queue_name(queue)])
    return cap


async def set_limit_value(ops: LimitOps, queue: str, limit: Limit) -> int:
    """Replace the declared limit of ``limit``'s kind and name in ``queue`` by ``limit``
    until cleared; returns how many waiting tasks the change let start."""
    if not isinstance(limit, ConcurrencyLimit | RateLimit):
        raise TypeError(f"limit must be an asyncq.ConcurrencyLimit or RateLimit, got {limit!r}")
    if limit.name is None:
        raise ValueError("a limit set at run time needs the name it is declared under "
                         "(name='stripe', or the pattern its handler is registered for)")
    if limit.key is not None:
        raise ValueError("a limit set at run time applies to every key value; leave out key=")
    spec = spec_of(limit)
    _, _, woken = await ops.set_value(validate_queue_name(queue), spec, spec)
    return woken


async def clear_limit_value(ops: LimitOps, queue: str, kind: str, name: str) -> int:
    """Drop the run-time value of the ``kind`` limit ``name`` in ``queue`` (its declaration
    applies again); returns how many waiting tasks that let start."""
    if kind not in KINDS:
        raise ValueError(f"kind must be one of {', '.join(KINDS)}, got {kind!r}")
    if not isinstance(name, str) or not name:
        raise ValueError(f"name must be a limit's name, got {name!r}")
    _, _, woken = await ops.set_value(validate_queue_name(queue), LimitSpec(kind, name, 0),
                                      None)
    return woken
