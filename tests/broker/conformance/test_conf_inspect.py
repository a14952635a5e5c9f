"""What every broker's inspection reads and changes (the Inspector over ``broker.inspect``):
counts by state, listing and finding tasks, one task's record, groups, changing a task's
payload, running, archiving and deleting tasks one by one or by state, recovering a stranded
task, removing the queue; the backlog a worker reads and the minute samples of the charts."""

from __future__ import annotations

import time
from datetime import timedelta

import pytest

from asyncq import Client, FakeClock, Inspector
from asyncq._broker import Broker, Outcome

pytestmark = pytest.mark.anyio

ON_CLUSTER = True

OWNER = "srv-c"
LEASE_MS = 30_000


async def drive_inspection(broker: Broker, client: Client, q: str) -> None:
    """Every inspection read and change once, on queue ``q`` (also run under the cluster's
    slot check of asynq's scripts: tests/broker/asynq/test_inspect_cluster.py)."""
    ins = Inspector(broker)
    ids = [(await client.enqueue("t", {"i": i}, queue=q)).id for i in range(4)]
    later = await client.enqueue("t", b"x", queue=q, process_in=timedelta(hours=1))
    await client.enqueue("t", queue=q, group="g1")
    leased, _ = await broker.dequeue(q, 1, OWNER, 30_000, 1000)
    assert [t.id for t in leased] == ids[:1]

    info = await ins.queue_info(q)
    assert (info.pending, info.active, info.scheduled, info.aggregating) == (3, 1, 1, 1)
    assert len(await ins.list_tasks(q, "pending")) == 3
    assert (await ins.find_tasks(q, "pending", task_type="t")).scanned == 3
    assert (await ins.task_info(q, later.id)).state.value == "scheduled"
    assert [g.group for g in await ins.groups(q)] == ["g1"]
    await ins.update_task_payload(q, later.id, b"y")
    await ins.run_task(q, later.id)
    await ins.archive_task(q, ids[1])
    await ins.delete_task(q, ids[2])
    assert await ins.archive_all(q, "pending") == 2
    assert await ins.run_all(q, "archived") == 3
    assert await ins.delete_all(q, "pending") == 3
    assert await broker.maintenance.record_minute(q)
    assert (await broker.maintenance.backlog(q, 0)).groups == 1
    assert await broker.inspect.recover_task(
        Outcome("retry", q, ids[0], retry_at_ms=0, error="gone"), OWNER, "")
    await ins.delete_all(q, "retry")
    await ins.delete_queue(q, force=True)
    assert q not in await ins.queues()


async def test_inspection_reads_and_changes_every_state(broker: Broker, client: Client,
                                                        asyncq_queue: str) -> None:
    await drive_inspection(broker, client, asyncq_queue)


async def test_backlog_and_minute_samples(broker: Broker, client: Client,
                                          clock: FakeClock, asyncq_queue: str) -> None:
    q = asyncq_queue
    await client.enqueue("t", queue=q)
    await client.enqueue("t", queue=q, process_in=timedelta(seconds=30))
    await client.enqueue("t", queue=q, process_in=timedelta(hours=1))
    await client.enqueue("t", queue=q, group="g")
    b = await broker.maintenance.backlog(q, clock.now_ms() + 60_000)
    assert (b.pending, b.due, b.groups, b.paused) == (1, 1, 1, False)
    assert await broker.maintenance.record_minute(q) is True
    assert await broker.maintenance.record_minute(q) is False  # one sample per minute
    clock.advance(60)
    assert await broker.maintenance.record_minute(q) is True
    samples = await broker.inspect.minute_samples(q)
    minute = clock.now_ms() // 60_000
    assert samples == [(minute, 0, 0, 3), (minute - 1, 0, 0, 3)]


async def test_remove_queue_and_register_it_again(broker: Broker, client: Client,
                                                  clock: FakeClock, asyncq_queue: str) -> None:
    q = asyncq_queue
    info = await client.enqueue("t", queue=q)
    await broker.maintenance.record_minute(q)
    day = time.strftime("%Y-%m-%d", time.gmtime(clock.now_ms() // 1000))
    ops = broker.inspect
    assert await ops.remove_queue(q, "check", [day]) == (-2, 0, 1)
    assert await ops.delete_task(q, info.id) == 1
    assert await ops.remove_queue(q, "remove", [day]) == (1, 0, 0)
    await ops.unregister_queue(q)
    # the broker forgot it had registered the queue: the next task registers it again
    await client.enqueue("t", queue=q)
    assert q in await ops.queue_names()


async def test_recover_a_stranded_task(broker: Broker, client: Client, clock: FakeClock,
                                       asyncq_queue: str) -> None:
    q = asyncq_queue
    info = await client.enqueue("t", queue=q)
    await broker.dequeue(q, 1, OWNER, LEASE_MS, 1000)
    ops = broker.inspect
    assert await ops.task_owner(q, info.id) == OWNER
    now = clock.now_ms()
    out = Outcome("retry", q, info.id, retry_at_ms=now, error="recovered")
    assert not await ops.recover_task(out, "", now)  # its lease is live
    assert not await ops.recover_task(out, "someone-else", "")
    clock.advance(LEASE_MS / 1000 + 1)
    assert await ops.recover_task(out, "", clock.now_ms())
