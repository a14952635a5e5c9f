"""Rate and concurrency limits over Go asynq's layout (``LimitOps`` for ``wire=asynq``).

The state is asyncq's own (the same registry, key sets and ``held``/``wait``/``win``/``tat``
keys as in asyncq's layout), kept under ``asynq:{<queue>}:asyncq:`` where Go never looks, in the
queue's hash slot so one script can take a slot and defer the task together (Cluster too).

asyncq's limit scripts cannot run here unchanged, so ``asynq_limit_*.lua`` are their versions
for this layout: they compare lease ends that asynq scores in Unix seconds (asyncq's in ms:
every slot would look expired), defer a task into asynq's scheduled set in Unix seconds (an ms
score would read as thousands of years ahead to Go's forwarder and asyncq's), drop asyncq's
lease fields of this layout (owner, lease_until, started_at), write ``pending_since`` in ns on
a wake-up, and check ownership the way every asynq script does (the lease entry is the one
this run wrote). Because deferred tasks come back on whole seconds, a rate lets up to one
second of its pace start at once here; its cap of ``n`` starts per period stays exact.

Go servers do not know asyncq's limits: a task a Go server takes from a shared queue runs
without them (and holds no slot).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ..._clock import Clock
from .._calls import ScriptCall
from .._limit_ops import _field, _spec, _value
from .._limit_values import LimitClaim, LimitHold, LimitSpec, LimitUse
from .._replies import text
from .._runner import ScriptRunner, reply_error
from . import _keys as K


def _state_prefix(queue: str, spec: LimitSpec, key: str) -> str:
    return K.limit_state(K.limit_base(queue, spec.kind, spec.name), key)


class AsynqLimitOps:
    """``LimitOps`` over asynq's layout (what ``AsynqBroker.limits`` is)."""

    def __init__(self, runner: ScriptRunner, clock: Clock) -> None:
        self._runner = runner
        self._clock = clock

    def now_ms(self) -> int:
        return self._clock.now_ms()

    async def acquire(self, queue: str, owner: str,
                      claims: Sequence[LimitClaim]) -> list[int]:
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
        call = ScriptCall("asynq_limit_acquire",
                          [qk.active, qk.lease, qk.scheduled, K.limits_registry(queue)],
                          [self._clock.now_ms(), qk.task_prefix, owner, len(where), *table,
                           *tail])
        return [int(x) for x in await self._one(call)]

    async def _one(self, call: ScriptCall) -> Any:
        """One script call through the runner's pipeline (a claim of a whole dequeue batch
        has many arguments: hand-packed RESP on a single node)."""
        (reply,) = await self._runner.run_many([call])
        if isinstance(reply, Exception):
            raise reply_error(call.name, reply)
        return reply

    async def release(self, queue: str, owner: str, holds: Sequence[LimitHold]) -> int:
        qk = K.queue_keys(queue)
        args: list[Any] = [self._clock.now_ms() * 1_000_000, qk.task_prefix, owner]
        for hold in holds:
            args += (hold.holder, _state_prefix(queue, hold.spec, hold.key))
        return int(await self._one(
            ScriptCall("asynq_limit_release", [qk.pending, qk.scheduled], args)))

    async def renew(self, queue: str, hold: LimitHold, until_ms: int) -> bool:
        prefix = _state_prefix(queue, hold.spec, hold.key)
        return bool(await self._runner.command("renewing a limit hold", "ZADD",
                                               prefix + "held", "XX", "CH", until_ms,
                                               hold.holder))

    async def usage(self, queue: str) -> list[LimitUse]:
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
        out = await self._runner.run("asynq_limit_usage", [K.queue_keys(queue).lease], args)
        return [LimitUse(queue, spec.kind, spec.name, key, spec.n, spec.period_ms,
                         int(used), int(waiting))
                for (spec, key), (used, waiting) in zip(rows, out, strict=True)]
