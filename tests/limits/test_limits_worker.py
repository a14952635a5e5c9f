"""Declared limits in a worker: a task over its limit waits (deferred, no retry used, counted
neither processed nor failed) while other types keep flowing; slots free when tasks end."""

from __future__ import annotations

import asyncio
import time

import pytest
from redis.asyncio import Redis

import asyncq
from asyncq._broker import _keys as K
from asyncq.testing import WorkerFactory, wait_until

pytestmark = pytest.mark.anyio


class Gauge:
    """How many handlers run at once, and the most seen."""

    def __init__(self) -> None:
        self.now = 0
        self.most = 0
        self.done: list[str] = []
        self.starts: list[float] = []

    async def run(self, task: asyncq.Task, seconds: float) -> None:
        self.now += 1
        self.most = max(self.most, self.now)
        self.starts.append(time.monotonic())
        try:
            await asyncio.sleep(seconds)
        finally:
            self.now -= 1
        assert task.id is not None
        self.done.append(task.id)


async def test_concurrency_limit_holds_and_other_types_keep_flowing(
    asyncq_client: asyncq.Client, asyncq_worker: WorkerFactory, asyncq_queue: str,
    redis_client: Redis,
) -> None:
    q = asyncq_queue
    gauge = Gauge()
    quick: list[str] = []
    mux = asyncq.ServeMux()

    @mux.handler("slow", limits=[asyncq.ConcurrencyLimit(2)])
    async def slow(task: asyncq.Task) -> None:
        await gauge.run(task, 0.05)

    @mux.handler("quick")
    async def run_quick(task: asyncq.Task) -> None:
        assert task.id is not None
        quick.append(task.id)

    await asyncq_client.enqueue_many(asyncq.Task("slow", {"i": i}, queue=q) for i in range(12))
    async with asyncq_worker(mux, queues={q: 1}, concurrency=10) as w:
        await asyncq_client.enqueue_many(asyncq.Task("quick", {}, queue=q) for _ in range(5))
        await wait_until(lambda: len(quick) == 5, timeout=30, message="quick tasks ran")
        assert len(gauge.done) < 12  # the quick ones did not wait for the limited ones
        await w.wait_drained(include_scheduled=True, timeout=15)
        deferred = w.worker.processor.limits.deferred  # type: ignore[union-attr]
    assert len(gauge.done) == 12 and gauge.most == 2
    assert deferred > 0
    info = await asyncq.Inspector(redis_client).queue_info(q)
    assert (info.processed, info.failed) == (17, 0)  # refusals count as nothing
    stored = await redis_client.keys(K.queue_keys(q).base + "limit:*held")
    assert stored == []  # every slot given back


async def test_rate_limit_spaces_starts(
    asyncq_client: asyncq.Client, asyncq_worker: WorkerFactory, asyncq_queue: str,
    redis_client: Redis,
) -> None:
    """Admissions, read from the limit's own window log (Redis clock), never put more than
    10 in any 0.5 s; the handlers start right after theirs."""
    q = asyncq_queue
    gauge = Gauge()
    mux = asyncq.ServeMux()
    window = K.limit_state(K.limit_base(q, "rate", "tick"), "") + "win"
    admitted: dict[bytes, float] = {}

    @mux.handler("tick", limits=[asyncq.RateLimit("10/0.5s")])
    async def tick(task: asyncq.Task) -> None:
        admitted.update(await redis_client.zrange(window, 0, -1, withscores=True))
        await gauge.run(task, 0)

    await asyncq_client.enqueue_many(asyncq.Task("tick", {"i": i}, queue=q) for i in range(30))
    async with asyncq_worker(mux, queues={q: 1}, concurrency=20) as w:
        await w.wait_drained(include_scheduled=True, timeout=30)
    times = sorted(ms / 1000 for ms in admitted.values())
    assert len(times) == len(gauge.starts) == 30
    for i in range(len(times) - 10):
        assert times[i + 10] - times[i] >= 0.5, (i, times[i + 10] - times[i])
    # Paced: one per 50 ms, so 30 take about 1.45 s, not three bursts over 1 s (nor, throttled
    # too much, a window per task: 15 s; a loaded machine only makes them later).
    assert 1.3 < times[-1] - times[0] < 10
    starts = sorted(gauge.starts)
    assert 1.2 < starts[-1] - starts[0] < 10


async def test_keyed_limits_are_independent(
    asyncq_client: asyncq.Client, asyncq_worker: WorkerFactory, asyncq_queue: str,
) -> None:
    q = asyncq_queue
    gauges = {"a": Gauge(), "b": Gauge()}
    mux = asyncq.ServeMux()

    @mux.handler("call", limits=[asyncq.ConcurrencyLimit(1, key=lambda t: t.json()["t"])])
    async def call(task: asyncq.Task) -> None:
        await gauges[task.json()["t"]].run(task, 0.05)

    await asyncq_client.enqueue_many(asyncq.Task("call", {"t": t, "i": i}, queue=q)
                                     for i in range(6) for t in "ab")
    async with asyncq_worker(mux, queues={q: 1}, concurrency=10) as w:
        await wait_until(lambda: gauges["a"].now and gauges["b"].now, timeout=30,
                         message="both tenants run at once")
        await w.wait_drained(include_scheduled=True, timeout=15)
        uses = await asyncq.Inspector(w.worker.broker).limits(q)
        # Keys with nothing left are listed one last time, then forgotten (one per tenant
        # must not pile up for ever).
        assert await asyncq.Inspector(w.worker.broker).limits(q) == []
    assert [g.most for g in gauges.values()] == [1, 1]
    assert [len(g.done) for g in gauges.values()] == [6, 6]
    assert {(u.kind, u.name, u.key, u.limit, u.in_use) for u in uses} == {
        ("concurrency", "call", "a", 1, 0), ("concurrency", "call", "b", 1, 0)}


async def test_a_failing_key_fails_the_task_like_its_handler(
    asyncq_client: asyncq.Client, asyncq_worker: WorkerFactory, asyncq_queue: str,
    redis_client: Redis,
) -> None:
    q = asyncq_queue
    ran: list[str] = []
    mux = asyncq.ServeMux()

    @mux.handler("call", limits=[asyncq.ConcurrencyLimit(1, key=lambda t: t.json()["t"])])
    async def call(task: asyncq.Task) -> None:
        ran.append(task.json()["t"])

    info = await asyncq_client.enqueue("call", {"x": 1}, queue=q, max_retry=0)
    async with asyncq_worker(mux, queues={q: 1}) as w:
        await w.wait_drained(timeout=10)
    stored = await asyncq.Inspector(redis_client).task_info(q, info.id)
    assert ran == [] and stored.state == asyncq.TaskState.ARCHIVED
    assert "the key of limit 'call' failed" in (stored.last_error or "")


async def test_typed_task_limits(
    asyncq_client: asyncq.Client, asyncq_worker: WorkerFactory, asyncq_queue: str,
) -> None:
    q = asyncq_queue
    gauge = Gauge()
    mux = asyncq.ServeMux()

    @mux.task("typed:add", queue=q, limits=[asyncq.ConcurrencyLimit(1)])
    async def add(task: asyncq.Task, a: int, b: int) -> int:
        await gauge.run(task, 0.02)
        return a + b

    for i in range(5):
        await add.enqueue(asyncq_client, i, 1)
    async with asyncq_worker(mux, queues={q: 1}, concurrency=5) as w:
        await w.wait_drained(include_scheduled=True, timeout=10)
    assert len(gauge.done) == 5 and gauge.most == 1


def test_bad_limits_are_refused_at_registration() -> None:
    mux = asyncq.ServeMux()

    async def h(task: asyncq.Task) -> None: ...

    for bad in ("100", "x/s", "10/fortnight", "0/s", (10, 0), "-1/s"):
        with pytest.raises(ValueError):
            asyncq.RateLimit(bad)  # type: ignore[arg-type]
    with pytest.raises(TypeError):
        asyncq.RateLimit(100)  # type: ignore[arg-type]
    with pytest.raises(ValueError):
        asyncq.ConcurrencyLimit(0)
    with pytest.raises(TypeError):
        asyncq.ConcurrencyLimit(5, key="tenant")  # type: ignore[arg-type]
    with pytest.raises(TypeError):
        mux.handle("a", h, limits=["5/s"])  # type: ignore[list-item]
    with pytest.raises(ValueError):
        mux.handle("a", h, limits=[asyncq.RateLimit("5/s"), asyncq.RateLimit("9/m")])
    assert mux.patterns() == []
    assert asyncq.RateLimit("5000/h").period_ms == 3_600_000
    assert (asyncq.RateLimit((3, 0.25)).n, asyncq.RateLimit((3, 0.25)).period_ms) == (3, 250)


async def test_slots_of_a_dead_holder_free_when_its_lease_ends(
    asyncq_client: asyncq.Client, asyncq_worker: WorkerFactory, asyncq_queue: str,
) -> None:
    """A worker that vanished while holding the only slot: the waiting task starts once the
    dead one's lease has ended, without anybody giving the slot back."""
    from asyncq._broker._limit_ops import LimitClaim, LimitSpec

    q = asyncq_queue
    starts: dict[str, float] = {}
    mux = asyncq.ServeMux()

    @mux.handler("api", limits=[asyncq.ConcurrencyLimit(1)])
    async def api(task: asyncq.Task) -> None:
        assert task.id is not None
        starts.setdefault(task.id, time.monotonic())

    ghost = await asyncq_client.enqueue("api", {}, queue=q)
    broker = asyncq_client.broker
    leased, _ = await broker.dequeue(q, 1, "ghost", 800, 1000)
    assert [t.id for t in leased] == [ghost.id]
    taken = await broker.limits.acquire(  # type: ignore[attr-defined]
        q, "ghost", [LimitClaim(ghost.id, [(LimitSpec("concurrency", "api", 1), "")])])
    lease_end = time.monotonic() + 0.8
    assert taken == [0]
    other = await asyncq_client.enqueue("api", {}, queue=q)
    async with asyncq_worker(mux, queues={q: 1}, recover_interval=0.2, recover_grace=0.1,
                             lease_duration=3, retry_delay=lambda n, e, t: 0) as w:
        await wait_until(lambda: len(starts) == 2, timeout=10, message="both ran")
        await w.wait_drained(include_scheduled=True, timeout=10)
    assert starts[other.id] >= lease_end - 0.05


async def test_limits_of_a_mux_nested_in_another_hold(
    asyncq_client: asyncq.Client, asyncq_worker: WorkerFactory, asyncq_queue: str,
) -> None:
    q = asyncq_queue
    gauge = Gauge()
    inner = asyncq.ServeMux()

    @inner.handler("api:call", limits=[asyncq.ConcurrencyLimit(1, key=lambda t: t.json()["t"])])
    async def call(task: asyncq.Task) -> None:
        await gauge.run(task, 0.02)

    outer = asyncq.ServeMux()
    outer.handle("api:", inner)
    await asyncq_client.enqueue_many(asyncq.Task("api:call", {"t": "a"}, queue=q)
                                     for _ in range(4))
    bad = await asyncq_client.enqueue("api:call", {}, queue=q, max_retry=0)
    async with asyncq_worker(outer, queues={q: 1}, concurrency=5) as w:
        await w.wait_drained(include_scheduled=True, timeout=10)
        stored = await asyncq.Inspector(w.worker.broker).task_info(q, bad.id)
    assert len(gauge.done) == 4 and gauge.most == 1
    assert "the key of limit 'api:call' failed" in (stored.last_error or "")
