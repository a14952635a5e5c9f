"""Prefetch: tasks leased ahead of free slots start the moment a slot frees, keep their lease,
and are handed back (never lost, never run twice) on shutdown or cancellation."""

from __future__ import annotations

import asyncio

import pytest
from redis.asyncio import Redis

import asyncq
from asyncq._broker import _keys as K
from asyncq.testing import WorkerFactory, queue_counts, wait_until
from tests.helpers.inprocess import blocking_mux

pytestmark = pytest.mark.anyio




async def test_prefetched_tasks_are_leased_then_run_when_slots_free(
    asyncq_client: asyncq.Client, asyncq_worker: WorkerFactory, asyncq_queue: str,
    redis_client: Redis,
) -> None:
    release, started = asyncio.Event(), []
    ids = [(await asyncq_client.enqueue("block", queue=asyncq_queue)).id for _ in range(6)]
    async with asyncq_worker(blocking_mux(started, release), queues={asyncq_queue: 1},
                             concurrency=2, prefetch=2, heartbeat_interval=0.2,
                             lease_duration=1.0) as w:
        await wait_until(lambda: len(started) == 2 and len(w.worker.processor.buffer) == 2)
        counts = await queue_counts(redis_client, asyncq_queue)
        assert counts["active"] == 4 and counts["pending"] == 2  # 2 running + 2 prefetched
        lease = K.queue_keys(asyncq_queue).lease
        buffered = list(w.worker.processor.buffer)
        first = {i: await redis_client.zscore(lease, i) for i in buffered}
        # The heartbeat renews prefetched tasks' leases too.
        await wait_until(lambda: all_moved(redis_client, lease, first), timeout=30)
        release.set()
        await w.wait_drained()
    assert sorted(started) == sorted(ids)  # every task ran exactly once


async def all_moved(redis: Redis, lease: str, first: dict[str, float | None]) -> bool:
    for task_id, score in first.items():
        now = await redis.zscore(lease, task_id)
        if now is None or score is None or now <= score:
            return False
    return True


async def test_shutdown_requeues_prefetched_tasks_for_the_next_worker(
    asyncq_client: asyncq.Client, asyncq_worker: WorkerFactory, asyncq_queue: str,
    redis_client: Redis,
) -> None:
    release, started = asyncio.Event(), []
    for _ in range(4):
        await asyncq_client.enqueue("block", queue=asyncq_queue)
    async with asyncq_worker(blocking_mux(started, release), queues={asyncq_queue: 1},
                             concurrency=1, prefetch=3, shutdown_timeout=5) as w:
        await wait_until(lambda: len(w.worker.processor.buffer) == 3)
        release.set()  # the running one finishes during shutdown; the 3 prefetched go back
        w.worker.stop()
    assert started and len(started) == 1
    counts = await queue_counts(redis_client, asyncq_queue)
    assert counts == {**counts, "pending": 3, "active": 0}
    again: list[str] = []
    async with asyncq_worker(blocking_mux(again, release), queues={asyncq_queue: 1}) as w:
        await w.wait_drained()
    assert len(again) == 3 and not set(again) & set(started)


async def test_cancelling_a_prefetched_task_archives_it_without_running_it(
    asyncq_client: asyncq.Client, asyncq_worker: WorkerFactory, asyncq_queue: str,
    redis_client: Redis,
) -> None:
    release, started = asyncio.Event(), []
    await asyncq_client.enqueue("block", queue=asyncq_queue)
    waiting = await asyncq_client.enqueue("block", queue=asyncq_queue)
    async with asyncq_worker(blocking_mux(started, release), queues={asyncq_queue: 1},
                             concurrency=1, prefetch=1) as w:
        await wait_until(lambda: waiting.id in w.worker.processor.buffer)
        await asyncq_client.cancel(waiting.id)
        state = K.queue_keys(asyncq_queue).task(waiting.id)
        await wait_until(lambda: state_is(redis_client, state, b"archived"))
        release.set()
        await w.wait_drained()
    assert waiting.id not in started
    error = await redis_client.hget(state, "error")
    assert error == b"TaskCancelledError: task cancelled on request"


async def state_is(redis: Redis, key: str, state: bytes) -> bool:
    return bool(await redis.hget(key, "state") == state)


def test_prefetch_defaults_to_a_quarter_of_concurrency_and_is_validated() -> None:
    assert asyncq.WorkerConfig(concurrency=100).prefetch == 25
    assert asyncq.WorkerConfig(concurrency=3).prefetch == 0
    assert asyncq.WorkerConfig(concurrency=10, prefetch=0).prefetch == 0
    with pytest.raises(ValueError, match="prefetch"):
        asyncq.WorkerConfig(prefetch=-1)
