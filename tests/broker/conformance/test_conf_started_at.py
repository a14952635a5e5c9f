"""When a task's latest run started, as the inspector reads it on every broker: stamped by
the step that leases it (a dequeue, the run after a retry), frozen once the run ends."""

from __future__ import annotations

import pytest
from broker_helpers import LEASE_MS, OWNER, WAITER_TTL_MS, enqueue, finish1

from asyncq import Client, FakeClock, Inspector
from asyncq._broker import Broker, Outcome
from asyncq._clock import ms_to_datetime

pytestmark = pytest.mark.anyio

ON_CLUSTER = True


async def test_a_dequeue_stamps_each_run_with_the_workers_clock(
    broker: Broker, client: Client, clock: FakeClock, asyncq_queue: str,
) -> None:
    task_id = await enqueue(client, asyncq_queue)
    clock.advance(5)
    first = clock.now_ms()
    await broker.dequeue(asyncq_queue, 1, OWNER, LEASE_MS, WAITER_TTL_MS)
    async with Inspector(broker) as inspector:
        info = await inspector.task_info(asyncq_queue, task_id)
        assert info.started_at == ms_to_datetime(first)
        [listed] = await inspector.list_tasks(asyncq_queue, "active")
        assert listed.started_at == ms_to_datetime(first)

        # It fails; its retry is another run, with its own start. The failed run's start
        # stays readable while the task waits for that retry.
        clock.advance(2)
        assert await finish1(broker, Outcome("retry", asyncq_queue, task_id,
                                             retry_at_ms=clock.now_ms() + 1000, error="x"))
        assert (await inspector.task_info(asyncq_queue, task_id)).started_at == \
            ms_to_datetime(first)
        [waiting] = await inspector.list_tasks(asyncq_queue, "retry")
        assert waiting.started_at == ms_to_datetime(first)
        clock.advance(2)  # (a layout may keep the due time in whole seconds, rounded up)
        assert await broker.maintenance.forward(asyncq_queue, "retry", 10) == (1, -1)
        second = clock.now_ms()
        raws, _ = await broker.dequeue(asyncq_queue, 1, OWNER, LEASE_MS, WAITER_TTL_MS)
        assert [r.id for r in raws] == [task_id]
        clock.advance(3)
        assert await finish1(broker, Outcome("complete", asyncq_queue, task_id,
                                             retention_ms=60_000))
        done = await inspector.task_info(asyncq_queue, task_id)
    assert done.started_at == ms_to_datetime(second)  # (to the ms: each layout's module)

