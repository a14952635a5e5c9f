"""A task scheduled for later wakes idle workers' forwarders at its due time, instead of
waiting for their next ``forward_interval`` round."""

from __future__ import annotations

import time

import anyio
import pytest

import asyncq
from asyncq._broker import _keys as K
from asyncq._broker._connection import make_broker
from asyncq.testing import WorkerFactory, wait_until

pytestmark = pytest.mark.anyio


async def next_message(events: object, timeout: float = 5.0) -> object:
    with anyio.fail_after(timeout):
        return await anext(events)  # type: ignore[call-overload]


async def test_schedule_publishes_only_when_the_task_becomes_the_earliest(
    asyncq_redis_url: str, asyncq_queue: str
) -> None:
    broker = make_broker(asyncq_redis_url)
    client = asyncq.Client(broker)
    events = broker.listen([K.WAKE_CHANNEL])
    try:
        assert await next_message(events) is None  # subscribed
        later = await client.enqueue("t", queue=asyncq_queue, process_in=3600)
        assert later.next_process_at is not None
        due = int(later.next_process_at.timestamp() * 1000)
        assert await next_message(events) == (K.WAKE_CHANNEL, f"{asyncq_queue}@{due}")
        # A task due after the current earliest publishes nothing; a sooner one does.
        await client.enqueue("t", queue=asyncq_queue, process_in=7200)
        sooner = await client.enqueue("t", queue=asyncq_queue, process_in=60)
        assert sooner.next_process_at is not None
        due = int(sooner.next_process_at.timestamp() * 1000)
        assert await next_message(events) == (K.WAKE_CHANNEL, f"{asyncq_queue}@{due}")
    finally:
        await events.aclose()
        await broker.close()


async def test_idle_worker_runs_a_soon_scheduled_task_without_waiting_for_its_round(
    asyncq_client: asyncq.Client, asyncq_worker: WorkerFactory, asyncq_queue: str
) -> None:
    started: list[float] = []
    mux = asyncq.ServeMux()

    @mux.handler("soon")
    async def soon(task: asyncq.Task) -> None:
        started.append(time.time())

    # Both polling safety nets are 30 s: only the due-time wake-up can make this prompt.
    async with asyncq_worker(mux, queues={asyncq_queue: 1}, forward_interval=30,
                             idle_poll_interval=30) as w:
        await wait_until(lambda: w.worker.subscriber.connected, timeout=20)
        info = await asyncq_client.enqueue("soon", queue=asyncq_queue, process_in=0.4)
        assert info.next_process_at is not None
        await wait_until(lambda: started, timeout=20, message="scheduled task ran")
    due = info.next_process_at.timestamp()
    assert due - 0.05 <= started[0] < due + 3.0
