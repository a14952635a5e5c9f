"""The Redis side of rate and concurrency limits: take, give back and read limit state.

Limits are counted per queue: their keys carry the queue's hash tag, so one script can take a
slot and, when refused, defer the task in the same step (on Redis Cluster too). The values here
are plain, in ``_limit_values`` (no import of ``asyncq._limits``, which builds on them through
the ``LimitOps`` protocol).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from .._clock import Clock
from . import _keys as K
from ._calls import ScriptCall
from ._limit_values import LimitClaim, LimitHold, LimitSpec, LimitUse
from ._replies import text
from ._runner import ScriptRunner, reply_error


def _field(spec: LimitSpec) -> str:
    """A limit's field in the queue's limit registry: ``c:<name>`` or ``r:<name>``."""
    return f"{spec.kind[0]}:{spec.name}"


def _value(spec: LimitSpec) -> str:
    """A limit's value in the registry: its size, and for a rate ``n/period/burst``."""
    if spec.kind == "rate":
        return f"{spec.n}/{spec.period_ms}/{spec.burst}"
    return str(spec.n)


def _state_prefix(queue: str, spec: LimitSpec, key: str) -> str:
    """Prefix of the Redis keys of one key value of ``spec`` in ``queue``."""
    return K.limit_state(K.limit_base(queue, spec.kind, spec.name), key)


class RedisLimitOps:
    """Limit scripts over a ScriptRunner (what ``RedisBroker.limits`` is; see ``LimitOps``)."""

    def __init__(self, runner: ScriptRunner, clock: Clock) -> None:
        self._runner = runner
        self._clock = clock

    def now_ms(self) -> int:
        """The clock limit times are read with (the one leases are written with)."""
        return self._clock.now_ms()

    async def acquire(self, queue: str, owner: str,
                      claims: Sequence[LimitClaim]) -> list[int]:
        """Take every limit of each claim, or defer its task: per claim 0 taken, -1 its task
        is not active under ``owner`` (nothing done), else the Unix ms it is deferred to."""
        qk = K.queue_keys(queue)
        table: list[Any] = []
        where: dict[tuple[LimitSpec, str], int] = {}  # each limit key once, by ARGV position
        tail: list[Any] = []
        for claim in claims:
            tail += (claim.holder, claim.hold_until_ms, len(claim.limits))
            for spec, key in claim.limits:
                at = where.get((spec, key))
                if at is None:
                    at = where[(spec, key)] = 5 + len(table)
                    base = K.limit_base(queue, spec.kind, spec.name)
                    table += (spec.kind[0], _field(spec), _value(spec), K.limit_keyset(base), key,
                              K.limit_state(base, key), spec.n, spec.period_ms, spec.burst)
                tail.append(at)
        call = ScriptCall("limit_acquire",
                          [qk.active, qk.lease, qk.scheduled, K.limits_registry(queue)],
                          [self._clock.now_ms(), qk.task_prefix, owner, len(where), *table,
                           *tail])
        return [int(x) for x in await self._one(call)]

    async def _one(self, call: ScriptCall) -> Any:
        """One script call through the runner's pipeline (hand-packed RESP on a single node:
        a claim of a whole dequeue batch has many arguments)."""
        (reply,) = await self._runner.run_many([call])
        if isinstance(reply, Exception):
            raise reply_error(call.name, reply)
        return reply

    async def release(self, queue: str, owner: str, holds: Sequence[LimitHold]) -> int:
        """Give back concurrency slots; returns how many waiting tasks were woken (moved to
        pending)."""
        qk = K.queue_keys(queue)
        args: list[Any] = [self._clock.now_ms(), qk.task_prefix, owner, K.WAKE_CHANNEL, queue]
        for hold in holds:
            args += (hold.holder, _state_prefix(queue, hold.spec, hold.key))
        return int(await self._one(
            ScriptCall("limit_release", [qk.pending, qk.scheduled, qk.waiters], args)))

    async def renew(self, queue: str, hold: LimitHold, until_ms: int) -> bool:
        """Extend a manual hold; False when it is gone (it ended, or was taken as expired)."""
        prefix = _state_prefix(queue, hold.spec, hold.key)
        return bool(await self._runner.command("renewing a limit hold", "ZADD",
                                               prefix + "held", "XX", "CH", until_ms,
                                               hold.holder))

    async def usage(self, queue: str) -> list[LimitUse]:
        """Every limit used in ``queue`` and each of its keys, with what is in use now (a key
        with nothing held, waiting or in its window is listed one last time, then forgotten)."""
        registry = await self._runner.command("reading limits", "HGETALL",
                                              K.limits_registry(queue))
        specs = sorted(s for f, v in registry.items()
                       if (s := _spec(text(f), text(v))) is not None)
        if not specs:
            return []
        bases = [K.limit_base(queue, s.kind, s.name) for s in specs]
        keysets = await self._runner.commands(
            "reading limit keys", [("SMEMBERS", K.limit_keyset(b)) for b in bases])
        rows: list[tuple[LimitSpec, str]] = [
            (spec, key) for spec, members in zip(specs, keysets, strict=True)
            for key in sorted(text(m) for m in members)]
        if not rows:
            return []
        args: list[Any] = [self._clock.now_ms()]
        for spec, key in rows:
            base = K.limit_base(queue, spec.kind, spec.name)
            args += (spec.kind[0], K.limit_state(base, key), spec.period_ms,
                     K.limit_keyset(base), key)
        out = await self._runner.run("limit_usage", [K.queue_keys(queue).lease], args)
        return [LimitUse(queue, spec.kind, spec.name, key, spec.n, spec.period_ms,
                         int(used), int(waiting))
                for (spec, key), (used, waiting) in zip(rows, out, strict=True)]


def _spec(field: str, value: str) -> LimitSpec | None:
    """A registry entry back as a LimitSpec; None for one asyncq did not write."""
    kind, sep, name = field.partition(":")
    try:
        if kind == "c" and sep:
            return LimitSpec("concurrency", name, int(value))
        if kind == "r" and sep:
            n, period, burst = [*value.split("/"), "0"][:3]
            return LimitSpec("rate", name, int(n), int(period), int(burst))
    except ValueError:
        pass
    return None
