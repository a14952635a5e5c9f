"""Task expiry in the scripts (``expires_in``/``expires_at``): a task not started by its expiry
is archived unrun by the script that would start it or bring it nearer its start — dequeue,
forward, retry, aggregation_check, the one-hop hand-off — with a reason saying "expired" and
when, an event and a count; nothing else changes for a task without an expiry."""

from __future__ import annotations

from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta
from typing import TypeVar

import anyio
import pytest
from broker_helpers import LEASE_MS, OWNER, WAITER_TTL_MS, finish1
from redis.asyncio import Redis

from asyncq import Client, FakeClock, Inspector, Task, TaskEvent, TaskState, chain
from asyncq._broker import Outcome, RedisBroker
from asyncq._broker import _keys as K
from asyncq._broker._messages import Handoff, QueueWake
from asyncq._model._rules import expired_reason, iso_ms
from asyncq._workflow._advance import Advancer
from tests.helpers.dataplane import lmembers, ms, task_hash, zmembers

pytestmark = pytest.mark.anyio

T = TypeVar("T")


async def next_item(items: AsyncIterator[T], timeout: float = 5.0) -> T:
    with anyio.fail_after(timeout):
        return await anext(items)


async def counters(redis: Redis, queue: str) -> tuple[int, int, int]:
    """(expired, processed, failed) all-time counters of ``queue``."""
    qk = K.queue_keys(queue)
    values = await redis.mget(qk.expired, qk.processed, qk.failed)
    return tuple(int(v or 0) for v in values)  # type: ignore[return-value]


async def assert_expired(redis: Redis, queue: str, task_id: str, now: int,
                         reason: str) -> None:
    fields = await task_hash(redis, queue, task_id)
    qk = K.queue_keys(queue)
    assert fields["state"] == b"archived"
    assert fields["error"].decode() == reason
    assert int(fields["failed_at"]) == now
    assert "owner" not in fields and "pending_since" not in fields
    assert (await zmembers(redis, qk.archived))[task_id] == now
    assert task_id not in await lmembers(redis, qk.pending)
    assert task_id not in await lmembers(redis, qk.active)
    assert await redis.zscore(qk.lease, task_id) is None


async def test_dequeue_archives_an_expired_pending_task_and_leases_the_next(
    broker: RedisBroker, client: Client, clock: FakeClock, redis_client: Redis,
    asyncq_queue: str,
) -> None:
    events = broker.listen_events([asyncq_queue])
    try:
        assert callable(await next_item(events))  # subscribed
        await broker.set_listening([asyncq_queue], 10_000)
        old = await client.enqueue("t", b"old", queue=asyncq_queue, expires_in=10)
        fresh = await client.enqueue("t", b"fresh", queue=asyncq_queue)
        assert old.expires_at == old.enqueued_at + timedelta(seconds=10)  # type: ignore[operator]
        assert fresh.expires_at is None
        for _ in range(2):
            assert isinstance(await next_item(events), TaskEvent)  # the two enqueues
        clock.advance(10)  # the expiry itself: not started by then
        raws, dropped = await broker.dequeue(asyncq_queue, 2, OWNER, LEASE_MS, WAITER_TTL_MS)
        assert [r.id for r in raws] == [fresh.id] and dropped == 0
        now = clock.now_ms()
        assert old.expires_at is not None
        reason = expired_reason(ms(old.expires_at))
        assert reason.startswith("expired: not started by its expiry at ")
        await assert_expired(redis_client, asyncq_queue, old.id, now, reason)
        assert await counters(redis_client, asyncq_queue) == (1, 0, 0)  # never ran
        event = await next_item(events)
        assert isinstance(event, TaskEvent)
        assert (event.id, event.previous, event.state) == (old.id, TaskState.PENDING,
                                                           TaskState.ARCHIVED)
        assert (event.reason, event.last_error) == ("expired", reason)
    finally:
        await events.aclose()  # type: ignore[attr-defined]
    inspector = Inspector(broker)
    info = await inspector.task_info(asyncq_queue, old.id)
    assert (info.state, info.last_error, info.expires_at) == (
        TaskState.ARCHIVED, reason, old.expires_at)
    assert (await inspector.queue_info(asyncq_queue)).expired_total == 1


async def test_a_task_dequeued_a_millisecond_before_its_expiry_is_leased(
    broker: RedisBroker, client: Client, clock: FakeClock, asyncq_queue: str,
) -> None:
    info = await client.enqueue("t", queue=asyncq_queue, expires_in=timedelta(seconds=10))
    clock.advance(9.999)
    raws, _ = await broker.dequeue(asyncq_queue, 1, OWNER, LEASE_MS, WAITER_TTL_MS)
    assert [r.id for r in raws] == [info.id]


@pytest.mark.parametrize("when", [
    datetime(1999, 12, 31, 23, 59, 59, 999_000, tzinfo=UTC),
    datetime(2000, 2, 29, 12, 0, 0, 1000, tzinfo=UTC),
    datetime(2024, 3, 1, 0, 0, tzinfo=UTC),
    datetime(2100, 2, 28, 23, 0, 0, 50_000, tzinfo=UTC),
    datetime(2400, 12, 31, 7, 8, 9, 10_000, tzinfo=UTC),
])
async def test_the_script_writes_the_expiry_time_as_the_worker_does(
    broker: RedisBroker, client: Client, clock: FakeClock, redis_client: Redis,
    asyncq_queue: str, when: datetime,
) -> None:
    clock.set(when - timedelta(seconds=1))
    info = await client.enqueue("t", queue=asyncq_queue, expires_at=when)
    clock.set(when)
    assert await broker.dequeue(asyncq_queue, 1, OWNER, LEASE_MS, WAITER_TTL_MS) == ([], 0)
    fields = await task_hash(redis_client, asyncq_queue, info.id)
    assert fields["error"].decode() == expired_reason(ms(when)) == (
        "expired: not started by its expiry at "
        + when.strftime("%Y-%m-%dT%H:%M:%S.") + f"{when.microsecond // 1000:03d}Z")


async def test_expires_in_a_header_or_a_string_is_not_an_expiry(
    broker: RedisBroker, client: Client, clock: FakeClock, asyncq_queue: str,
) -> None:
    """The scripts find the message's own "expires" member, never text that looks like it."""
    info = await client.enqueue(Task("t", {"expires": 1, "x": '"expires":1'}, queue=asyncq_queue,
                                     headers={"expires": "1", "y": '"expires":1,'}))
    clock.advance(3600)
    raws, _ = await broker.dequeue(asyncq_queue, 1, OWNER, LEASE_MS, WAITER_TTL_MS)
    assert [r.id for r in raws] == [info.id]


async def test_dequeue_archives_at_most_its_budget_then_wakes_the_worker(
    broker: RedisBroker, client: Client, clock: FakeClock, redis_client: Redis,
    asyncq_queue: str, monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A backlog of expired tasks never blocks Redis for long: one call archives a bounded
    number, then publishes a wake-up so the worker comes back at once."""
    import asyncq._broker._redis as broker_module
    monkeypatch.setattr(broker_module, "EXPIRED_PER_DEQUEUE", 2)
    ids = [(await client.enqueue("t", queue=asyncq_queue, expires_in=1)).id for _ in range(3)]
    fresh = await client.enqueue("t", queue=asyncq_queue)
    clock.advance(2)
    signals = broker.listen_signals([asyncq_queue])
    try:
        assert await next_item(signals) is None  # subscribed
        assert await broker.dequeue(asyncq_queue, 4, OWNER, LEASE_MS, WAITER_TTL_MS) == ([], 0)
        assert await next_item(signals) == QueueWake(asyncq_queue)
        assert await counters(redis_client, asyncq_queue) == (2, 0, 0)
        raws, _ = await broker.dequeue(asyncq_queue, 4, OWNER, LEASE_MS, WAITER_TTL_MS)
        assert [r.id for r in raws] == [fresh.id]
    finally:
        await signals.aclose()  # type: ignore[attr-defined]
    qk = K.queue_keys(asyncq_queue)
    assert set(await zmembers(redis_client, qk.archived)) == set(ids)


async def test_forward_archives_a_due_task_that_expired_while_it_waited(
    broker: RedisBroker, client: Client, clock: FakeClock, redis_client: Redis,
    asyncq_queue: str,
) -> None:
    """Due at +5 s, expiring at +10 s, forwarded late (no worker ran in between)."""
    late = await client.enqueue("t", queue=asyncq_queue, process_in=5, expires_in=10)
    on_time = await client.enqueue("t", queue=asyncq_queue, process_in=5, expires_in=60)
    assert late.state is TaskState.SCHEDULED
    clock.advance(10)
    assert await broker.maintenance.forward(asyncq_queue, "scheduled", 100) == (2, -1)
    qk = K.queue_keys(asyncq_queue)
    assert late.expires_at is not None
    await assert_expired(redis_client, asyncq_queue, late.id, clock.now_ms(),
                         expired_reason(ms(late.expires_at)))
    assert await lmembers(redis_client, qk.pending) == [on_time.id]
    assert await redis_client.zcard(qk.scheduled) == 0
    assert await counters(redis_client, asyncq_queue) == (1, 0, 0)


async def test_a_retry_that_would_come_after_the_expiry_archives_instead(
    broker: RedisBroker, client: Client, clock: FakeClock, redis_client: Redis,
    asyncq_queue: str,
) -> None:
    soon = await client.enqueue("t", queue=asyncq_queue, expires_in=60)
    later = await client.enqueue("t", queue=asyncq_queue, expires_in=600)
    raws, _ = await broker.dequeue(asyncq_queue, 2, OWNER, LEASE_MS, WAITER_TTL_MS)
    assert len(raws) == 2
    now = clock.now_ms()
    retry_at = now + 120_000  # after soon's expiry, before later's
    for info in (soon, later):
        assert await finish1(broker, Outcome("retry", asyncq_queue, info.id,
                                             retry_at_ms=retry_at, error="boom",
                                             traceback="Traceback: boom"))
    qk = K.queue_keys(asyncq_queue)
    assert await zmembers(redis_client, qk.retry) == {later.id: retry_at}
    assert soon.expires_at is not None
    reason = (f"expired: its retry at {iso_ms(retry_at)} would come after its expiry at "
              f"{iso_ms(ms(soon.expires_at))}; last error: boom")
    await assert_expired(redis_client, asyncq_queue, soon.id, now, reason)
    fields = await task_hash(redis_client, asyncq_queue, soon.id)
    assert fields["traceback"] == b"Traceback: boom"
    assert fields.get("retried", b"0") == b"0"  # as archived: the failed run is counted, no retry
    # Both failed runs count as runs; only one task expired.
    assert await counters(redis_client, asyncq_queue) == (1, 2, 2)


async def test_a_retry_after_the_expiry_the_worker_applies_archives_too(
    broker: RedisBroker, client: Client, clock: FakeClock, redis_client: Redis,
    asyncq_queue: str,
) -> None:
    """A handler's default expiry is not in the message: the worker passes it with the
    retry (``Outcome.expires_at_ms``)."""
    info = await client.enqueue("t", queue=asyncq_queue)
    await broker.dequeue(asyncq_queue, 1, OWNER, LEASE_MS, WAITER_TTL_MS)
    now = clock.now_ms()
    assert await finish1(broker, Outcome("retry", asyncq_queue, info.id, retry_at_ms=now + 20_000,
                                         error="boom", expires_at_ms=now + 10_000))
    fields = await task_hash(redis_client, asyncq_queue, info.id)
    assert fields["state"] == b"archived" and fields["error"].startswith(b"expired: its retry")


async def test_a_recovered_lease_whose_retry_comes_after_the_expiry_archives(
    broker: RedisBroker, client: Client, clock: FakeClock, redis_client: Redis,
    asyncq_queue: str,
) -> None:
    info = await client.enqueue("t", queue=asyncq_queue, expires_in=40)
    await broker.dequeue(asyncq_queue, 1, OWNER, LEASE_MS, WAITER_TTL_MS)
    clock.advance(LEASE_MS / 1000 + 1)  # the lease ran out: its worker is gone
    now = clock.now_ms()
    outcome = Outcome("retry", asyncq_queue, info.id, retry_at_ms=now + 15_000,
                      error="LeaseExpiredError: task lease expired")
    assert await broker.maintenance.recover(outcome, now)
    fields = await task_hash(redis_client, asyncq_queue, info.id)
    assert fields["state"] == b"archived" and fields["error"].startswith(b"expired: its retry")


async def test_a_group_flushed_after_a_members_expiry_archives_that_member(
    broker: RedisBroker, client: Client, clock: FakeClock, redis_client: Redis,
    asyncq_queue: str,
) -> None:
    qk = K.queue_keys(asyncq_queue)
    kept = await client.enqueue("t", b"a", queue=asyncq_queue, group="g")
    gone = await client.enqueue("t", b"b", queue=asyncq_queue, group="g", expires_in=5)
    kept2 = await client.enqueue("t", b"c", queue=asyncq_queue, group="g", expires_in=600)
    clock.advance(60)
    assert await broker.aggregation.check(asyncq_queue, "g", "s1", 30_000, 0, 0,
                                          clock.now_ms() + 120_000) == 2
    assert {r.id for r in await broker.aggregation.read_set(asyncq_queue, "g", "s1")} == {
        kept.id, kept2.id}
    assert gone.expires_at is not None
    await assert_expired(redis_client, asyncq_queue, gone.id, clock.now_ms(),
                         expired_reason(ms(gone.expires_at)))
    # A group whose every member expired makes no set at all.
    alone = await client.enqueue("t", queue=asyncq_queue, group="h", expires_in=1)
    clock.advance(60)
    assert await broker.aggregation.check(asyncq_queue, "h", "s2", 30_000, 0, 0,
                                          clock.now_ms() + 120_000) == 0
    assert (await task_hash(redis_client, asyncq_queue, alone.id))["state"] == b"archived"
    assert await redis_client.exists(qk.group("h"), qk.aggregation_set("h", "s2")) == 0
    assert "h" not in {m.decode() for m in await redis_client.smembers(qk.groups)}
    assert set(await zmembers(redis_client, qk.aggregation_sets)) == {
        qk.aggregation_set("g", "s1")}


async def test_the_expire_outcome_archives_a_leased_task_unrun(
    broker: RedisBroker, client: Client, clock: FakeClock, redis_client: Redis,
    asyncq_queue: str,
) -> None:
    """What the worker writes when it finds a task expired as it starts it (a handler's
    default, or a wait in its prefetch buffer)."""
    info = await client.enqueue("t", queue=asyncq_queue)
    await broker.dequeue(asyncq_queue, 1, OWNER, LEASE_MS, WAITER_TTL_MS)
    reason = expired_reason(clock.now_ms() - 1)
    outcome = Outcome("expire", asyncq_queue, info.id, error=reason)
    assert not await finish1(broker, outcome, owner="someone-else")
    assert await finish1(broker, outcome)
    await assert_expired(redis_client, asyncq_queue, info.id, clock.now_ms(), reason)
    assert await counters(redis_client, asyncq_queue) == (1, 0, 0)


async def test_the_one_hop_hand_off_leaves_an_expired_task_to_the_dequeue(
    broker: RedisBroker, client: Client, clock: FakeClock, redis_client: Redis,
    asyncq_queue: str,
) -> None:
    """An idle worker is handed the next pending task in the enqueue script; an expired one
    is not handed off (the hand-off reads the server's clock): the worker is woken instead
    and its dequeue archives it."""
    handoffs = broker.listen_handoffs([asyncq_queue], OWNER)
    signals = broker.listen_signals([asyncq_queue])
    qk = K.queue_keys(asyncq_queue)
    try:
        assert await next_item(handoffs) is None and await next_item(signals) is None
        assert await broker.dequeue(asyncq_queue, 1, OWNER, LEASE_MS, WAITER_TTL_MS,
                                    one_hop=True) == ([], 0)  # idle: registered
        fresh = await client.enqueue("t", queue=asyncq_queue, expires_in=600)
        handed = await next_item(handoffs)
        assert isinstance(handed, Handoff) and handed.task.id == fresh.id
        assert await broker.dequeue(asyncq_queue, 1, OWNER, LEASE_MS, WAITER_TTL_MS,
                                    one_hop=True) == ([], 0)  # idle again
        clock.advance(-3600)  # this producer's expiry lies an hour behind the server's now
        stale = await client.enqueue("t", queue=asyncq_queue, expires_in=600)
        assert await next_item(signals) == QueueWake(asyncq_queue)  # woken, not handed
        assert (await task_hash(redis_client, asyncq_queue, stale.id))["state"] == b"pending"
        clock.advance(3600)
        assert await broker.dequeue(asyncq_queue, 1, OWNER, LEASE_MS, WAITER_TTL_MS,
                                    one_hop=True) == ([], 0)
    finally:
        await handoffs.aclose()  # type: ignore[attr-defined]
        await signals.aclose()  # type: ignore[attr-defined]
    assert (await task_hash(redis_client, asyncq_queue, stale.id))["state"] == b"archived"
    assert await lmembers(redis_client, qk.pending) == []


async def test_a_workflow_step_that_expired_before_it_started_fails_its_workflow(
    broker: RedisBroker, client: Client, clock: FakeClock, asyncq_queue: str,
) -> None:
    """Its expiry counts from the workflow's start; the step is archived when released late,
    and the workflow is told it failed."""
    advancer = Advancer(broker, [asyncq_queue], OWNER)
    flow = chain(Task("first", queue=asyncq_queue),
                 Task("second", queue=asyncq_queue, expires_in=30))
    handle = await client.enqueue_workflow(flow)
    [first], _ = await broker.dequeue(asyncq_queue, 1, OWNER, LEASE_MS, WAITER_TTL_MS)
    clock.advance(60)  # the first step took a minute
    assert await finish1(broker, Outcome("done", asyncq_queue, first.id))
    await advancer.drain(asyncq_queue)
    assert await broker.dequeue(asyncq_queue, 1, OWNER, LEASE_MS, WAITER_TTL_MS) == ([], 0)
    await advancer.drain(asyncq_queue)
    final = await client.wait(handle, timeout=30)
    assert final.state is TaskState.ARCHIVED
    assert final.last_error is not None and "expired" in final.last_error


async def test_removing_the_queue_removes_its_expired_count(
    broker: RedisBroker, client: Client, clock: FakeClock, redis_client: Redis,
    asyncq_queue: str,
) -> None:
    await client.enqueue("t", queue=asyncq_queue, expires_in=1)
    clock.advance(2)
    await broker.dequeue(asyncq_queue, 1, OWNER, LEASE_MS, WAITER_TTL_MS)
    qk = K.queue_keys(asyncq_queue)
    assert await redis_client.get(qk.expired) == b"1"
    inspector = Inspector(broker)
    await inspector.delete_all(asyncq_queue, TaskState.ARCHIVED)
    await inspector.delete_queue(asyncq_queue)
    assert await redis_client.exists(qk.expired) == 0


async def test_expired_tasks_keep_the_archive_within_its_caps(
    broker: RedisBroker, client: Client, clock: FakeClock, redis_client: Redis,
    asyncq_queue: str,
) -> None:
    ids = [(await client.enqueue("t", queue=asyncq_queue, expires_in=1)).id for _ in range(5)]
    await Inspector(broker).set_archive_limits(asyncq_queue, max_size=2)
    clock.advance(2)
    assert await broker.dequeue(asyncq_queue, 5, OWNER, LEASE_MS, WAITER_TTL_MS) == ([], 0)
    qk = K.queue_keys(asyncq_queue)
    kept = set(await zmembers(redis_client, qk.archived))
    assert len(kept) == 2 and kept < set(ids)
    for gone in set(ids) - kept:  # trimmed: their records are deleted, as archive.lua trims
        assert await task_hash(redis_client, asyncq_queue, gone) == {}
    assert await counters(redis_client, asyncq_queue) == (5, 0, 0)
