"""Limits are part of the Broker protocol: the worker's gate and ``Limiter`` reach limit state
through ``broker.limits``, so a broker wrapping another one (or any other Broker) carries them
instead of being silently skipped."""

from __future__ import annotations

import asyncio
from collections import Counter
from collections.abc import Sequence
from typing import Any

import pytest
from redis.asyncio import Redis

import asyncq
from asyncq._broker import LimitOps
from asyncq._broker._limit_values import LimitClaim, LimitHold, LimitSpec, LimitUse
from asyncq._limits import LimitGate
from asyncq._limits._registry import HandlerLimits
from asyncq.testing import wait_drained
from tests.helpers.faults import FaultyBroker

pytestmark = pytest.mark.anyio


class CountingLimits:
    """LimitOps that count their calls and hand them to ``inner``."""

    def __init__(self, inner: LimitOps) -> None:
        self.inner = inner
        self.calls: Counter[str] = Counter()

    def now_ms(self) -> int:
        return self.inner.now_ms()

    async def acquire(self, queue: str, owner: str, claims: Sequence[LimitClaim], *,
                      queue_cap: bool = False) -> list[int]:
        self.calls["acquire"] += 1
        return await self.inner.acquire(queue, owner, claims, queue_cap=queue_cap)

    async def release(self, queue: str, owner: str, holds: Sequence[LimitHold]) -> int:
        self.calls["release"] += 1
        return await self.inner.release(queue, owner, holds)

    async def renew(self, queue: str, hold: LimitHold, until_ms: int) -> bool:
        self.calls["renew"] += 1
        return await self.inner.renew(queue, hold, until_ms)

    async def set_value(self, queue: str, spec: LimitSpec,
                        value: LimitSpec | None) -> tuple[str, str, int]:
        self.calls["set_value"] += 1
        return await self.inner.set_value(queue, spec, value)

    async def usage(self, queue: str) -> list[LimitUse]:
        self.calls["usage"] += 1
        return await self.inner.usage(queue)

    async def queue_caps(self, queues: Sequence[str]) -> list[LimitUse | None]:
        self.calls["queue_caps"] += 1
        return await self.inner.queue_caps(queues)


class WrappingBroker(FaultyBroker):
    """A Broker that is no RedisBroker, with limit operations of its own."""

    def __init__(self, redis: Redis) -> None:
        super().__init__(redis)
        self.limits = CountingLimits(self.inner.limits)


async def test_a_wrapping_broker_carries_the_limits_of_the_worker_and_by_hand(
    redis_client: Redis, asyncq_client: asyncq.Client, asyncq_queue: str,
) -> None:
    broker = WrappingBroker(redis_client)
    running = 0
    most = 0
    mux = asyncq.ServeMux()

    @mux.handler("t", limits=[asyncq.ConcurrencyLimit(1)])
    async def handler(task: asyncq.Task) -> None:
        nonlocal running, most
        running += 1
        most = max(most, running)
        await asyncio.sleep(0.02)
        running -= 1

    for i in range(4):
        await asyncq_client.enqueue("t", i, queue=asyncq_queue)
    worker = asyncq.Worker(broker, mux, queues={asyncq_queue: 1}, concurrency=4,
                           forward_interval=0.05)
    async with worker:
        # (scheduled too: a task deferred by the limit waits there, not pending)
        await wait_drained(redis_client, [asyncq_queue], worker=worker, timeout=10,
                           include_scheduled=True)
    assert most == 1 and worker.processor.processed == 4
    assert broker.limits.calls["acquire"] >= 4 and broker.limits.calls["release"] >= 1

    limiter = asyncq.Limiter(broker, asyncq.ConcurrencyLimit(1, name="by-hand"),
                             queue=asyncq_queue)
    before = broker.limits.calls["acquire"]
    async with limiter.acquire("k"):
        async with asyncq.Inspector(broker=broker) as inspector:
            uses = await inspector.limits(asyncq_queue)
        assert any(u.name == "by-hand" and u.in_use == 1 for u in uses)
    assert broker.limits.calls["acquire"] == before + 1 and broker.limits.calls["usage"] == 1


class HangingLimits(CountingLimits):
    async def release(self, queue: str, owner: str, holds: Sequence[LimitHold]) -> int:
        self.calls["release"] += 1
        await asyncio.Event().wait()
        return 0


async def test_the_gate_owns_its_give_backs_and_stops_them_when_settled(
    redis_client: Redis,
) -> None:
    """``settled`` waits for the slots given back, at most its timeout, then cancels and
    awaits what is left: no give-back outlives the worker's processor."""
    ops = HangingLimits(FaultyBroker(redis_client).inner.limits)
    gate = LimitGate(ops, HandlerLimits(lambda task_type: None), "srv-gate",
                     on_deferred=lambda due: None)
    spec = LimitSpec("concurrency", "c", 1)
    gate.holds["t1"] = ("q", [(spec, "")])
    gate.release("t1")
    flusher: Any = gate._flusher
    assert flusher is not None
    await gate.settled(0.05)
    assert flusher.cancelled() and ops.calls["release"] == 1
