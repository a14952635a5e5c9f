"""Burst mode: ``run`` returns once nothing is left to run now or within the horizon."""

from __future__ import annotations

import asyncio
import time
from collections import Counter

import anyio
import pytest
from redis.asyncio import Redis

from asyncq import Client, Inspector, Retry, ServeMux, Task, Worker
from asyncq._broker import _keys as K
from asyncq.testing import wait_until
from tests.helpers.dataplane import task_hash

pytestmark = pytest.mark.anyio


async def _run_burst(url: str, handler: object, queue: str, **options: object) -> float:
    """Run a burst worker to its end; how long it ran."""
    began = time.monotonic()
    worker = Worker(url, handler, queues={queue: 1}, burst=True, **options)  # type: ignore[arg-type]
    with anyio.fail_after(15):
        await worker.run(handle_signals=False)
    return time.monotonic() - began


async def test_burst_runs_every_pending_task_then_returns(
    asyncq_client: Client, asyncq_redis_url: str, asyncq_queue: str, redis_client: Redis,
) -> None:
    ran: list[str] = []

    async def handler(task: Task) -> None:
        await asyncio.sleep(0.05)
        assert task.id is not None
        ran.append(task.id)

    ids = [(await asyncq_client.enqueue("t", queue=asyncq_queue)).id for _ in range(20)]
    await _run_burst(asyncq_redis_url, handler, asyncq_queue, concurrency=4)
    assert sorted(ran) == sorted(ids)
    qk = K.queue_keys(asyncq_queue)
    assert await redis_client.llen(qk.pending) == 0
    assert await redis_client.llen(qk.active) == 0


async def test_burst_waits_for_a_running_task_and_tasks_due_within_the_horizon(
    asyncq_client: Client, asyncq_redis_url: str, asyncq_queue: str, redis_client: Redis,
) -> None:
    """Nothing pending at times, but a task running, one scheduled 0.6 s ahead and a retry
    0.3 s ahead: the worker runs them all before returning."""
    runs: Counter[str] = Counter()
    mux = ServeMux()

    @mux.handler("slow")
    async def slow(task: Task) -> None:
        runs["slow"] += 1
        await asyncio.sleep(0.5)

    @mux.handler("flaky")
    async def flaky(task: Task) -> None:
        runs["flaky"] += 1
        if task.retried == 0:
            raise Retry(delay=0.3)

    @mux.handler("later")
    async def later(task: Task) -> None:
        runs["later"] += 1

    slow_task = await asyncq_client.enqueue("slow", queue=asyncq_queue, retention=60)
    await asyncq_client.enqueue("flaky", queue=asyncq_queue)
    await asyncq_client.enqueue("later", queue=asyncq_queue, process_in=0.6)
    await _run_burst(asyncq_redis_url, mux, asyncq_queue)
    assert runs == {"slow": 1, "flaky": 2, "later": 1}
    fields = await task_hash(redis_client, asyncq_queue, slow_task.id)
    assert fields["state"] == b"completed"


async def test_burst_does_not_wait_for_tasks_due_later_or_in_a_paused_queue(
    asyncq_client: Client, asyncq_inspector: Inspector, asyncq_redis_url: str,
    asyncq_queue: str, redis_client: Redis,
) -> None:
    ran: list[str] = []

    async def handler(task: Task) -> None:
        ran.append(task.type)

    paused = f"{asyncq_queue}-paused"
    later = await asyncq_client.enqueue("later", queue=asyncq_queue, process_in=60)
    await asyncq_client.enqueue("held", queue=paused)
    await asyncq_inspector.pause(paused)
    began = time.monotonic()
    worker = Worker(asyncq_redis_url, handler, queues={asyncq_queue: 1, paused: 1}, burst=True)
    with anyio.fail_after(30):
        await worker.run(handle_signals=False)
    assert time.monotonic() - began < 30  # not after the task due in 60 s
    assert ran == []
    assert (await task_hash(redis_client, asyncq_queue, later.id))["state"] == b"scheduled"
    assert await redis_client.llen(K.queue_keys(paused).pending) == 1


async def test_burst_picks_up_a_task_enqueued_while_it_runs(
    asyncq_client: Client, asyncq_redis_url: str, asyncq_queue: str,
) -> None:
    ran: list[str] = []
    mux = ServeMux()

    @mux.handler("first")
    async def first(task: Task) -> None:
        # Enqueued while this worker is busy: still run before it returns.
        await asyncq_client.enqueue("second", queue=asyncq_queue)
        ran.append("first")

    @mux.handler("second")
    async def second(task: Task) -> None:
        ran.append("second")

    await asyncq_client.enqueue("first", queue=asyncq_queue)
    await _run_burst(asyncq_redis_url, mux, asyncq_queue)
    assert ran == ["first", "second"]


async def test_a_worker_without_burst_keeps_running_when_idle(
    asyncq_redis_url: str, asyncq_queue: str,
) -> None:
    async def handler(task: Task) -> None: ...

    worker = Worker(asyncq_redis_url, handler, queues={asyncq_queue: 1})
    async with anyio.create_task_group() as tg:
        await tg.start(worker.run)
        with anyio.move_on_after(0.6):  # longer than a burst worker would take to stop
            await wait_until(lambda: not worker.processor.fetching, timeout=1)
        assert worker.processor.fetching
        worker.stop()
