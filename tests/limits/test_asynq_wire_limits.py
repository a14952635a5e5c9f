"""Rate and concurrency limits over Go asynq's layout (``?wire=asynq``): enforced across two
asyncq workers sharing an asynq queue; the limit state lives in keys Go ignores
(``asynq:{q}:asyncq:...``), and a refused task waits in asynq's own scheduled set, scored in
Unix seconds like any task Go schedules."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from typing import Any

import pytest
from redis.asyncio import Redis

import asyncq
from asyncq._broker._asynq import _keys as K
from asyncq._broker._asynq._broker import AsynqBroker
from asyncq._broker._connection import make_broker
from asyncq._broker._limit_values import LimitClaim, LimitHold, LimitSpec
from asyncq.testing import wait_until

pytestmark = pytest.mark.anyio
OWNER = "srv-limits"


class Gauge:
    """Handlers running at once (across every worker of the test), the most seen, and who ran
    what."""

    def __init__(self) -> None:
        self.now = 0
        self.most = 0
        self.done: dict[str, str] = {}

    async def run(self, task: asyncq.Task, worker: str, seconds: float) -> None:
        self.now += 1
        self.most = max(self.most, self.now)
        try:
            await asyncio.sleep(seconds)
        finally:
            self.now -= 1
        assert task.id is not None
        self.done[task.id] = worker


def worker_config(queue: str) -> dict[str, Any]:
    return {"queues": {queue: 1}, "idle_poll_interval": 0.05, "forward_interval": 0.2,
            "heartbeat_interval": 1.0}


async def test_a_concurrency_limit_holds_across_two_workers(
    asyncq_redis_url: str, redis_client: Redis, asyncq_queue: str,
) -> None:
    """Worker a holds both slots; worker b, with 5 free slots of its own, is refused every
    task it leases until a gives them back; then both drain the queue, never more than 2
    handlers at once."""
    url = asyncq_redis_url + "?wire=asynq"
    q = asyncq_queue
    gauge = Gauge()
    go_on = asyncio.Event()
    workers = []
    for name, concurrency in (("a", 2), ("b", 5)):
        mux = asyncq.ServeMux()

        async def slow(task: asyncq.Task, name: str = name) -> None:
            await go_on.wait()
            await gauge.run(task, name, 0.1)

        mux.handle("slow", slow, limits=[asyncq.ConcurrencyLimit(2)])
        workers.append(asyncq.Worker(url, mux, concurrency=concurrency, **worker_config(q)))
    a, b = workers
    qk = K.queue_keys(q)
    async with asyncq.Client(url) as client, a:
        await client.enqueue_many(asyncq.Task("slow", {"i": i}, queue=q) for i in range(2))
        await wait_until(lambda: redis_client.llen(qk.active), timeout=10,
                         message="worker a runs the first two")
        async with b:
            await client.enqueue_many(asyncq.Task("slow", {"i": i}, queue=q) for i in range(10))
            refused = await wait_until(
                lambda: b.processor.limits.deferred >= 5,  # type: ignore[union-attr]
                timeout=10, message="worker b refused what it leased")
            assert refused and a.processor.limits.deferred == 0  # type: ignore[union-attr]
            go_on.set()
            await wait_until(lambda: len(gauge.done) == 12, timeout=30, message="all ran")
        assert gauge.most == 2  # never more than 2 at once across both workers
        assert await redis_client.get(qk.processed) == b"12"  # refusals count as nothing
        assert await redis_client.get(qk.failed) is None
        base = K.limit_base(q, "concurrency", "slow")
        held = K.limit_state(base, "") + "held"

        async def given_back() -> bool:
            return await redis_client.zcard(held) == 0

        await wait_until(given_back, timeout=30, message="every slot given back")
        assert await redis_client.hgetall(K.limits_registry(q)) == {b"c:slow": b"2"}
        assert await redis_client.keys(f"asyncq:{{{q}}}*") == []  # nothing in asyncq's layout
    print(f"ran by worker: a {list(gauge.done.values()).count('a')}, "
          f"b {list(gauge.done.values()).count('b')}")


async def test_a_rate_limit_holds_across_two_workers(
    asyncq_redis_url: str, redis_client: Redis, asyncq_queue: str,
) -> None:
    """Worker a starts 5 tasks (the rate's whole second), then stops fetching; worker b, with
    10 free slots, is refused what it leases then; the starts of both, read from the limit's
    own window log (Redis clock), never exceed 5 in any 1 s."""
    url = asyncq_redis_url + "?wire=asynq"
    q = asyncq_queue
    window = K.limit_state(K.limit_base(q, "rate", "tick"), "") + "win"
    admitted: dict[bytes, float] = {}
    ran: dict[str, str] = {}
    go_on = asyncio.Event()
    workers = []
    for name, concurrency in (("a", 5), ("b", 10)):
        mux = asyncq.ServeMux()

        async def tick(task: asyncq.Task, name: str = name) -> None:
            admitted.update(await redis_client.zrange(window, 0, -1, withscores=True))
            await go_on.wait()
            assert task.id is not None
            ran[task.id] = name

        mux.handle("tick", tick, limits=[asyncq.RateLimit("5/s")])
        workers.append(asyncq.Worker(url, mux, concurrency=concurrency, **worker_config(q)))
    a, b = workers
    async with asyncq.Client(url) as client, a:
        began = time.monotonic()
        await client.enqueue_many(asyncq.Task("tick", {"i": i}, queue=q) for i in range(5))
        await wait_until(lambda: len(admitted) == 5, timeout=10, message="a started 5")
        a.stop_fetching()
        await client.enqueue_many(asyncq.Task("tick", {"i": i}, queue=q) for i in range(10))
        async with b:
            await wait_until(lambda: b.processor.limits.deferred,  # type: ignore[union-attr]
                             timeout=10, message="worker b refused what it leased")
            go_on.set()
            await wait_until(lambda: len(ran) == 15, timeout=30, message="all ran")
            took = time.monotonic() - began
    times = sorted(ms / 1000 for ms in admitted.values())
    assert len(times) == 15
    for i in range(len(times) - 5):
        assert times[i + 5] - times[i] >= 1.0, (i, times[i + 5] - times[i])
    # 3 windows' worth: at least 2 s; deferred tasks come back on whole seconds (asynq's
    # scheduled set), which may cost up to a second per window (and a loaded machine more).
    assert 2.0 <= times[-1] - times[0] < 20
    print(f"15 starts at 5/s over two workers: first to last start {times[-1] - times[0]:.2f} s,"
          f" all done in {took:.2f} s; ran by a {list(ran.values()).count('a')}, "
          f"b {list(ran.values()).count('b')}")


@pytest.fixture
async def broker(asyncq_redis_url: str, clock: asyncq.FakeClock,
                 anyio_backend: object) -> AsyncIterator[AsynqBroker]:
    b: Any = make_broker(asyncq_redis_url, wire="asynq", clock=clock)
    assert isinstance(b, AsynqBroker)
    try:
        yield b
    finally:
        await b.close()


async def test_a_refused_task_waits_in_asynqs_scheduled_set_until_a_slot_frees(
    broker: AsynqBroker, redis_client: Redis, asyncq_queue: str, clock: asyncq.FakeClock,
) -> None:
    q = asyncq_queue
    qk = K.queue_keys(q)
    client = asyncq.Client(broker, clock=clock)
    first = await client.enqueue("slow", b"1", queue=q)
    second = await client.enqueue("slow", b"2", queue=q)
    leased, _ = await broker.dequeue(q, 2, OWNER, 30_000, 1000)
    assert [t.id for t in leased] == [first.id, second.id]
    spec = LimitSpec("concurrency", "slow", 1)
    now = clock.now_ms()
    lease_end_s = (now + 30_000) // 1000
    assert await broker.limits.acquire(q, OWNER, [LimitClaim(t.id, [(spec, "")])
                                                  for t in leased]) == [0, (lease_end_s + 1) * 1000]
    # deferred as Go's Schedule leaves a task: scheduled, scored in Unix s, off active/lease
    assert await redis_client.zrange(qk.scheduled, 0, -1, withscores=True) == [
        (second.id.encode(), lease_end_s + 1)]
    assert await redis_client.lrange(qk.active, 0, -1) == [first.id.encode()]
    assert await redis_client.zscore(qk.lease, second.id) is None
    h = await redis_client.hgetall(qk.task(second.id))
    assert (h[b"state"], h[b"limited"]) == (b"scheduled", b"c:slow")
    assert not {b"owner", b"lease_until", b"started_at"} & set(h)
    # someone else's task is not this owner's to claim
    assert await broker.limits.acquire(q, "other", [LimitClaim(first.id, [(spec, "")])]) == [-1]

    [use] = await broker.limits.usage(q)
    assert (use.kind, use.name, use.key, use.limit, use.in_use, use.waiting) == (
        "concurrency", "slow", "", 1, 1, 1)
    clock.advance(1)
    assert await broker.limits.release(q, OWNER, [LimitHold(first.id, spec, "")]) == 1
    # woken: next in line (where Go's dequeue takes from), pending_since in ns
    assert await redis_client.lrange(qk.pending, -1, -1) == [second.id.encode()]
    h = await redis_client.hgetall(qk.task(second.id))
    assert (h[b"state"], int(h[b"pending_since"])) == (b"pending", clock.now_ms() * 1_000_000)
    assert await redis_client.zcard(qk.scheduled) == 0
    [leased2], _ = await broker.dequeue(q, 1, OWNER, 30_000, 1000)
    assert await broker.limits.acquire(q, OWNER, [LimitClaim(leased2.id, [(spec, "")])]) == [0]
    assert not await redis_client.hexists(qk.task(second.id), "limited")


async def test_a_lapsed_lease_frees_its_slot(
    broker: AsynqBroker, asyncq_queue: str, clock: asyncq.FakeClock,
) -> None:
    """Slots are tied to asynq's leases (Unix s): a dead worker's slot frees once its lease
    has ended, not before."""
    q = asyncq_queue
    client = asyncq.Client(broker, clock=clock)
    for _ in range(2):
        await client.enqueue("slow", queue=q)
    spec = LimitSpec("concurrency", "slow", 1)
    [dead], _ = await broker.dequeue(q, 1, "dead-worker", 5_000, 1000)
    assert await broker.limits.acquire(q, "dead-worker", [LimitClaim(dead.id, [(spec, "")])]) \
        == [0]
    clock.advance(4.9)
    [live], _ = await broker.dequeue(q, 1, OWNER, 30_000, 1000)
    assert (await broker.limits.acquire(q, OWNER, [LimitClaim(live.id, [(spec, "")])]))[0] > 0
    clock.advance(1.2)  # the dead worker's lease (whole seconds) has ended
    assert await broker.maintenance.forward(q, "scheduled", 100) == (1, -1)
    [again], _ = await broker.dequeue(q, 1, OWNER, 30_000, 1000)
    assert again.id == live.id
    assert await broker.limits.acquire(q, OWNER, [LimitClaim(again.id, [(spec, "")])]) == [0]


async def test_a_manual_limiter_shares_the_limit(
    broker: AsynqBroker, asyncq_queue: str,
) -> None:
    limit = asyncq.ConcurrencyLimit(1, name="stripe")
    limiter = asyncq.Limiter(broker, limit, queue=asyncq_queue)
    async with limiter.acquire("acct-1"):
        [use] = await broker.limits.usage(asyncq_queue)
        assert (use.name, use.key, use.in_use) == ("stripe", "acct-1", 1)
        with pytest.raises(TimeoutError):
            async with limiter.acquire("acct-1", timeout=0.3):
                pass
    [use] = await broker.limits.usage(asyncq_queue)
    assert use.in_use == 0
