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

Values set at run time (a queue's concurrency cap, a value replacing a declared limit) live
in the same registry as in asyncq's layout and are read by ``asynq_limit_acquire`` in the step
that admits a start; ``asynq_limit_set`` sets them and wakes the waiters they let start.

Go servers do not know asyncq's limits: a task a Go server takes from a shared queue runs
without them (and holds no slot), a queue's cap included.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ..._clock import Clock
from .._calls import ScriptCall
from .._limit_ops import (
    _field,
    _value,
    acquire_call,
    key_values,
    read_queue_caps,
    read_usage,
)
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

    async def acquire(self, queue: str, owner: str, claims: Sequence[LimitClaim], *,
                      queue_cap: bool = False) -> list[int]:
        call = acquire_call("asynq_limit_acquire", K, queue, owner, claims, queue_cap,
                            self._clock.now_ms())
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
        args: list[Any] = [self._clock.now_ms() * 1_000_000, qk.task_prefix, owner,
                           K.WAKE_CHANNEL, queue]
        for hold in holds:
            args += (hold.holder, _state_prefix(queue, hold.spec, hold.key))
        return int(await self._one(
            ScriptCall("asynq_limit_release", [qk.pending, qk.scheduled], args)))

    async def renew(self, queue: str, hold: LimitHold, until_ms: int) -> bool:
        prefix = _state_prefix(queue, hold.spec, hold.key)
        return bool(await self._runner.command("renewing a limit hold", "ZADD",
                                               prefix + "held", "XX", "CH", until_ms,
                                               hold.holder))

    async def set_value(self, queue: str, spec: LimitSpec,
                        value: LimitSpec | None) -> tuple[str, str, int]:
        keys = await key_values(self._runner, K, queue, spec)
        qk = K.queue_keys(queue)
        now = self._clock.now_ms()
        out = await self._runner.run(
            "asynq_limit_set", [K.limits_registry(queue), qk.lease, qk.pending, qk.scheduled],
            [now, qk.task_prefix, K.WAKE_CHANNEL, queue, spec.kind[0], _field(spec),
             "" if value is None else _value(value), now * 1_000_000,
             *(_state_prefix(queue, spec, key) for key in keys)])
        return text(out[0]), text(out[1]), int(out[2])

    async def usage(self, queue: str) -> list[LimitUse]:
        return await read_usage(self._runner, K, "asynq_limit_usage", queue,
                                self._clock.now_ms())

    async def queue_caps(self, queues: Sequence[str]) -> list[LimitUse | None]:
        return await read_queue_caps(self._runner, K, "asynq_limit_usage", queues,
                                     self._clock.now_ms())
