"""The subscriber, and cancellation of a running task end to end."""

from __future__ import annotations

import asyncio

import pytest
from component_helpers import (
    MakeWorker,
)
from redis.asyncio import Redis

from asyncq import Client, ServeMux, Task
from asyncq._broker import CancelRequest, QueueWake
from asyncq._worker._outcomes import TaskCancelledError
from asyncq.testing import WorkerFactory, wait_until
from tests.helpers.dataplane import task_hash

pytestmark = pytest.mark.anyio


# ----------------------------------------------------------------- subscriber and cancellation


async def test_subscriber_ignores_unknown_ids_and_other_queues(make_worker: MakeWorker,
                                                               asyncq_queue: str) -> None:
    worker = make_worker(queues={asyncq_queue: 1})
    worker.subscriber.handle(CancelRequest("no-such-task"))
    worker.subscriber.handle(QueueWake("someone-elses-queue"))
    assert not worker.processor.wake.is_set()
    worker.subscriber.handle(QueueWake(asyncq_queue))
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
    # Renewals (which would also see the request) a minute apart: only the pub/sub message
    # can explain a cancellation within the generous deadline.
    async with asyncq_worker(mux, queues={asyncq_queue: 1}, lease_duration=300,
                             heartbeat_interval=60,
                             error_handler=lambda t, e: hooked.append(e)) as w:
        await started.wait()
        await asyncq_client.cancel(info.id)
        await wait_until(cancelled.is_set, timeout=30, message="cancelled by the pub/sub message")
        await w.wait_drained()
    fields = await task_hash(redis_client, asyncq_queue, info.id)
    assert fields["state"] == b"archived"
    assert fields["error"] == b"TaskCancelledError: task cancelled on request"
    assert [type(e) for e in hooked] == [TaskCancelledError]


async def test_cancelling_a_task_that_is_not_running_removes_it_and_stops_no_run(
    asyncq_client: Client, asyncq_worker: WorkerFactory, asyncq_queue: str, redis_client: Redis,
) -> None:
    """A scheduled task cancelled never runs (removed); the cancel message it sends changes
    nothing for the task due after it."""
    ran: list[str] = []
    mux = ServeMux()

    @mux.handler("t")
    async def handler(task: Task) -> None:
        ran.append(task.id)

    async with asyncq_worker(mux, queues={asyncq_queue: 1}, forward_interval=0.1) as w:
        info = await asyncq_client.enqueue("t", queue=asyncq_queue, process_in=30)
        later = await asyncq_client.enqueue("t", queue=asyncq_queue, process_in=0.3)
        assert await asyncq_client.cancel(info.id) == "removed"  # (long before it was due)
        assert await asyncq_client.cancel("not-" + later.id) == "not_found"
        await wait_until(lambda: ran, timeout=30)
        await w.wait_drained(include_scheduled=True)
    assert ran == [later.id]


