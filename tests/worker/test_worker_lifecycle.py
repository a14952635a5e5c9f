"""Worker lifecycle: start/stop, server state, leases, Redis outages and graceful shutdown
(spec items 18-24, 31-35)."""

from __future__ import annotations

import asyncio
import time
from typing import Any

import anyio
import orjson
import pytest
from redis.asyncio import Redis

from asyncq import (
    Client,
    ConnectionOptions,
    LeaseExpiredError,
    ServeMux,
    Task,
    Worker,
    WorkerConfig,
)
from asyncq._broker import _keys as K
from asyncq.testing import WorkerFactory, queue_counts, wait_drained, wait_until
from tests.helpers.dataplane import dead_redis_url, only_completion_mark, task_hash
from tests.helpers.faults import FaultyBroker
from tests.helpers.inprocess import blocking_mux

pytestmark = pytest.mark.anyio




async def lease_score(redis: Redis, queue: str, task_id: str) -> float | None:
    score: float | None = await redis.zscore(K.queue_keys(queue).lease, task_id)
    return score


def other_tasks() -> set[asyncio.Task[Any]]:
    return {t for t in asyncio.all_tasks() if t is not asyncio.current_task()}


# ----------------------------------------------------------------- start and stop (18-22)


@pytest.mark.parametrize("shared_client", [False, True], ids=["own client", "shared client"])
async def test_worker_starts_runs_immediate_and_scheduled_tasks_and_stops_cleanly(
    shared_client: bool, asyncq_redis_url: str, asyncq_client: Client, asyncq_queue: str,
    redis_client: Redis,
) -> None:
    before = other_tasks()
    started: list[str] = []
    redis: Any = redis_client if shared_client else asyncq_redis_url
    worker = Worker(redis, blocking_mux(started, asyncio.Event()), queues={asyncq_queue: 1})
    async with worker:
        assert worker.ready
        now_id = (await asyncq_client.enqueue("quick", queue=asyncq_queue)).id
        later_id = (await asyncq_client.enqueue("quick", queue=asyncq_queue,
                                                process_in=0.2)).id
        await wait_until(lambda: len(started) == 2, timeout=30)
        await wait_drained(redis_client, [asyncq_queue], worker=worker, include_scheduled=True)
    assert started == [now_id, later_id]
    assert other_tasks() == before, "the worker left tasks running"
    # A client passed in stays open (it belongs to the caller); a URL's client is closed.
    assert await redis_client.ping()


async def test_task_group_start_returns_once_the_worker_is_ready(
    asyncq_redis_url: str, asyncq_client: Client, asyncq_queue: str,
) -> None:
    """``await tg.start(worker.run)`` returns when the worker is ready: a task enqueued right
    after is run without the caller polling ``ready``."""
    ran = asyncio.Event()
    mux = ServeMux()

    async def handler(task: Any) -> None:
        ran.set()

    mux.handle("quick", handler)
    worker = Worker(asyncq_redis_url, mux, queues={asyncq_queue: 1})
    async with anyio.create_task_group() as tg:
        await tg.start(lambda task_status: worker.run(handle_signals=False,
                                                      task_status=task_status))
        assert worker.ready
        await asyncq_client.enqueue("quick", queue=asyncq_queue)
        with anyio.fail_after(30):
            await ran.wait()
        worker.stop()


async def test_a_worker_runs_once(asyncq_redis_url: str, asyncq_queue: str) -> None:
    worker = Worker(asyncq_redis_url, ServeMux(), queues={asyncq_queue: 1})
    async with worker:
        with pytest.raises(RuntimeError, match="runs once"):
            await worker.run(handle_signals=False)
    with pytest.raises(RuntimeError, match="runs once"):
        await worker.run(handle_signals=False)


def test_worker_construction_errors() -> None:
    with pytest.raises(TypeError, match="handler must be callable"):
        Worker("redis://127.0.0.1:6379/0", "mux")  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="concurency"):
        Worker("redis://127.0.0.1:6379/0", ServeMux(), concurency=3)
    with pytest.raises(ValueError, match="heartbeat_interval"):
        Worker("redis://127.0.0.1:6379/0", ServeMux(), lease_duration=2, heartbeat_interval=5)
    with pytest.raises(ValueError, match="unsupported Redis URL"):
        Worker("http://localhost", ServeMux())


def test_worker_takes_a_config_or_option_keywords_not_both() -> None:
    config = WorkerConfig(concurrency=3, queues={"q": 1})
    worker = Worker("redis://127.0.0.1:6379/0", ServeMux(), config=config)
    assert worker.config is config
    with pytest.raises(TypeError, match="either config= or worker options"):
        Worker("redis://127.0.0.1:6379/0", ServeMux(), config=config, concurrency=4)
    with pytest.raises(TypeError, match="config must be a WorkerConfig"):
        Worker("redis://127.0.0.1:6379/0", ServeMux(), config={"concurrency": 3})  # type: ignore[arg-type]


async def test_worker_runs_on_a_broker_given_as_broker_and_leaves_it_open(
    redis_client: Redis, asyncq_client: Client, asyncq_queue: str,
) -> None:
    broker = FaultyBroker(redis_client)
    started: list[str] = []
    config = WorkerConfig(queues={asyncq_queue: 1})
    async with Worker(broker=broker, handler=blocking_mux(started, asyncio.Event()),
                      config=config) as worker:
        assert worker.broker is broker
        task_id = (await asyncq_client.enqueue("quick", queue=asyncq_queue)).id
        await wait_drained(redis_client, [asyncq_queue], worker=worker)
    assert started == [task_id]
    assert not broker.closed  # the caller's broker stays the caller's
    with pytest.raises(TypeError, match="not both"):
        Worker(redis_client, ServeMux(), broker=broker)
    with pytest.raises(ValueError, match="connection options apply to a Redis URL"):
        Worker(broker=broker, handler=ServeMux(), connection=ConnectionOptions())


async def test_worker_with_unreachable_redis_does_not_crash_and_stops_when_cancelled() -> None:
    worker = Worker(dead_redis_url(), ServeMux(), heartbeat_interval=0.1, lease_duration=1)
    started = time.monotonic()
    with anyio.move_on_after(0.5) as scope:
        await worker.run(handle_signals=False)
    assert scope.cancelled_caught
    assert time.monotonic() - started < 30  # stopped when cancelled, not hung on Redis
    assert not worker.ready


async def test_worker_with_unreachable_redis_stops_when_told_before_running() -> None:
    worker = Worker(dead_redis_url(), ServeMux())
    worker.stop()
    with anyio.fail_after(30):
        await worker.run(handle_signals=False)
    assert not worker.ready


async def test_worker_with_unreachable_redis_stops_when_told() -> None:
    worker = Worker(dead_redis_url(), ServeMux())
    with anyio.fail_after(30):
        async with anyio.create_task_group() as tg:
            tg.start_soon(lambda: worker.run(handle_signals=False))
            await wait_until(lambda: worker.subscriber.failures > 0, timeout=30)
            worker.stop()
    assert not worker.ready


async def test_cancelled_start_of_an_unreachable_worker_leaves_nothing_running() -> None:
    before = other_tasks()
    worker = Worker(dead_redis_url(), ServeMux())
    with anyio.move_on_after(0.3) as scope:
        async with worker:
            pytest.fail("an unreachable worker must not become ready")
    assert scope.cancelled_caught
    assert other_tasks() == before


async def test_heartbeat_with_redis_down_does_not_raise() -> None:
    worker = Worker(dead_redis_url(), ServeMux())
    await worker.heartbeat.tick()
    await worker.heartbeat.clear()
    await worker.broker.close()


# ----------------------------------------------------------------- server state (31, 34)


async def test_heartbeat_publishes_server_and_worker_state_and_shutdown_clears_it(
    asyncq_client: Client, asyncq_worker: WorkerFactory, asyncq_queue: str, redis_client: Redis,
) -> None:
    started: list[str] = []
    release = asyncio.Event()
    async with asyncq_worker(blocking_mux(started, release), queues={asyncq_queue: 3},
                             concurrency=4, heartbeat_interval=0.1) as w:
        server_id = w.worker.config.server_id
        skey, wkey = K.server_key(server_id), K.workers_key(server_id)
        info = await asyncq_client.enqueue("block", queue=asyncq_queue)
        await wait_until(lambda: started, timeout=30)

        async def state() -> dict[str, Any] | None:
            raw = await redis_client.get(skey)
            doc: dict[str, Any] | None = None if raw is None else orjson.loads(raw)
            return doc if doc and doc["active_workers"] == 1 else None

        doc = await wait_until(state, timeout=30)
        assert doc["server_id"] == server_id
        assert doc["status"] == "active"
        assert doc["queues"] == {asyncq_queue: 3}
        assert doc["concurrency"] == 4
        assert doc["pid"] > 0 and doc["host"]
        assert abs(doc["started_at"] - time.time() * 1000) < 60_000
        assert await redis_client.zscore(K.SERVERS, skey) is not None
        assert await redis_client.zscore(K.WORKERS, wkey) is not None
        workers = await redis_client.hgetall(wkey)
        entry = orjson.loads(workers[info.id.encode()])
        assert (entry["type"], entry["queue"]) == ("block", asyncq_queue)
        assert 0 < await redis_client.pttl(skey) <= 1200

        w.worker.stop_fetching()  # what SIGTSTP does: the state says so on the next beat
        await w.worker.heartbeat.tick()
        doc = orjson.loads(await redis_client.get(skey))
        assert (doc["status"], doc["active_workers"]) == ("stopped", 1)
        release.set()
    assert await redis_client.exists(skey, wkey) == 0
    assert await redis_client.zscore(K.SERVERS, skey) is None
    assert await redis_client.zscore(K.WORKERS, wkey) is None


# ----------------------------------------------------------------- leases (32, 33, 10)


async def test_leases_of_running_tasks_are_extended(
    asyncq_client: Client, asyncq_worker: WorkerFactory, asyncq_queue: str, redis_client: Redis,
) -> None:
    started: list[str] = []
    release = asyncio.Event()
    async with asyncq_worker(blocking_mux(started, release), queues={asyncq_queue: 1},
                             lease_duration=2, heartbeat_interval=0.2) as w:
        slow = (await asyncq_client.enqueue("block", queue=asyncq_queue)).id
        quick = (await asyncq_client.enqueue("quick", queue=asyncq_queue)).id
        await wait_until(lambda: len(started) == 2, timeout=30)
        first = await lease_score(redis_client, asyncq_queue, slow)
        assert first is not None
        later = await wait_until(
            lambda: _score_above(redis_client, asyncq_queue, slow, first + 300), timeout=3)
        assert abs(later - (time.time() * 1000 + 2000)) < 1000
        await w.worker.heartbeat.tick()
        score = await lease_score(redis_client, asyncq_queue, slow)
        lease = w.worker.leases.get(slow)
        assert lease is not None and lease.holder == "running"
        assert score is not None and abs(lease.until_ms - score) < 200
        # Only the running task holds a lease: the finished one's was removed, not renewed.
        assert await lease_score(redis_client, asyncq_queue, quick) is None
        release.set()
        await w.wait_drained()
    assert await redis_client.zcard(K.queue_keys(asyncq_queue).lease) == 0


async def _score_above(redis: Redis, queue: str, task_id: str, floor: float) -> float | None:
    score = await lease_score(redis, queue, task_id)
    return score if score is not None and score > floor else None


async def test_a_lease_entry_that_vanished_is_restored_not_lost(
    asyncq_client: Client, asyncq_worker: WorkerFactory, asyncq_queue: str, redis_client: Redis,
) -> None:
    started: list[str] = []
    cancelled: list[str] = []
    release = asyncio.Event()
    async with asyncq_worker(blocking_mux(started, release, cancelled),
                             queues={asyncq_queue: 1}, lease_duration=2,
                             heartbeat_interval=0.2) as w:
        task_id = (await asyncq_client.enqueue("block", queue=asyncq_queue)).id
        await wait_until(lambda: started, timeout=30)
        await redis_client.zrem(K.queue_keys(asyncq_queue).lease, task_id)
        await w.worker.heartbeat.tick()
        assert await lease_score(redis_client, asyncq_queue, task_id) is not None
        assert task_id in w.worker.processor.running
        release.set()
        await w.wait_drained()
    assert cancelled == []
    assert await only_completion_mark(redis_client, asyncq_queue, task_id)


async def test_lost_lease_cancels_the_handler_and_leaves_the_task_to_the_recoverer(
    asyncq_client: Client, asyncq_worker: WorkerFactory, asyncq_queue: str, redis_client: Redis,
) -> None:
    started: list[str] = []
    cancelled: list[str] = []
    hooked: list[BaseException] = []
    async with asyncq_worker(blocking_mux(started, asyncio.Event(), cancelled),
                             queues={asyncq_queue: 1}, lease_duration=2,
                             heartbeat_interval=0.2,
                             error_handler=lambda t, e: hooked.append(e)) as w:
        task_id = (await asyncq_client.enqueue("block", queue=asyncq_queue)).id
        await wait_until(lambda: started, timeout=30)
        # Another worker took the task over (e.g. it was recovered and leased again).
        await redis_client.hset(K.queue_keys(asyncq_queue).task(task_id), "owner", "someone")
        await wait_until(lambda: cancelled, timeout=30)
        await wait_until(lambda: task_id not in w.worker.processor.running, timeout=30)
        assert not w.worker.acker.pending
    assert cancelled == [task_id]
    assert len(hooked) == 1 and isinstance(hooked[0], LeaseExpiredError)
    fields = await task_hash(redis_client, asyncq_queue, task_id)
    assert (fields["state"], fields["owner"]) == (b"active", b"someone")
    assert "error" not in fields


async def test_outcomes_written_after_a_redis_outage_are_not_lost(
    asyncq_client: Client, asyncq_queue: str, redis_client: Redis,
) -> None:
    broker = FaultyBroker(redis_client)
    outage = broker.fault(active=False)
    started: list[str] = []
    release = asyncio.Event()
    worker = Worker(broker, blocking_mux(started, release), queues={asyncq_queue: 1},
                    lease_duration=3, heartbeat_interval=0.2)
    async with worker:
        ids = [(await asyncq_client.enqueue("block", queue=asyncq_queue)).id for _ in range(3)]
        await wait_until(lambda: len(started) == 3, timeout=30)
        outage.active = True
        release.set()
        await wait_until(lambda: len(worker.acker.pending) == 3 and not worker.processor.running,
                         timeout=3)
        await worker.heartbeat.tick()  # fails quietly
        outage.active = False
        await wait_drained(redis_client, [asyncq_queue], worker=worker)
    for task_id in ids:
        assert await only_completion_mark(redis_client, asyncq_queue, task_id)
    assert worker.acker.given_up == 0 and worker.acker.written == 3


async def test_a_lease_that_cannot_be_renewed_cancels_the_handler_when_it_runs_out(
    asyncq_client: Client, asyncq_queue: str, redis_client: Redis,
) -> None:
    broker = FaultyBroker(redis_client)
    outage = broker.fault(active=False)
    started: list[str] = []
    cancelled: list[str] = []
    hooked: list[BaseException] = []
    worker = Worker(broker, blocking_mux(started, asyncio.Event(), cancelled),
                    queues={asyncq_queue: 1}, lease_duration=0.6, heartbeat_interval=0.1,
                    error_handler=lambda t, e: hooked.append(e))
    async with worker:
        task_id = (await asyncq_client.enqueue("block", queue=asyncq_queue)).id
        await wait_until(lambda: started, timeout=30)
        outage.active = True
        # (the outage lasts until the handler is cancelled: only the lease running out can)
        await wait_until(lambda: cancelled, timeout=30, message="handler cancelled")
        outage.active = False
    assert [type(e) for e in hooked] == [LeaseExpiredError]
    fields = await task_hash(redis_client, asyncq_queue, task_id)
    assert fields["state"] == b"active"  # the recoverer's job now


# ----------------------------------------------------------------- graceful shutdown


async def test_shutdown_requeues_running_tasks_and_the_next_worker_runs_them(
    asyncq_client: Client, asyncq_worker: WorkerFactory, asyncq_queue: str, redis_client: Redis,
) -> None:
    started: list[str] = []
    cancelled: list[str] = []
    qk = K.queue_keys(asyncq_queue)
    async with asyncq_worker(blocking_mux(started, asyncio.Event(), cancelled),
                             queues={asyncq_queue: 1}, concurrency=3,
                             shutdown_timeout=0.2) as w:
        running = [(await asyncq_client.enqueue("block", queue=asyncq_queue)).id
                   for _ in range(3)]
        await wait_until(lambda: len(started) == 3, timeout=30)
        waiting = (await asyncq_client.enqueue("block", queue=asyncq_queue)).id
        began = time.monotonic()
    assert time.monotonic() - began < 30  # the blocked handlers alone would never end
    assert sorted(cancelled) == sorted(running)
    assert not w.worker.acker.pending and w.worker.acker.given_up == 0
    counts = await queue_counts(redis_client, asyncq_queue)
    assert (counts["pending"], counts["active"]) == (4, 0)
    assert await redis_client.zcard(qk.lease) == 0
    pending = [m.decode() for m in await redis_client.lrange(qk.pending, 0, -1)]
    assert pending[0] == waiting  # the requeued tasks are next in line (dequeue end)
    assert sorted(pending[1:]) == sorted(running)
    for task_id in running:
        fields = await task_hash(redis_client, asyncq_queue, task_id)
        assert fields["state"] == b"pending" and "owner" not in fields
        assert fields.get("retried", b"0") == b"0"

    done: list[str] = []
    mux = ServeMux()

    @mux.handler("block")
    async def finish(task: Task) -> None:
        assert task.id is not None
        done.append(task.id)

    async with asyncq_worker(mux, queues={asyncq_queue: 1}, concurrency=1) as w2:
        await w2.wait_drained()
    assert sorted(done[:3]) == sorted(running) and done[3] == waiting


async def test_a_handler_ignoring_cancellation_does_not_block_shutdown(
    asyncq_client: Client, asyncq_worker: WorkerFactory, asyncq_queue: str, redis_client: Redis,
) -> None:
    started = asyncio.Event()
    stubborn_exit = asyncio.Event()
    mux = ServeMux()

    @mux.handler("stubborn")
    async def stubborn(task: Task) -> None:
        started.set()
        while True:
            try:
                await stubborn_exit.wait()
                return
            except asyncio.CancelledError:
                continue  # ignores cancellation: bad handler

    info = await asyncq_client.enqueue("stubborn", queue=asyncq_queue)
    async with asyncq_worker(mux, queues={asyncq_queue: 1}, shutdown_timeout=0.2) as w:
        await started.wait()
        began = time.monotonic()
    elapsed = time.monotonic() - began
    try:
        assert elapsed < 30, elapsed  # the handler alone would never end
        assert len(w.worker.processor.abandoned) == 1
        fields = await task_hash(redis_client, asyncq_queue, info.id)
        assert fields["state"] == b"pending"
    finally:
        stubborn_exit.set()
        await wait_until(lambda: not w.worker.processor.abandoned, timeout=30)


async def test_no_lease_is_lost_while_draining(
    asyncq_client: Client, asyncq_redis_url: str, asyncq_queue: str, redis_client: Redis,
) -> None:
    started: list[str] = []
    cancelled: list[str] = []
    release = asyncio.Event()
    worker = Worker(asyncq_redis_url, blocking_mux(started, release, cancelled),
                    queues={asyncq_queue: 1}, concurrency=2, lease_duration=0.8,
                    heartbeat_interval=0.1, shutdown_timeout=10)
    async with worker:
        ids = [(await asyncq_client.enqueue("block", queue=asyncq_queue)).id for _ in range(2)]
        await wait_until(lambda: len(started) == 2, timeout=30)
        worker.stop()  # draining starts; the handlers are still running
        first = await lease_score(redis_client, asyncq_queue, ids[0])
        assert first is not None
        # Renewed past the lease it had when draining started: the heartbeat still runs.
        await wait_until(lambda: _score_above(redis_client, asyncq_queue, ids[0], first + 900),
                         timeout=3)
        release.set()
    assert cancelled == []
    for task_id in ids:
        assert await only_completion_mark(redis_client, asyncq_queue, task_id)
    counts = await queue_counts(redis_client, asyncq_queue)
    assert counts["retry"] == counts["pending"] == counts["active"] == 0
    assert await redis_client.get(K.queue_keys(asyncq_queue).processed) == b"2"


async def test_outcomes_of_tasks_finishing_during_shutdown_are_written(
    asyncq_client: Client, asyncq_worker: WorkerFactory, asyncq_queue: str, redis_client: Redis,
) -> None:
    """A handler that finishes inside shutdown_timeout gets its normal outcome."""
    started: list[str] = []
    release = asyncio.Event()
    async with asyncq_worker(blocking_mux(started, release), queues={asyncq_queue: 1},
                             shutdown_timeout=5) as w:
        info = await asyncq_client.enqueue("block", queue=asyncq_queue, retention=60)
        await wait_until(lambda: started, timeout=30)
        w.worker.stop()
        # The state published while draining says so, with the handler still counted.
        await w.worker.heartbeat.tick()
        raw = await redis_client.get(K.server_key(w.worker.config.server_id))
        doc = orjson.loads(raw)
        assert (doc["status"], doc["active_workers"]) == ("stopping", 1)
        release.set()
    fields = await task_hash(redis_client, asyncq_queue, info.id)
    assert fields["state"] == b"completed"
    assert not await redis_client.exists(K.server_key(w.worker.config.server_id))


async def test_an_unexpected_error_while_fetching_does_not_stop_the_worker(
    asyncq_client: Client, asyncq_queue: str, redis_client: Redis,
) -> None:
    broker = FaultyBroker(redis_client)
    # Its first dequeue fails with an unexpected (non-Redis) error.
    bug = broker.fault("dequeue", error=lambda: ValueError("unexpected reply"), times=1)
    started: list[str] = []
    worker = Worker(broker, blocking_mux(started, asyncio.Event()), queues={asyncq_queue: 1})
    async with worker:
        info = await asyncq_client.enqueue("quick", queue=asyncq_queue)
        await wait_until(lambda: started, timeout=30)
        await wait_drained(redis_client, [asyncq_queue], worker=worker)
    assert bug.fired == 1 and started == [info.id]
