"""Every broker's task transitions, through the Broker API: storing (stored, id conflict,
unique duplicate), leasing in order, pausing, finishing (done, complete, retry, archive,
requeue) only under the lease, extending and losing leases, recovering expired ones, results
and completed-task expiry. What each layout writes to Redis for them is its own module's."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from broker_helpers import (
    LEASE_MS,
    OTHER,
    OWNER,
    WAITER_TTL_MS,
    enqueue,
    finish1,
    lease,
    new_task,
)

from asyncq import Client, DuplicateTaskError, FakeClock, Task, TaskIDConflictError
from asyncq._broker import CANCEL_RUNNING, Broker, Outcome, RawTask, UniqueLock

pytestmark = pytest.mark.anyio

ON_CLUSTER = True


# ------------------------------------------------------------------ storing


async def test_store_unique(broker: Broker, clock: FakeClock, asyncq_queue: str) -> None:
    now = clock.now_ms()
    one, two = UniqueLock("t", b"x", None), UniqueLock("t", b"y", None)
    assert await broker.store(new_task(asyncq_queue, "a", now, unique=one,
                                       unique_ttl_ms=20_000)) == 1
    # Same lock, new id: duplicate. Same id, another lock: id conflict, and no lock is taken.
    assert await broker.store(new_task(asyncq_queue, "b", now, unique=one,
                                       unique_ttl_ms=20_000)) == -1
    assert await broker.store(new_task(asyncq_queue, "a", now, unique=two,
                                       unique_ttl_ms=20_000)) == 0


async def test_store_many(broker: Broker, clock: FakeClock, asyncq_queue: str) -> None:
    now = clock.now_ms()
    assert await broker.store_many([]) == []
    codes = await broker.store_many([
        new_task(asyncq_queue, "a", now),
        new_task(asyncq_queue, "b", now, process_at_ms=now + 5_000),
        new_task(asyncq_queue, "a", now),  # duplicate id inside the batch
        new_task(asyncq_queue, "c", now),
    ])
    assert codes == [1, 1, 0, 1]


async def test_task_id_conflict(client: Client, asyncq_queue: str) -> None:
    await client.enqueue("t", queue=asyncq_queue, task_id="fixed")
    with pytest.raises(TaskIDConflictError):
        await client.enqueue("t", queue=asyncq_queue, task_id="fixed")
    with pytest.raises(TaskIDConflictError):
        await client.enqueue("t", queue=asyncq_queue, task_id="fixed",
                             process_in=timedelta(hours=1))


# ------------------------------------------------------------------ leasing


async def test_dequeue_leases_a_batch_in_fifo_order(
    broker: Broker, client: Client, clock: FakeClock, asyncq_queue: str
) -> None:
    ids = [await enqueue(client, asyncq_queue, f"p{i}".encode()) for i in range(5)]
    now = clock.now_ms()

    raws, dropped = await broker.dequeue(asyncq_queue, 3, OWNER, LEASE_MS, WAITER_TTL_MS)
    assert dropped == 0
    assert [r.id for r in raws] == ids[:3]
    first = raws[0]
    assert isinstance(first, RawTask)
    assert first.payload == b"p0"
    assert first.retried == 0
    assert first.pending_since == now  # when it became pending: where its queue wait starts

    raws, dropped = await broker.dequeue(asyncq_queue, 5, OWNER, LEASE_MS, WAITER_TTL_MS)
    assert [r.id for r in raws] == ids[3:]


async def test_dequeue_empty_queue_changes_nothing_but_the_waiters_flag(
    broker: Broker, asyncq_queue: str
) -> None:
    assert await broker.dequeue(asyncq_queue, 4, OWNER, LEASE_MS, WAITER_TTL_MS) == ([], 0)


async def test_a_paused_queue_leases_nothing(broker: Broker, client: Client,
                                             asyncq_queue: str) -> None:
    task_id = await enqueue(client, asyncq_queue)
    assert await broker.pause(asyncq_queue) is True
    assert await broker.pause(asyncq_queue) is False
    assert await broker.dequeue(asyncq_queue, 1, OWNER, LEASE_MS, 1000) == ([], 0)
    assert await broker.unpause(asyncq_queue) is True
    assert await broker.unpause(asyncq_queue) is False
    raws, _ = await broker.dequeue(asyncq_queue, 1, OWNER, LEASE_MS, WAITER_TTL_MS)
    assert [r.id for r in raws] == [task_id]


# ------------------------------------------------------------------ finishing


@pytest.mark.parametrize("kind", ["done", "complete", "retry", "archive", "requeue"])
async def test_finish_by_another_owner_changes_nothing(
    broker: Broker, client: Client, asyncq_queue: str, kind: Any
) -> None:
    [task_id] = await lease(broker, client, asyncq_queue, unique=60)
    outcome = Outcome(kind, asyncq_queue, task_id, retention_ms=1000, retry_at_ms=1,
                      error="e", result=b"r")
    assert await finish1(broker, outcome, owner=OTHER) is False


@pytest.mark.parametrize("kind", ["done", "complete", "retry", "archive", "requeue"])
async def test_finish_of_a_task_that_is_not_active_changes_nothing(
    broker: Broker, client: Client, asyncq_queue: str, kind: Any
) -> None:
    task_id = await enqueue(client, asyncq_queue)  # pending, never leased
    outcome = Outcome(kind, asyncq_queue, task_id, retention_ms=1000, retry_at_ms=1, error="e")
    assert await finish1(broker, outcome) is False
    # And a task that does not exist at all is not created.
    assert await finish1(broker, Outcome(kind, asyncq_queue, "nope", retry_at_ms=1)) is False


async def test_requeue_puts_it_next_in_line(broker: Broker, client: Client,
                                            asyncq_queue: str) -> None:
    [a] = await lease(broker, client, asyncq_queue)
    await client.enqueue("t", queue=asyncq_queue)
    assert await broker.finish([Outcome("requeue", asyncq_queue, a)], OWNER) == [True]
    [raw], _ = await broker.dequeue(asyncq_queue, 1, OWNER, LEASE_MS, 1000)
    assert raw.id == a


async def test_delete_expired_completed(
    broker: Broker, client: Client, clock: FakeClock, asyncq_queue: str
) -> None:
    ids = await lease(broker, client, asyncq_queue, 4)
    retentions = [10_000, 10_000, 10_000, 100_000]
    for task_id, retention in zip(ids, retentions, strict=True):
        assert await finish1(broker, Outcome("complete", asyncq_queue, task_id,
                                             retention_ms=retention))
    assert await broker.maintenance.delete_expired_completed(asyncq_queue, 100) == 0
    clock.advance(10)  # expiry == now counts as expired
    assert await broker.maintenance.delete_expired_completed(asyncq_queue, 2) == 2
    assert await broker.maintenance.delete_expired_completed(asyncq_queue, 2) == 1
    assert await broker.maintenance.delete_expired_completed(asyncq_queue, 2) == 0


async def test_write_result(broker: Broker, client: Client, asyncq_queue: str) -> None:
    [task_id] = await lease(broker, client, asyncq_queue)
    data = bytes(range(256)) * 10
    assert await broker.write_result(asyncq_queue, task_id, data) == len(data)
    assert await broker.write_result(asyncq_queue, task_id, b"") == 0
    # A task that is gone is not recreated as a partial hash.
    assert await broker.write_result(asyncq_queue, "gone", b"data") == -1


# ------------------------------------------------------------------ leases and recovery


async def test_recover_retries_or_archives_an_expired_task(
    broker: Broker, client: Client, clock: FakeClock, asyncq_queue: str
) -> None:
    a, b = await lease(broker, client, asyncq_queue, 2)
    clock.advance(LEASE_MS / 1000 + 60)
    cutoff = clock.now_ms() - 30_000
    expired = await broker.maintenance.list_lease_expired(asyncq_queue, cutoff, 100)
    assert {r.id for r in expired} == {a, b}
    # Recovery works whoever owned the task.
    assert await broker.maintenance.recover(
        Outcome("retry", asyncq_queue, a, retry_at_ms=clock.now_ms(), error="lease expired"),
        cutoff) is True
    assert await broker.maintenance.recover(
        Outcome("archive", asyncq_queue, b, error="lease expired"), cutoff) is True


async def test_recover_does_not_steal_a_renewed_lease(
    broker: Broker, client: Client, clock: FakeClock, asyncq_queue: str
) -> None:
    [task_id] = await lease(broker, client, asyncq_queue)
    clock.advance(LEASE_MS / 1000 + 60)
    cutoff = clock.now_ms() - 30_000
    [raw] = await broker.maintenance.list_lease_expired(asyncq_queue, cutoff, 100)
    # The worker renews its lease between the listing and the recovery.
    assert await broker.extend_leases(asyncq_queue, [raw.id], OWNER, LEASE_MS) == [True]
    for outcome in (Outcome("retry", asyncq_queue, task_id, retry_at_ms=1, error="x"),
                    Outcome("archive", asyncq_queue, task_id, error="x")):
        assert await broker.maintenance.recover(outcome, cutoff) is False


async def test_extend_leases(broker: Broker, client: Client, clock: FakeClock,
                             asyncq_queue: str) -> None:
    mine1, mine2, finished = await lease(broker, client, asyncq_queue, 3)
    [theirs] = await lease(broker, client, asyncq_queue, owner=OTHER)
    assert await finish1(broker, Outcome("done", asyncq_queue, finished)) is True
    clock.advance(5)
    flags = await broker.extend_leases(
        asyncq_queue, [mine1, mine2, theirs, finished, "unknown"], OWNER, LEASE_MS)
    assert flags == [True, True, False, False, False]
    assert await broker.extend_leases(asyncq_queue, [], OWNER, LEASE_MS) == []


async def test_extend_lease_of_a_recovered_task_is_lost(
    broker: Broker, client: Client, clock: FakeClock, asyncq_queue: str
) -> None:
    [task_id] = await lease(broker, client, asyncq_queue)
    clock.advance(LEASE_MS / 1000 + 60)
    assert await broker.maintenance.recover(Outcome("retry", asyncq_queue, task_id, retry_at_ms=1,
                                                    error="x"), clock.now_ms()) is True
    assert await broker.extend_leases(asyncq_queue, [task_id], OWNER, LEASE_MS) == [False]


async def test_list_groups(broker: Broker, client: Client, asyncq_queue: str) -> None:
    assert await broker.aggregation.list_groups(asyncq_queue) == []
    for group in ("b", "a", "c", "a"):
        await client.enqueue("t", queue=asyncq_queue, group=group)
    assert await broker.aggregation.list_groups(asyncq_queue) == ["a", "b", "c"]


async def test_done(broker: Broker, client: Client, asyncq_queue: str) -> None:
    [task_id] = await lease(broker, client, asyncq_queue, unique=60)
    assert await finish1(broker, Outcome("done", asyncq_queue, task_id)) is True
    # Finishing it again finds nothing: no change, no second count.
    assert await finish1(broker, Outcome("done", asyncq_queue, task_id)) is False


async def test_retry(broker: Broker, client: Client, clock: FakeClock,
                     asyncq_queue: str) -> None:
    [task_id] = await lease(broker, client, asyncq_queue, unique=600)
    clock.advance(2)
    now = clock.now_ms()
    assert await finish1(broker, Outcome("retry", asyncq_queue, task_id,
                                         retry_at_ms=now + 60_000, error="boom")) is True
    # It comes back with the retry count it has, and a second failure counts again.
    clock.advance(61)  # (a layout may keep the due time in whole seconds, rounded up)
    assert await broker.maintenance.forward(asyncq_queue, "retry", 100) == (1, -1)
    raws, _ = await broker.dequeue(asyncq_queue, 1, OWNER, LEASE_MS, WAITER_TTL_MS)
    assert [(r.id, r.retried) for r in raws] == [(task_id, 1)]
    assert await finish1(broker, Outcome("retry", asyncq_queue, task_id,
                                         retry_at_ms=clock.now_ms(), error="again")) is True


async def test_finish_many_outcomes_in_one_call(broker: Broker, client: Client,
                                                clock: FakeClock, asyncq_queue: str) -> None:
    a, b, c, d = await lease(broker, client, asyncq_queue, 4)
    other_owner = (await lease(broker, client, asyncq_queue, owner=OTHER))[0]
    now = clock.now_ms()
    results = await broker.finish([
        Outcome("done", asyncq_queue, a),
        Outcome("retry", asyncq_queue, b, retry_at_ms=now + 10, error="e"),
        Outcome("archive", asyncq_queue, c, error="e"),
        Outcome("complete", asyncq_queue, d, retention_ms=50),
        Outcome("done", asyncq_queue, other_owner),  # not ours
    ], OWNER)
    assert results == [True, True, True, True, False]


# ------------------------------------------------------------------ forward


async def test_forward_of_nothing_due(broker: Broker, asyncq_queue: str) -> None:
    assert await broker.maintenance.forward(asyncq_queue, "scheduled", 100) == (0, -1)


async def test_forward_sends_grouped_tasks_to_their_group(
    broker: Broker, client: Client, clock: FakeClock, asyncq_queue: str
) -> None:
    await enqueue(client, asyncq_queue, process_in=10, group="batch")
    await enqueue(client, asyncq_queue, process_in=10)
    clock.advance(15)
    assert await broker.maintenance.forward(asyncq_queue, "scheduled", 100) == (2, -1)
    assert await broker.aggregation.list_groups(asyncq_queue) == ["batch"]


async def test_enqueue_many_mixes_shapes(client: Client, broker: Broker,
                                         asyncq_queue: str) -> None:
    infos = await client.enqueue_many([
        Task("t", b"1", queue=asyncq_queue), Task("t", b"2", queue=asyncq_queue),
        Task("t", b"3", queue=asyncq_queue, process_in=timedelta(hours=1)),
        Task("t", b"4", queue=asyncq_queue, group="g")])
    stored = await broker.read_tasks(asyncq_queue, [i.id for i in infos] + ["nope"])
    assert [s[1] for s in stored if s] == [b"1", b"2", b"3", b"4"]
    assert stored[-1] is None


async def test_a_duplicate_names_the_task_holding_its_lock(client: Client,
                                                            asyncq_queue: str) -> None:
    info = await client.enqueue("t", b"same", queue=asyncq_queue, unique=timedelta(minutes=5))
    with pytest.raises(DuplicateTaskError) as caught:
        await client.enqueue("t", b"same", queue=asyncq_queue, unique=timedelta(minutes=5))
    assert caught.value.task_id == info.id  # the holder, read through the layout's name


# ------------------------------------------------------------------ cancellation


async def test_request_cancel_marks_only_this_run(broker: Broker, client: Client,
                                                  clock: FakeClock, asyncq_queue: str) -> None:
    task = await client.enqueue("t", queue=asyncq_queue)
    [_], _ = await broker.dequeue(asyncq_queue, 1, OWNER, 30_000, 1000)
    assert await broker.request_cancel(asyncq_queue, task.id) == CANCEL_RUNNING
    # the run's lease renewal reports it (a worker that missed the message still stops it)
    assert await broker.extend_leases(asyncq_queue, [task.id], OWNER, 30_000) == [2]
    # a later run of the task is not cancelled by that request
    assert await broker.finish([Outcome("requeue", asyncq_queue, task.id)], OWNER) == [True]
    clock.advance(1)
    [_], _ = await broker.dequeue(asyncq_queue, 1, OWNER, 30_000, 1000)
    assert await broker.extend_leases(asyncq_queue, [task.id], OWNER, 30_000) == [1]


# ------------------------------------------------------------------ recovery by cutoff


async def test_a_run_is_listed_by_the_cutoff(broker: Broker, client: Client, clock: FakeClock,
                                             asyncq_queue: str) -> None:
    def cutoff(clock: FakeClock) -> int:
        return clock.now_ms() - 5_000  # asyncq's recover_grace

    task = await client.enqueue("t", queue=asyncq_queue)
    await broker.dequeue(asyncq_queue, 1, OWNER, 30_000, 1000)
    clock.advance(34)  # its lease ended 4 s ago: not yet past the 5 s grace
    assert await broker.maintenance.list_lease_expired(asyncq_queue, cutoff(clock), 100) == []
    clock.advance(2)
    [raw] = await broker.maintenance.list_lease_expired(asyncq_queue, cutoff(clock), 100)
    assert raw.id == task.id and raw.msg.id == task.id
    # renewed meanwhile: recovering it fails, nothing written
    assert await broker.extend_leases(asyncq_queue, [task.id], OWNER, 30_000) == [1]
    lost = Outcome("retry", asyncq_queue, task.id, retry_at_ms=clock.now_ms(), error="e")
    assert await broker.maintenance.recover(lost, cutoff(clock)) is False
