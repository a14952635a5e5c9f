"""Background components, one iteration at a time (``tick()``) with a fake clock: recoverer,
forwarder, janitor, aggregator, subscriber, health check (spec items 25-30, 36-39), plus
cancellation of a running task end to end."""

from __future__ import annotations

import asyncio
import time
from collections import Counter
from collections.abc import AsyncIterator, Callable
from typing import Any

import pytest
from dataplane_helpers import dead_redis_url, lmembers, task_hash, zmembers
from redis.asyncio import Redis

from asyncq import BrokerError, Client, FakeClock, ServeMux, Task, Worker
from asyncq import _keys as K
from asyncq._broker import Outcome
from asyncq._worker._outcomes import TaskCancelledError
from asyncq.testing import WorkerFactory, queue_counts, wait_until

pytestmark = pytest.mark.anyio

DEAD_OWNER = "dead-worker"
MakeWorker = Callable[..., Worker]


@pytest.fixture
async def fake_clock() -> FakeClock:
    return FakeClock()


@pytest.fixture
async def make_worker(asyncq_redis_url: str, fake_clock: FakeClock) -> AsyncIterator[MakeWorker]:
    """Workers that are never run: tests call their components' tick() under the fake clock."""
    made: list[Worker] = []

    def make(**options: Any) -> Worker:
        worker = Worker(asyncq_redis_url, ServeMux(), clock=fake_clock, **options)
        made.append(worker)
        return worker

    yield make
    for worker in made:
        await worker.broker.close()


async def lease_to_dead_worker(worker: Worker, queue: str, count: int = 1,
                               lease_ms: int = 1000) -> list[str]:
    """Lease tasks to a worker that will never renew or finish them."""
    raws, _ = await worker.broker.dequeue(queue, count, DEAD_OWNER, lease_ms, 1000)
    assert len(raws) == count
    return [raw.id for raw in raws]


# ----------------------------------------------------------------- recoverer (25-28)


async def test_recoverer_retries_a_task_whose_lease_expired(
    make_worker: MakeWorker, fake_clock: FakeClock, asyncq_queue: str, redis_client: Redis,
) -> None:
    worker = make_worker(queues={asyncq_queue: 1}, retry_delay=lambda n, e, t: 60,
                         recover_grace=30)
    client = Client(worker.broker, clock=fake_clock)
    info = await client.enqueue("t", queue=asyncq_queue)
    [task_id] = await lease_to_dead_worker(worker, asyncq_queue)
    assert task_id == info.id
    fake_clock.advance(60)  # the lease ended 59 s ago
    assert await worker.recoverer.tick() == 1
    qk = K.queue_keys(asyncq_queue)
    now = fake_clock.now_ms()
    assert await zmembers(redis_client, qk.retry) == {task_id: now + 60_000}
    fields = await task_hash(redis_client, asyncq_queue, task_id)
    assert (fields["state"], fields["retried"]) == (b"retry", b"1")
    assert fields["error"] == b"LeaseExpiredError: task lease expired"
    assert int(fields["failed_at"]) == now
    assert "owner" not in fields
    assert await lmembers(redis_client, qk.active) == []
    assert await zmembers(redis_client, qk.lease) == {}


async def test_recoverer_archives_an_expired_task_without_retries_left(
    make_worker: MakeWorker, fake_clock: FakeClock, asyncq_queue: str, redis_client: Redis,
) -> None:
    worker = make_worker(queues={asyncq_queue: 1}, recover_grace=30)
    info = await Client(worker.broker, clock=fake_clock).enqueue("t", queue=asyncq_queue,
                                                                 max_retry=0)
    await lease_to_dead_worker(worker, asyncq_queue)
    fake_clock.advance(60)
    assert await worker.recoverer.tick() == 1
    fields = await task_hash(redis_client, asyncq_queue, info.id)
    assert fields["state"] == b"archived"
    assert fields["error"] == b"LeaseExpiredError: task lease expired"
    assert fields.get("retried", b"0") == b"0"
    counts = await queue_counts(redis_client, asyncq_queue)
    assert (counts["archived"], counts["retry"], counts["active"]) == (1, 0, 0)


async def test_recoverer_falls_back_to_the_default_delay_when_retry_delay_raises(
    make_worker: MakeWorker, fake_clock: FakeClock, asyncq_queue: str, redis_client: Redis,
) -> None:
    def bug(retried: int, exc: BaseException, task: Task) -> float:
        raise RuntimeError("policy bug")

    worker = make_worker(queues={asyncq_queue: 1}, recover_grace=30, retry_delay=bug)
    await Client(worker.broker, clock=fake_clock).enqueue("t", queue=asyncq_queue)
    [task_id] = await lease_to_dead_worker(worker, asyncq_queue)
    fake_clock.advance(60)
    assert await worker.recoverer.tick() == 1
    delay = (await zmembers(redis_client, K.queue_keys(asyncq_queue).retry))[task_id]
    assert 15_000 <= delay - fake_clock.now_ms() <= 44_000  # a first retry, default schedule


async def test_recoverer_takes_only_leases_older_than_the_grace(
    make_worker: MakeWorker, fake_clock: FakeClock, asyncq_queue: str, redis_client: Redis,
) -> None:
    queues = [f"{asyncq_queue}-a", f"{asyncq_queue}-b"]
    worker = make_worker(queues=dict.fromkeys(queues, 1), recover_grace=30,
                         retry_delay=lambda n, e, t: 60)
    client = Client(worker.broker, clock=fake_clock)
    now = fake_clock.now_ms()
    expected: set[str] = set()
    kept: set[str] = set()
    for queue in queues:
        for _ in range(3):
            await client.enqueue("t", queue=queue)
        old, recent, future = await lease_to_dead_worker(worker, queue, 3)
        lease = K.queue_keys(queue).lease
        await redis_client.zadd(lease, {old: now - 40_000, recent: now - 20_000,
                                        future: now + 60_000})
        expected.add(old)
        kept.update((recent, future))
    assert await worker.recoverer.tick() == 2
    for queue in queues:
        retry = set(await zmembers(redis_client, K.queue_keys(queue).retry))
        active = set(await lmembers(redis_client, K.queue_keys(queue).active))
        assert retry <= expected and len(retry) == 1
        assert active <= kept and len(active) == 2
    assert await worker.recoverer.tick() == 0  # nothing else is due


async def test_recoverer_with_nothing_active_is_a_no_op(
    make_worker: MakeWorker, asyncq_queue: str,
) -> None:
    worker = make_worker(queues={asyncq_queue: 1})
    assert await worker.recoverer.tick() == 0


async def test_active_task_without_a_lease_gets_one_and_is_recovered_later(
    make_worker: MakeWorker, fake_clock: FakeClock, asyncq_queue: str, redis_client: Redis,
) -> None:
    worker = make_worker(queues={asyncq_queue: 1}, recover_grace=5,
                         retry_delay=lambda n, e, t: 60)
    await Client(worker.broker, clock=fake_clock).enqueue("t", queue=asyncq_queue)
    [task_id] = await lease_to_dead_worker(worker, asyncq_queue, lease_ms=3_600_000)
    qk = K.queue_keys(asyncq_queue)
    await redis_client.zrem(qk.lease, task_id)  # e.g. lost in a restore
    assert await worker.recoverer.tick() == 0
    assert await zmembers(redis_client, qk.lease) == {task_id: fake_clock.now_ms()}
    fake_clock.advance(6)
    assert await worker.recoverer.tick() == 1
    assert (await task_hash(redis_client, asyncq_queue, task_id))["state"] == b"retry"


async def test_recoverer_leaves_a_lease_renewed_meanwhile(
    make_worker: MakeWorker, fake_clock: FakeClock, asyncq_queue: str, redis_client: Redis,
) -> None:
    """The owner check in the script: a lease renewed after listing is not recovered."""
    worker = make_worker(queues={asyncq_queue: 1}, recover_grace=0)
    await Client(worker.broker, clock=fake_clock).enqueue("t", queue=asyncq_queue)
    [task_id] = await lease_to_dead_worker(worker, asyncq_queue)
    fake_clock.advance(10)
    [raw] = await worker.broker.list_lease_expired(asyncq_queue, fake_clock.now_ms(), 10)
    await worker.broker.extend_leases(asyncq_queue, [task_id], DEAD_OWNER, 30_000)
    outcome = Outcome("retry", asyncq_queue, task_id, retry_at_ms=fake_clock.now_ms(),
                      error="x")
    assert not await worker.broker.recover(outcome, fake_clock.now_ms())
    assert (await task_hash(redis_client, asyncq_queue, raw.id))["state"] == b"active"


# ----------------------------------------------------------------- forwarder (29-30)


async def test_forwarder_moves_due_scheduled_and_retry_tasks_to_pending(
    make_worker: MakeWorker, fake_clock: FakeClock, asyncq_queue: str, redis_client: Redis,
) -> None:
    worker = make_worker(queues={asyncq_queue: 1})
    client = Client(worker.broker, clock=fake_clock)
    qk = K.queue_keys(asyncq_queue)
    start = fake_clock.now_ms()
    already = (await client.enqueue("t", queue=asyncq_queue)).id
    due = (await client.enqueue("t", queue=asyncq_queue, process_in=10)).id
    future = (await client.enqueue("t", queue=asyncq_queue, process_in=100)).id
    retry_id = (await client.enqueue("t", queue=asyncq_queue, process_in=1)).id
    fake_clock.advance(1)
    assert await worker.forwarder.tick() == start + 10_000  # the next due time
    assert await lmembers(redis_client, qk.pending) == [retry_id, already]
    # retry_id runs, fails, and is due for retry in 9 s, together with `due`.
    raws, _ = await worker.broker.dequeue(asyncq_queue, 2, "w", 30_000, 1000)
    assert {r.id for r in raws} == {already, retry_id}
    await worker.broker.finish([
        Outcome("retry", asyncq_queue, retry_id, retry_at_ms=fake_clock.now_ms() + 9000,
                error="E: x"),
        Outcome("done", asyncq_queue, already)], "w")
    fake_clock.advance(9)  # exactly the due time of both: a score equal to now is forwarded
    assert await worker.forwarder.tick() == start + 100_000
    assert set(await lmembers(redis_client, qk.pending)) == {due, retry_id}
    for task_id in (due, retry_id):
        fields = await task_hash(redis_client, asyncq_queue, task_id)
        assert (fields["state"], int(fields["pending_since"])) == (b"pending",
                                                                     fake_clock.now_ms())
    assert set(await zmembers(redis_client, qk.scheduled)) == {future}
    assert await zmembers(redis_client, qk.retry) == {}
    assert worker.forwarder.forwarded == 3


async def test_forwarder_sends_a_due_grouped_task_to_its_group(
    make_worker: MakeWorker, fake_clock: FakeClock, asyncq_queue: str, redis_client: Redis,
) -> None:
    worker = make_worker(queues={asyncq_queue: 1})
    info = await Client(worker.broker, clock=fake_clock).enqueue(
        "t", queue=asyncq_queue, process_in=5, group="batch")
    fake_clock.advance(5)
    assert await worker.forwarder.tick() is None
    qk = K.queue_keys(asyncq_queue)
    assert await zmembers(redis_client, qk.group("batch")) == {info.id: fake_clock.now_ms()}
    assert await redis_client.smembers(qk.groups) == {b"batch"}
    assert (await task_hash(redis_client, asyncq_queue, info.id))["state"] == b"aggregating"
    assert await lmembers(redis_client, qk.pending) == []


async def test_worker_runs_a_scheduled_task_when_due(
    asyncq_client: Client, asyncq_worker: WorkerFactory, asyncq_queue: str,
) -> None:
    ran_at: list[float] = []
    mux = ServeMux()

    @mux.handler("later")
    async def later(task: Task) -> None:
        ran_at.append(time.monotonic())

    async with asyncq_worker(mux, queues={asyncq_queue: 1}) as w:
        enqueued = time.monotonic()
        await asyncq_client.enqueue("later", queue=asyncq_queue, process_in=0.3)
        await wait_until(lambda: ran_at, timeout=3)
        await w.wait_drained(include_scheduled=True)
    delay = ran_at[0] - enqueued
    assert 0.29 <= delay < 0.3 + w.worker.config.forward_interval + 0.3, delay


async def test_a_short_retry_delay_is_honoured_promptly(
    asyncq_client: Client, asyncq_worker: WorkerFactory, asyncq_queue: str,
) -> None:
    runs: list[float] = []
    mux = ServeMux()

    @mux.handler("flaky")
    async def flaky(task: Task) -> None:
        runs.append(time.monotonic())
        if len(runs) == 1:
            raise RuntimeError("first try fails")

    async with asyncq_worker(mux, queues={asyncq_queue: 1}, forward_interval=30,
                             retry_delay=lambda n, e, t: 0.2) as w:
        await asyncq_client.enqueue("flaky", queue=asyncq_queue)
        await wait_until(lambda: len(runs) == 2, timeout=3)
        await w.wait_drained(include_scheduled=True)
    assert 0.19 <= runs[1] - runs[0] < 1.0


# ----------------------------------------------------------------- janitor (36)


async def test_janitor_deletes_completed_tasks_past_their_retention(
    make_worker: MakeWorker, fake_clock: FakeClock, asyncq_queue: str, redis_client: Redis,
) -> None:
    queues = [f"{asyncq_queue}-a", f"{asyncq_queue}-b"]
    worker = make_worker(queues=dict.fromkeys(queues, 1), janitor_batch=1)
    client = Client(worker.broker, clock=fake_clock)
    expiring: list[tuple[str, str]] = []
    staying: list[tuple[str, str]] = []
    for queue in queues:
        for retention, bucket in ((10, expiring), (10, expiring), (100, staying)):
            info = await client.enqueue("t", queue=queue, retention=retention)
            raws, _ = await worker.broker.dequeue(queue, 1, "w", 30_000, 1000)
            assert [r.id for r in raws] == [info.id]
            await worker.broker.finish([Outcome("complete", queue, info.id,
                                                retention_ms=retention * 1000)], "w")
            bucket.append((queue, info.id))
    assert await worker.janitor.tick() == 0
    fake_clock.advance(10)  # expiry == now: deleted
    assert await worker.janitor.tick() == 4
    for queue, task_id in expiring:
        assert await task_hash(redis_client, queue, task_id) == {}
    for queue, task_id in staying:
        assert (await task_hash(redis_client, queue, task_id))["state"] == b"completed"
        assert set(await zmembers(redis_client, K.queue_keys(queue).completed)) == {task_id}


# ----------------------------------------------------------------- aggregator (37-39)


class Recorder:
    """A group aggregator that records its calls and combines payloads into one task."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, list[Any]]] = []

    def __call__(self, group: str, tasks: list[Task]) -> Task:
        payloads = [t.json() for t in tasks]
        self.calls.append((group, payloads))
        return Task("batch", {"group": group, "items": sorted(payloads)})


async def pending_tasks(redis: Redis, queue: str) -> list[dict[str, bytes]]:
    ids = await lmembers(redis, K.queue_keys(queue).pending)
    return [await task_hash(redis, queue, task_id) for task_id in ids]


async def test_aggregator_combines_a_group_after_the_grace_period(
    make_worker: MakeWorker, fake_clock: FakeClock, asyncq_queue: str, redis_client: Redis,
) -> None:
    agg = Recorder()
    worker = make_worker(queues={asyncq_queue: 1}, group_aggregator=agg, group_grace_period=1)
    assert worker.aggregator is not None
    client = Client(worker.broker, clock=fake_clock)
    ids = [(await client.enqueue("item", n, queue=asyncq_queue, group="g")).id for n in range(3)]
    assert await worker.aggregator.tick() == 0
    fake_clock.advance(0.5)
    assert await worker.aggregator.tick() == 0
    fake_clock.advance(0.5)
    assert await worker.aggregator.tick() == 1
    assert [(g, sorted(p)) for g, p in agg.calls] == [("g", [0, 1, 2])]
    [combined] = await pending_tasks(redis_client, asyncq_queue)
    assert combined["payload"] == b'{"group":"g","items":[0,1,2]}'
    qk = K.queue_keys(asyncq_queue)
    assert await redis_client.zcard(qk.group("g")) == 0
    assert await redis_client.smembers(qk.groups) == set()
    assert await redis_client.zcard(qk.aggregation_sets) == 0
    for task_id in ids:
        assert await task_hash(redis_client, asyncq_queue, task_id) == {}


async def test_aggregator_respects_the_max_delay(
    make_worker: MakeWorker, fake_clock: FakeClock, asyncq_queue: str, redis_client: Redis,
) -> None:
    agg = Recorder()
    worker = make_worker(queues={asyncq_queue: 1}, group_aggregator=agg, group_grace_period=2,
                         group_max_delay=4)
    assert worker.aggregator is not None
    client = Client(worker.broker, clock=fake_clock)
    made = []
    for n in range(6):  # a task every second: the grace period never passes
        made.append(await worker.aggregator.tick())
        await client.enqueue("item", n, queue=asyncq_queue, group="g")
        fake_clock.advance(1)
    assert made == [0, 0, 0, 0, 1, 0]
    assert [sorted(p) for _, p in agg.calls] == [[0, 1, 2, 3]]
    assert await redis_client.zcard(K.queue_keys(asyncq_queue).group("g")) == 2


async def test_aggregator_respects_the_max_size(
    make_worker: MakeWorker, fake_clock: FakeClock, asyncq_queue: str, redis_client: Redis,
) -> None:
    agg = Recorder()
    worker = make_worker(queues={asyncq_queue: 1}, group_aggregator=agg, group_grace_period=60,
                         group_max_size=3)
    assert worker.aggregator is not None
    client = Client(worker.broker, clock=fake_clock)
    for n in range(5):
        await client.enqueue("item", n, queue=asyncq_queue, group="g")
    assert await worker.aggregator.tick() == 1  # no time passed: the size alone triggers it
    assert await worker.aggregator.tick() == 0  # two left, below the max size
    assert len(agg.calls[0][1]) == 3
    assert await redis_client.zcard(K.queue_keys(asyncq_queue).group("g")) == 2
    assert len(await pending_tasks(redis_client, asyncq_queue)) == 1


async def test_failed_aggregation_keeps_the_group_tasks(
    make_worker: MakeWorker, fake_clock: FakeClock, asyncq_queue: str, redis_client: Redis,
) -> None:
    def broken(group: str, tasks: list[Task]) -> Task:
        raise RuntimeError("aggregator bug")

    worker = make_worker(queues={asyncq_queue: 1}, group_aggregator=broken,
                         group_grace_period=1)
    assert worker.aggregator is not None
    client = Client(worker.broker, clock=fake_clock)
    ids = [(await client.enqueue("item", n, queue=asyncq_queue, group="g")).id for n in range(2)]
    fake_clock.advance(2)
    assert await worker.aggregator.tick() == 0
    assert await lmembers(redis_client, K.queue_keys(asyncq_queue).pending) == []
    for task_id in ids:
        assert await task_hash(redis_client, asyncq_queue, task_id) != {}
    # After the set deadline the staged tasks return to their group.
    fake_clock.advance(3 * 60)
    await worker.broker.reclaim_stale_aggregation_sets(asyncq_queue)
    assert set(await zmembers(redis_client, K.queue_keys(asyncq_queue).group("g"))) == set(ids)


async def test_a_failing_queue_does_not_stop_the_aggregator_for_the_others(
    make_worker: MakeWorker, fake_clock: FakeClock, asyncq_queue: str, redis_client: Redis,
) -> None:
    broken, good = f"{asyncq_queue}-broken", f"{asyncq_queue}-good"
    agg = Recorder()
    worker = make_worker(queues={broken: 2, good: 1}, group_aggregator=agg,
                         group_grace_period=1)
    assert worker.aggregator is not None
    await redis_client.set(K.queue_keys(broken).groups, "not a set")  # every read fails
    client = Client(worker.broker, clock=fake_clock)
    for n in range(2):
        await client.enqueue("item", n, queue=good, group="g")
    fake_clock.advance(2)
    with pytest.raises(BrokerError):  # the broken queue's error, once every queue was tried
        await worker.aggregator.tick()
    assert [(g, sorted(p)) for g, p in agg.calls] == [("g", [0, 1])]
    assert len(await pending_tasks(redis_client, good)) == 1


async def test_running_worker_aggregates_groups(
    asyncq_client: Client, asyncq_worker: WorkerFactory, asyncq_queue: str,
) -> None:
    got: list[Any] = []
    mux = ServeMux()

    @mux.handler("batch")
    async def batch(task: Task) -> None:
        got.append(task.json())

    async with asyncq_worker(mux, queues={asyncq_queue: 1}, group_aggregator=Recorder(),
                             group_grace_period=1, group_max_size=2) as w:
        assert w.worker.aggregator is not None
        w.worker.aggregator.interval = 0.05
        for n in range(2):
            await asyncq_client.enqueue("item", n, queue=asyncq_queue, group="g")
        await wait_until(lambda: got, timeout=3)
        await w.wait_drained()
    assert got == [{"group": "g", "items": [0, 1]}]


# ----------------------------------------------------------------- subscriber and cancellation


async def test_subscriber_ignores_unknown_ids_and_other_queues(make_worker: MakeWorker,
                                                               asyncq_queue: str) -> None:
    worker = make_worker(queues={asyncq_queue: 1})
    worker.subscriber.handle(K.CANCEL_CHANNEL, "no-such-task")
    worker.subscriber.handle(K.WAKE_CHANNEL, "someone-elses-queue")
    assert not worker.processor.wake.is_set()
    worker.subscriber.handle(K.WAKE_CHANNEL, asyncq_queue)
    assert worker.processor.wake.is_set()


async def test_cancel_a_running_task_through_the_client(
    asyncq_client: Client, asyncq_worker: WorkerFactory, asyncq_queue: str, redis_client: Redis,
) -> None:
    started = asyncio.Event()
    cancelled = asyncio.Event()
    hooked: list[BaseException] = []
    mux = ServeMux()

    @mux.handler("runaway")
    async def runaway(task: Task) -> None:
        started.set()
        try:
            await asyncio.Event().wait()
        except asyncio.CancelledError:
            cancelled.set()
            raise

    info = await asyncq_client.enqueue("runaway", queue=asyncq_queue, max_retry=5)
    async with asyncq_worker(mux, queues={asyncq_queue: 1},
                             error_handler=lambda t, e: hooked.append(e)) as w:
        await started.wait()
        sent = time.monotonic()
        await asyncq_client.cancel(info.id)
        await wait_until(cancelled.is_set, timeout=1)
        assert time.monotonic() - sent < 0.5
        await w.wait_drained()
    fields = await task_hash(redis_client, asyncq_queue, info.id)
    assert fields["state"] == b"archived"
    assert fields["error"] == b"TaskCancelledError: task cancelled on request"
    assert [type(e) for e in hooked] == [TaskCancelledError]


async def test_cancelling_a_task_that_is_not_running_changes_nothing(
    asyncq_client: Client, asyncq_worker: WorkerFactory, asyncq_queue: str, redis_client: Redis,
) -> None:
    ran: list[str] = []
    mux = ServeMux()

    @mux.handler("t")
    async def handler(task: Task) -> None:
        ran.append(task.type)

    async with asyncq_worker(mux, queues={asyncq_queue: 1}, forward_interval=0.1) as w:
        info = await asyncq_client.enqueue("t", queue=asyncq_queue, process_in=0.2)
        await asyncq_client.cancel(info.id)
        await wait_until(lambda: ran, timeout=3)
        await w.wait_drained(include_scheduled=True)
    assert ran == ["t"]


# ----------------------------------------------------------------- health check


@pytest.mark.parametrize("kind", ["sync", "async"])
async def test_health_check_reports_none_when_redis_answers(
    kind: str, make_worker: MakeWorker, asyncq_queue: str,
) -> None:
    seen: list[BaseException | None] = []

    def sync_cb(err: BaseException | None) -> None:
        seen.append(err)

    async def async_cb(err: BaseException | None) -> None:
        seen.append(err)

    worker = make_worker(queues={asyncq_queue: 1},
                         health_check=sync_cb if kind == "sync" else async_cb)
    assert worker.healthchecker is not None
    await worker.healthchecker.tick()
    assert seen == [None]


async def test_health_check_reports_the_error_when_redis_is_down() -> None:
    seen: list[BaseException | None] = []
    worker = Worker(dead_redis_url(), ServeMux(), health_check=seen.append)
    assert worker.healthchecker is not None
    await worker.healthchecker.tick()
    await worker.broker.close()
    assert len(seen) == 1 and isinstance(seen[0], BrokerError)


async def test_running_worker_calls_the_health_check_periodically(
    asyncq_worker: WorkerFactory, asyncq_queue: str,
) -> None:
    seen: list[BaseException | None] = []
    async with asyncq_worker(ServeMux(), queues={asyncq_queue: 1}, health_check=seen.append,
                             health_check_interval=0.05):
        await wait_until(lambda: len(seen) >= 2, timeout=3)
    assert set(seen) == {None}


async def test_immediate_retries_are_forwarded_without_waiting_for_the_interval(
    asyncq_client: Client, asyncq_worker: WorkerFactory, asyncq_queue: str,
) -> None:
    runs: Counter[str] = Counter()
    mux = ServeMux()

    @mux.handler("flaky")
    async def flaky(task: Task) -> None:
        assert task.id is not None
        runs[task.id] += 1
        if task.retried < 2:
            raise RuntimeError("fails twice")

    async with asyncq_worker(mux, queues={asyncq_queue: 1}, forward_interval=30,
                             concurrency=4, retry_delay=lambda n, e, t: 0) as w:
        for _ in range(20):
            await asyncq_client.enqueue("flaky", queue=asyncq_queue)
        await w.wait_drained(include_scheduled=True, timeout=5)
    assert len(runs) == 20 and set(runs.values()) == {3}
