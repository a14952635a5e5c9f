"""Schedules and limits on every broker: a Scheduler firing each store shape (pending,
scheduled, grouped) and publishing its entries; a concurrency limit claimed (one task
deferred), read and given back; a cap set on a queue at run time, read by the next claim.
(Also driven under the cluster's slot check of asynq's scripts.)"""

from __future__ import annotations

from datetime import timedelta

import pytest

from asyncq import Client, FakeClock, Inspector, Scheduler, Task, TaskState
from asyncq._broker import Broker
from asyncq._broker._limit_values import LimitClaim, LimitHold, LimitSpec
from asyncq._scheduler import list_scheduler_entries

pytestmark = pytest.mark.anyio

ON_CLUSTER = True

OWNER = "srv-c"


async def drive_schedules(broker: Broker, q: str) -> None:
    """A Scheduler firing each store shape (claim and task in one script), publishing its
    entries and history."""
    clock = FakeClock()
    scheduler = Scheduler(broker=broker, clock=clock)
    scheduler.register("@every 1s", "cron", queue=q)
    scheduler.register("@every 1s", "cron-later", queue=q, process_in=timedelta(hours=1))
    scheduler.register("@every 1s", "cron-grouped", queue=q, group="g2")
    clock.advance(1)
    assert len(await scheduler.tick()) == 3
    await scheduler.heartbeat.beat()
    assert len([e for e in await list_scheduler_entries(broker)
                if e.scheduler_id == scheduler.id]) == 3
    await scheduler.heartbeat.clear()
    await scheduler.close()


async def drive_limits(broker: Broker, client: Client, q: str) -> None:
    """A limit claimed (one task deferred), read and given back; a cap set on the queue."""
    await client.enqueue_many([Task("lim", queue=q) for _ in range(2)])
    leased, _ = await broker.dequeue(q, 2, OWNER, 30_000, 1000)
    spec = LimitSpec("concurrency", "lim", 1)
    taken = await broker.limits.acquire(q, OWNER, [LimitClaim(t.id, [(spec, "")])
                                                    for t in leased])
    assert taken[0] == 0 and taken[1] > 0
    assert [(u.in_use, u.waiting) for u in await broker.limits.usage(q)] == [(1, 1)]
    assert await broker.limits.release(q, OWNER, [LimitHold(leased[0].id, spec, "")]) == 1
    # a value set at run time: a cap on the queue (asynq_limit_set), read by the next claim
    cap = LimitSpec("queue", "", 0)
    assert await broker.limits.set_value(q, cap, cap._replace(n=1)) == ("", "", 0)
    assert await broker.limits.acquire(q, OWNER, [LimitClaim(leased[1].id, [])],
                                       queue_cap=True) == [-1]  # woken: no longer active
    first = (await broker.limits.usage(q))[0]
    assert (first.kind, first.limit) == ("queue", 1)


async def test_a_scheduler_fires_each_store_shape_and_publishes_its_entries(
        broker: Broker, asyncq_queue: str) -> None:
    await drive_schedules(broker, asyncq_queue)


async def test_a_limit_is_claimed_read_and_given_back_and_a_cap_set_at_run_time(
        broker: Broker, client: Client, asyncq_queue: str) -> None:
    await drive_limits(broker, client, asyncq_queue)


async def test_a_task_a_full_concurrency_limit_put_back_reads_as_waiting_for_a_slot(
        broker: Broker, client: Client, asyncq_queue: str) -> None:
    """Deferred by the queue's concurrency limit, a task is scheduled but waiting for a slot
    (it starts as soon as one frees), naming the limit, in its info and in its list row; a
    task scheduled by its producer is not."""
    q = asyncq_queue
    later = await client.enqueue("lim", queue=q, process_in=600)
    await client.enqueue_many([Task("lim", queue=q) for _ in range(2)])
    leased, _ = await broker.dequeue(q, 2, OWNER, 30_000, 1000)
    cap = LimitSpec("queue", "", 0)
    await broker.limits.set_value(q, cap, cap._replace(n=1))
    taken = await broker.limits.acquire(q, OWNER, [LimitClaim(leased[0].id, []),
                                                   LimitClaim(leased[1].id, [])],
                                        queue_cap=True)
    assert taken[0] in (0, 1) and taken[1] > 1  # the second deferred by the queue's limit
    async with Inspector(broker) as inspector:
        held = await inspector.task_info(q, leased[1].id)
        rows = {t.id: t for t in await inspector.list_tasks(q, "scheduled")}
        plain = await inspector.task_info(q, later.id)
    assert held.state is TaskState.SCHEDULED
    for got in (held, rows[leased[1].id]):
        assert (got.waiting_for_slot, got.limited_by) == (True, ("queue concurrency limit",))
    assert (plain.waiting_for_slot, plain.limited_by) == (False, ())
