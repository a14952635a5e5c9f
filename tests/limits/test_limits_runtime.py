"""Limits changed at run time, in running workers: a queue's concurrency cap across workers
(set, raised, lowered and cleared while tasks wait, never a restart), and an operator's value
replacing a handler's declared limit until it is cleared."""

from __future__ import annotations

import asyncio
import time
from typing import Any

import pytest
from redis.asyncio import Redis

import asyncq
from asyncq._broker import _keys as K
from asyncq.testing import WorkerFactory, wait_until

pytestmark = pytest.mark.anyio


class Gate:
    """Handlers that hold until released; counts how many run at once and the most seen."""

    def __init__(self) -> None:
        self.now = 0
        self.most = 0
        self.started: list[str] = []
        self.done: list[str] = []
        self.release = asyncio.Event()

    async def hold(self, task: asyncq.Task) -> None:
        assert task.id is not None
        self.now += 1
        self.most = max(self.most, self.now)
        self.started.append(task.id)
        release = self.release  # the event of the phase it started in
        try:
            await release.wait()
        finally:
            self.now -= 1
        self.done.append(task.id)

    def running(self, n: int) -> bool:
        return self.now == n

    def end_phase(self) -> None:
        """Let the tasks running now end; those starting from now on hold again."""
        release, self.release = self.release, asyncio.Event()
        release.set()


async def quiet(seconds: float) -> None:
    """Let the workers run a while where nothing must happen (nothing to wait for)."""
    await asyncio.sleep(seconds)


async def test_a_queue_cap_holds_across_two_workers_and_changes_without_restart(
    asyncq_client: asyncq.Client, asyncq_worker: WorkerFactory, asyncq_queue: str,
    redis_client: Redis,
) -> None:
    """Cap 2 over two workers of concurrency 10, tasks of a handler with no declared limit:
    2 run; raising it to 5 starts 3 waiting tasks at once (nobody gave a slot back); cutting
    it to 1 stops nothing but no task starts until fewer than 1 run; clearing it lets all
    the rest start."""
    q = asyncq_queue
    gate = Gate()
    inspector = asyncq.Inspector(redis_client)
    assert await inspector.queue_concurrency(q) is None
    assert await inspector.set_queue_concurrency(q, 2) == 0
    mux = asyncq.ServeMux()
    mux.handle("work", gate.hold)
    await asyncq_client.enqueue_many(asyncq.Task("work", {"i": i}, queue=q) for i in range(12))
    async with asyncq_worker(mux, queues={q: 1}, concurrency=10) as a, \
            asyncq_worker(mux, queues={q: 1}, concurrency=10) as b:
        await wait_until(lambda: gate.running(2), timeout=30, message="2 running")
        await wait_until(lambda: _waiting(inspector, q, 10), timeout=30,
                         message="the other 10 waiting for the cap")
        await quiet(0.3)
        assert gate.most == 2
        cap = await inspector.queue_concurrency(q)
        assert cap is not None
        assert (cap.kind, cap.limit, cap.in_use, cap.waiting, cap.runtime) == (
            "queue", 2, 2, 10, True)

        assert await inspector.set_queue_concurrency(q, 5) == 3  # woken by the raise itself
        await wait_until(lambda: gate.running(5), timeout=30, message="5 running")
        assert await inspector.set_queue_concurrency(q, 1) == 0
        gate.end_phase()
        await wait_until(lambda: len(gate.done) == 5, timeout=30, message="the 5 ended")
        await wait_until(lambda: gate.running(1), timeout=30, message="1 running under cap 1")
        await quiet(0.3)
        assert gate.now == 1 and len(gate.started) == 6

        assert await inspector.clear_queue_concurrency(q) == 6
        await wait_until(lambda: len(gate.started) == 12, timeout=30,
                         message="all the rest started at once")
        assert gate.now == 12 - len(gate.done)
        gate.release.set()
        await a.wait_drained(include_scheduled=True, timeout=10)
        await b.wait_drained(include_scheduled=True, timeout=10)
        deferred = sum(w.worker.processor.limits.deferred  # type: ignore[union-attr]
                       for w in (a, b))
    assert len(set(gate.done)) == 12 and deferred >= 10
    assert await inspector.queue_concurrency(q) is None
    info = await inspector.queue_info(q)
    assert (info.processed, info.failed, info.retry) == (12, 0, 0)  # waits are no retries
    assert await redis_client.zcard(
        K.limit_state(K.limit_base(q, "queue", ""), "") + "held") == 0  # every slot back


async def _waiting(inspector: asyncq.Inspector, q: str, n: int) -> bool:
    cap = await inspector.queue_concurrency(q)
    return cap is not None and cap.waiting == n


async def test_a_cap_set_while_workers_run_applies_to_their_next_start(
    asyncq_client: asyncq.Client, asyncq_worker: WorkerFactory, asyncq_queue: str,
    redis_client: Redis,
) -> None:
    """A worker running a plain handler function (no ServeMux, so no limits declared
    anywhere) obeys a cap set after it started."""
    q = asyncq_queue
    gate = Gate()
    inspector = asyncq.Inspector(redis_client)
    async with asyncq_worker(gate.hold, queues={q: 1}, concurrency=10) as w:
        await asyncq_client.enqueue("any", queue=q)
        await wait_until(lambda: gate.running(1), timeout=30, message="one running uncapped")
        await inspector.set_queue_concurrency(q, 1)  # counts the starts from now on
        await asyncq_client.enqueue_many(asyncq.Task("any", queue=q) for _ in range(3))
        await wait_until(lambda: gate.running(2), timeout=30, message="one more under the cap")
        await wait_until(lambda: _waiting(inspector, q, 2), timeout=30, message="2 waiting")
        gate.release.set()
        await w.wait_drained(include_scheduled=True, timeout=10)
    assert len(gate.done) == 4 and gate.most == 2


async def test_an_operator_value_wins_over_the_declared_limit_until_cleared(
    asyncq_client: asyncq.Client, asyncq_worker: WorkerFactory, asyncq_queue: str,
    redis_client: Redis,
) -> None:
    q = asyncq_queue
    gate = Gate()
    inspector = asyncq.Inspector(redis_client)
    mux = asyncq.ServeMux()
    mux.handle("api", gate.hold, limits=[asyncq.ConcurrencyLimit(1)])
    await asyncq_client.enqueue_many(asyncq.Task("api", {"i": i}, queue=q) for i in range(8))
    async with asyncq_worker(mux, queues={q: 1}, concurrency=10) as w:
        await wait_until(lambda: gate.running(1), timeout=30, message="1 running (declared)")
        (use,) = await inspector.limits(q)
        assert (use.kind, use.name, use.limit, use.runtime, use.declared) == (
            "concurrency", "api", 1, False, 1)

        woken = await inspector.set_limit(q, asyncq.ConcurrencyLimit(3, name="api"))
        assert woken == 2
        await wait_until(lambda: gate.running(3), timeout=30, message="3 running (operator)")
        (use,) = await inspector.limits(q)
        assert (use.limit, use.in_use, use.runtime, use.declared) == (3, 3, True, 1)

        assert await inspector.clear_limit(q, "concurrency", "api") == 0
        gate.end_phase()
        await wait_until(lambda: len(gate.done) == 3, timeout=30, message="the 3 ended")
        await wait_until(lambda: gate.running(1), timeout=30, message="declared 1 again")
        await quiet(0.3)
        assert gate.now == 1
        (use,) = await inspector.limits(q)
        assert (use.limit, use.runtime) == (1, False)
        gate.release.set()
        await w.wait_drained(include_scheduled=True, timeout=10)
    assert len(gate.done) == 8 and gate.most == 3


async def test_an_operator_rate_wakes_the_tasks_waiting_for_tokens(
    asyncq_client: asyncq.Client, asyncq_worker: WorkerFactory, asyncq_queue: str,
    redis_client: Redis,
) -> None:
    """Declared 1 per minute: one starts, the rest wait a minute each; a run-time 100/s
    lets them all run within a second of being set."""
    q = asyncq_queue
    done: list[float] = []
    inspector = asyncq.Inspector(redis_client)
    mux = asyncq.ServeMux()

    @mux.handler("call", limits=[asyncq.RateLimit("1/m", name="vendor")])
    async def call(task: asyncq.Task) -> None:
        done.append(time.monotonic())

    await asyncq_client.enqueue_many(asyncq.Task("call", {"i": i}, queue=q) for i in range(6))
    async with asyncq_worker(mux, queues={q: 1}, concurrency=10) as w:
        await wait_until(lambda: len(done) == 1, timeout=30, message="the first token")
        await wait_until(lambda: _rate_waiting(inspector, q, 5), timeout=30,
                         message="5 waiting for tokens")
        set_at = time.monotonic()
        assert await inspector.set_limit(q, asyncq.RateLimit("100/s", name="vendor")) == 5
        await wait_until(lambda: len(done) == 6, timeout=30, message="all ran")
        (use,) = await inspector.limits(q)
        assert (use.limit, use.period_ms, use.runtime, use.declared,
                use.declared_period_ms) == (100, 1000, True, 1, 60_000)
        await w.wait_drained(include_scheduled=True, timeout=30)
    assert done[-1] - set_at < 20  # at once, not a token a minute (5 minutes for the 5)


async def _rate_waiting(inspector: asyncq.Inspector, q: str, n: int) -> bool:
    uses = await inspector.limits(q)
    return bool(uses) and uses[0].waiting == n


async def test_values_set_at_run_time_are_checked_and_listed_before_use(
    redis_client: Redis, asyncq_queue: str,
) -> None:
    q = asyncq_queue
    inspector = asyncq.Inspector(redis_client)
    for bad in (0, -1, 1_000_001):
        with pytest.raises(ValueError):
            await inspector.set_queue_concurrency(q, bad)
    with pytest.raises(TypeError):
        await inspector.set_queue_concurrency(q, 2.5)  # type: ignore[arg-type]
    with pytest.raises(ValueError):
        await inspector.set_limit(q, asyncq.ConcurrencyLimit(2))  # no name
    with pytest.raises(ValueError):
        await inspector.set_limit(q, asyncq.ConcurrencyLimit(2, key=str, name="x"))
    with pytest.raises(TypeError):
        await inspector.set_limit(q, "5/s")  # type: ignore[arg-type]
    with pytest.raises(ValueError):
        await inspector.clear_limit(q, "queue", "x")
    with pytest.raises(ValueError):
        await inspector.set_queue_concurrency("bad queue name\n", 2)

    # set before any worker used the limit: listed with no key and nothing in use
    await inspector.set_limit(q, asyncq.RateLimit("5/s", name="stripe"))
    await inspector.set_queue_concurrency(q, 4)
    uses = await inspector.limits(q)
    assert [(u.kind, u.name, u.key, u.limit, u.in_use, u.runtime, u.declared)
            for u in uses] == [("queue", "", "", 4, 0, True, None),
                               ("rate", "stripe", "", 5, 0, True, None)]
    assert await inspector.clear_limit(q, "rate", "stripe") == 0
    assert await inspector.clear_queue_concurrency(q) == 0
    assert await inspector.limits(q) == []


async def test_a_queue_cap_and_a_run_time_value_over_go_asynqs_layout(
    asyncq_redis_url: str, redis_client: Redis, asyncq_queue: str,
) -> None:
    """``?wire=asynq``: the cap lives in keys Go ignores (``asynq:{q}:asyncq:limits``), holds
    across two asyncq workers, a refused task waits in asynq's scheduled set (Unix seconds),
    and a raise starts the waiters at once; an operator's value replaces a declared limit."""
    from asyncq._broker._asynq import _keys as AK

    url = asyncq_redis_url + "?wire=asynq"
    q = asyncq_queue
    gate = Gate()
    mux = asyncq.ServeMux()
    mux.handle("work", gate.hold)
    mux.handle("api", gate.hold, limits=[asyncq.ConcurrencyLimit(1)])
    options = {"queues": {q: 1}, "concurrency": 5, "idle_poll_interval": 0.05,
               "forward_interval": 0.2}
    async with asyncq.Client(url) as client, asyncq.Inspector(url) as inspector:
        await inspector.set_queue_concurrency(q, 2)
        assert await redis_client.hget(AK.limits_registry(q), "o:q:") == b"2"
        await client.enqueue_many(asyncq.Task("work", {"i": i}, queue=q) for i in range(6))
        async with asyncq.Worker(url, mux, **options), asyncq.Worker(url, mux, **options):
            await wait_until(lambda: gate.running(2), timeout=10, message="2 running")
            await wait_until(lambda: _waiting(inspector, q, 4), timeout=10,
                             message="4 waiting")
            scores = await redis_client.zrange(AK.queue_keys(q).scheduled, 0, -1,
                                               withscores=True)
            assert len(scores) == 4 and all(s < 10**11 for _, s in scores)  # Unix seconds
            assert await inspector.set_queue_concurrency(q, 6) == 4
            await wait_until(lambda: gate.running(6), timeout=10, message="6 running")
            gate.end_phase()
            await wait_until(lambda: len(gate.done) == 6, timeout=10, message="all ran")

            await inspector.clear_queue_concurrency(q)
            await inspector.set_limit(q, asyncq.ConcurrencyLimit(3, name="api"))
            await client.enqueue_many(asyncq.Task("api", {"i": i}, queue=q) for i in range(5))
            await wait_until(lambda: gate.running(3), timeout=10, message="3 api running")
            await quiet(0.3)
            assert gate.now == 3
            gate.end_phase()
            gate.release.set()  # and the 2 after them
            await wait_until(lambda: len(gate.done) == 11, timeout=10, message="all ran")
    assert gate.most == 6
    assert await redis_client.keys(f"asyncq:{{{q}}}*") == []  # nothing in asyncq's layout


async def test_events_tell_a_deferral_by_the_cap_and_the_wake_up_by_a_raise(
    asyncq_client: asyncq.Client, asyncq_worker: WorkerFactory, asyncq_queue: str,
    redis_client: Redis,
) -> None:
    """A task over the queue's cap is told active -> scheduled (no retry used), then
    scheduled -> pending by the raise itself (nothing else woke it), then it runs."""
    q = asyncq_queue
    gate = Gate()
    S = asyncq.TaskState
    inspector = asyncq.Inspector(redis_client)
    await inspector.set_queue_concurrency(q, 1)
    async with asyncq_client.events(q) as events, \
            asyncq_worker(gate.hold, queues={q: 1}) as w:
        await asyncq_client.enqueue("t", queue=q)
        second = await asyncq_client.enqueue("t", queue=q)
        got: list[asyncq.TaskEvent] = []
        async with asyncio.timeout(10):
            async for event in events:
                assert isinstance(event, asyncq.TaskEvent)
                if event.id != second.id:
                    continue
                got.append(event)
                if event.state is S.SCHEDULED:
                    assert await inspector.set_queue_concurrency(q, 2) == 1
                if event.state is S.ACTIVE and len(got) > 2:
                    break
        gate.end_phase()
        gate.release.set()
        await w.wait_drained(include_scheduled=True, timeout=10)
    assert [(e.previous, e.state) for e in got] == [
        (None, S.PENDING), (S.PENDING, S.ACTIVE), (S.ACTIVE, S.SCHEDULED),
        (S.SCHEDULED, S.PENDING), (S.PENDING, S.ACTIVE)]
    assert got[2].retried == 0 and got[2].next_process_at is not None


async def test_a_cap_on_a_queue_a_pattern_matches_caps_that_queue_only(
    asyncq_client: asyncq.Client, asyncq_worker: WorkerFactory, asyncq_queue: str,
    redis_client: Redis,
) -> None:
    """A worker serving ``<q>:*`` (wildcard queues): the cap of one tenant queue, set before
    that queue exists, holds there, while another tenant's tasks all run at once."""
    capped, free = f"{asyncq_queue}:a", f"{asyncq_queue}:b"
    running: dict[str, int] = {capped: 0, free: 0}
    most: dict[str, int] = {capped: 0, free: 0}
    go = asyncio.Event()

    async def hold(task: asyncq.Task) -> None:
        q = task.queue or ""
        running[q] += 1
        most[q] = max(most[q], running[q])
        try:
            await go.wait()
        finally:
            running[q] -= 1

    await asyncq.Inspector(redis_client).set_queue_concurrency(capped, 2)
    async with asyncq_worker(hold, queues={f"{asyncq_queue}:*": 1}, concurrency=20) as w:
        await asyncq_client.enqueue_many(asyncq.Task("t", queue=q) for q in (capped, free)
                                         for _ in range(5))
        await wait_until(lambda: running == {capped: 2, free: 5}, timeout=10,
                         message="2 of the capped tenant and 5 of the other running")
        await quiet(0.3)
        assert most == {capped: 2, free: 5}
        go.set()
        await w.wait_drained(capped, free, include_scheduled=True, timeout=10)
    assert most == {capped: 2, free: 5}


class CountingOps:
    """The broker's limit operations, counting the claim calls: (queue, claims, queue_cap)."""

    def __init__(self, ops: Any) -> None:
        self.ops = ops
        self.acquired: list[tuple[str, int, bool]] = []

    def __getattr__(self, name: str) -> Any:
        return getattr(self.ops, name)

    async def acquire(self, queue: str, owner: str, claims: Any, *,
                      queue_cap: bool = False) -> list[int]:
        self.acquired.append((queue, len(claims), queue_cap))
        return list(await self.ops.acquire(queue, owner, claims, queue_cap=queue_cap))


async def test_only_tasks_with_limits_or_a_cap_make_the_claim_call(
    asyncq_client: asyncq.Client, asyncq_worker: WorkerFactory, asyncq_queue: str,
    redis_client: Redis,
) -> None:
    """A worker whose mux has one limited handler makes no claim call for the other types of a
    queue without a cap (dequeued or handed off); the limited type claims; once the queue is
    capped, every task of it claims, with the cap."""
    q = asyncq_queue
    done: list[str] = []

    async def record(task: asyncq.Task) -> None:
        done.append(task.type)

    mux = asyncq.ServeMux()
    mux.handle("free", record)
    mux.handle("limited", record, limits=[asyncq.ConcurrencyLimit(5)])
    async with asyncq_worker(mux, queues={q: 1}, concurrency=5) as w:
        gate: Any = w.worker.processor.limits
        counting = CountingOps(gate._ops)
        gate._ops = counting
        for n in range(1, 4):  # one at a time: the idle worker is handed each in one hop
            await asyncq_client.enqueue("free", queue=q)
            await wait_until(lambda n=n: len(done) == n, timeout=30, message=f"{n} ran")
        await asyncq_client.enqueue_many(asyncq.Task("free", queue=q) for _ in range(5))
        await wait_until(lambda: len(done) == 8, timeout=30, message="a dequeued batch ran")
        assert counting.acquired == []
        await asyncq_client.enqueue("limited", queue=q)
        await wait_until(lambda: len(done) == 9, timeout=30, message="the limited task ran")
        assert counting.acquired == [(q, 1, False)]
        await asyncq.Inspector(redis_client).set_queue_concurrency(q, 10)
        await asyncq_client.enqueue("free", queue=q)
        await wait_until(lambda: len(done) == 10, timeout=30, message="a capped task ran")
        assert counting.acquired[1:] == [(q, 1, True)]


async def test_a_slot_given_back_over_go_asynqs_layout_wakes_the_next_task_at_once(
    asyncq_redis_url: str, asyncq_queue: str,
) -> None:
    """``?wire=asynq``, a queue capped at 1, a worker that polls only every 30 s: the task
    deferred by the cap starts as soon as the running one gives its slot back (the give-back
    wakes the worker; no poll, no hand-off, since the queue is capped)."""
    url = asyncq_redis_url + "?wire=asynq"
    q = asyncq_queue
    gate = Gate()
    mux = asyncq.ServeMux()
    mux.handle("work", gate.hold)
    async with asyncq.Client(url) as client, asyncq.Inspector(url) as inspector:
        await inspector.set_queue_concurrency(q, 1)
        async with asyncq.Worker(url, mux, queues={q: 1}, concurrency=5, idle_poll_interval=30,
                                 forward_interval=30):
            await client.enqueue_many(asyncq.Task("work", queue=q) for _ in range(2))
            await wait_until(lambda: gate.running(1), timeout=10, message="1 running")
            await wait_until(lambda: _waiting(inspector, q, 1), timeout=10, message="1 waiting")
            gate.end_phase()
            await wait_until(lambda: len(gate.started) == 2, timeout=20,  # (polls: 30 s)
                             message="the waiting task started after the give-back")
            gate.release.set()
            await wait_until(lambda: len(gate.done) == 2, timeout=30, message="both ran")
    assert gate.most == 1
