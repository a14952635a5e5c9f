"""RedisBroker.finish: done and completed outcomes, and the expiry of completed tasks
(items 84-87, 95)."""

from __future__ import annotations

from typing import Any

import pytest
from broker_helpers import (
    INT64_MAX,
    LEASE_MS,
    OTHER,
    OWNER,
    WAITER_TTL_MS,
    assert_daily_counter,
    enqueue,
    finish1,
    lease,
)
from redis.asyncio import Redis

from asyncq import Client, FakeClock
from asyncq._broker import Outcome, RedisBroker
from asyncq._broker import _keys as K
from tests.helpers.dataplane import (
    lmembers,
    next_event,
    task_hash,
    zmembers,
)

pytestmark = pytest.mark.anyio


# ------------------------------------------------------------------ 84-87: finishing


async def test_done(
    broker: RedisBroker, client: Client, clock: FakeClock, redis_client: Redis,
    asyncq_queue: str
) -> None:
    [task_id] = await lease(broker, client, asyncq_queue, unique=60)
    qk = K.queue_keys(asyncq_queue)
    lock = qk.unique("t", b"p0")
    assert await redis_client.get(lock) == task_id.encode()

    assert await finish1(broker, Outcome("done", asyncq_queue, task_id)) is True
    assert await task_hash(redis_client, asyncq_queue, task_id) == {}
    assert await redis_client.llen(qk.active) == 0
    assert await zmembers(redis_client, qk.lease) == {}
    assert await redis_client.exists(lock) == 0  # the lock is released on success
    day = K.day_string(clock.now_ms())
    assert await redis_client.get(qk.processed) == b"1"
    await assert_daily_counter(redis_client, qk.processed_day(day), 1, clock.now_ms())
    assert await redis_client.exists(qk.failed, qk.failed_day(day)) == 0
    # Finishing it again finds nothing: no change, no second count (False: conformance/).
    await finish1(broker, Outcome("done", asyncq_queue, task_id))
    assert await redis_client.get(qk.processed) == b"1"


async def test_done_keeps_a_lock_another_task_owns(
    broker: RedisBroker, client: Client, redis_client: Redis, asyncq_queue: str
) -> None:
    [task_id] = await lease(broker, client, asyncq_queue, unique=60)
    lock = K.queue_keys(asyncq_queue).unique("t", b"p0")
    await redis_client.set(lock, "someone-else")
    assert await finish1(broker, Outcome("done", asyncq_queue, task_id)) is True
    assert await redis_client.get(lock) == b"someone-else"


async def test_processed_total_wraps_to_one_at_int64_max(
    broker: RedisBroker, client: Client, redis_client: Redis, asyncq_queue: str
) -> None:
    a, b = await lease(broker, client, asyncq_queue, 2)
    qk = K.queue_keys(asyncq_queue)
    await redis_client.set(qk.processed, INT64_MAX)
    await redis_client.set(qk.failed, INT64_MAX)
    assert await finish1(broker, Outcome("done", asyncq_queue, a)) is True
    assert await redis_client.get(qk.processed) == b"1"
    assert await finish1(broker, Outcome("retry", asyncq_queue, b, retry_at_ms=1,
                                         error="e")) is True
    assert await redis_client.get(qk.processed) == b"2"
    assert await redis_client.get(qk.failed) == b"1"


@pytest.mark.parametrize("kind", ["done", "complete", "retry", "archive", "requeue"])
async def test_finish_by_another_owner_changes_nothing(
    broker: RedisBroker, client: Client, redis_client: Redis, asyncq_queue: str, kind: Any
) -> None:
    [task_id] = await lease(broker, client, asyncq_queue, unique=60)
    qk = K.queue_keys(asyncq_queue)
    before_hash = await task_hash(redis_client, asyncq_queue, task_id)
    before_lease = await zmembers(redis_client, qk.lease)
    outcome = Outcome(kind, asyncq_queue, task_id, retention_ms=1000, retry_at_ms=1,
                      error="e", result=b"r")
    await finish1(broker, outcome, owner=OTHER)  # (False: conformance/)
    assert await task_hash(redis_client, asyncq_queue, task_id) == before_hash
    assert await zmembers(redis_client, qk.lease) == before_lease
    assert await lmembers(redis_client, qk.active) == [task_id]
    assert await redis_client.llen(qk.pending) == 0
    assert await redis_client.exists(qk.processed, qk.failed, qk.completed, qk.retry,
                                     qk.archived) == 0
    assert await redis_client.exists(qk.unique("t", b"p0")) == 1


@pytest.mark.parametrize("kind", ["done", "complete", "retry", "archive", "requeue"])
async def test_finish_of_a_task_that_is_not_active_changes_nothing(
    broker: RedisBroker, client: Client, redis_client: Redis, asyncq_queue: str, kind: Any
) -> None:
    task_id = await enqueue(client, asyncq_queue)  # pending, never leased
    before = await task_hash(redis_client, asyncq_queue, task_id)
    outcome = Outcome(kind, asyncq_queue, task_id, retention_ms=1000, retry_at_ms=1, error="e")
    await finish1(broker, outcome)  # (False: conformance/)
    assert await task_hash(redis_client, asyncq_queue, task_id) == before
    assert await lmembers(redis_client, K.queue_keys(asyncq_queue).pending) == [task_id]
    # And a task that does not exist at all is not created.
    await finish1(broker, Outcome(kind, asyncq_queue, "nope", retry_at_ms=1))
    assert await task_hash(redis_client, asyncq_queue, "nope") == {}


async def test_mark_complete(
    broker: RedisBroker, client: Client, clock: FakeClock, redis_client: Redis,
    asyncq_queue: str
) -> None:
    a, b = await lease(broker, client, asyncq_queue, 2, unique=60, retention=3600)
    clock.advance(5)
    now = clock.now_ms()
    qk = K.queue_keys(asyncq_queue)
    msg_before = (await task_hash(redis_client, asyncq_queue, a))["msg"]

    assert await finish1(broker, Outcome("complete", asyncq_queue, a, retention_ms=3_600_000,
                                         result=b"\x00result")) is True
    fields = await task_hash(redis_client, asyncq_queue, a)
    assert fields["state"] == b"completed"
    assert fields["completed_at"] == str(now).encode()
    assert fields["result"] == b"\x00result"
    assert fields["msg"] == msg_before
    assert "owner" not in fields
    assert await zmembers(redis_client, qk.completed) == {a: now + 3_600_000}
    assert await lmembers(redis_client, qk.active) == [b]
    assert set(await zmembers(redis_client, qk.lease)) == {b}
    assert await redis_client.exists(qk.unique("t", b"p0")) == 0
    assert await redis_client.exists(qk.unique("t", b"p1")) == 1
    assert await redis_client.get(qk.processed) == b"1"
    await assert_daily_counter(redis_client, qk.processed_day(K.day_string(now)), 1, now)
    assert await redis_client.exists(qk.failed) == 0

    # Without a result no result field is written.
    assert await finish1(broker, Outcome("complete", asyncq_queue, b,
                                         retention_ms=1000)) is True
    assert "result" not in await task_hash(redis_client, asyncq_queue, b)
    assert (await zmembers(redis_client, qk.completed))[b] == now + 1000
    assert await redis_client.get(qk.processed) == b"2"


async def test_requeue_puts_the_task_next_in_line(
    broker: RedisBroker, client: Client, clock: FakeClock, redis_client: Redis,
    asyncq_queue: str
) -> None:
    a = await enqueue(client, asyncq_queue)
    b = await enqueue(client, asyncq_queue)
    raws, _ = await broker.dequeue(asyncq_queue, 1, OWNER, LEASE_MS, WAITER_TTL_MS)
    assert [r.id for r in raws] == [a]
    clock.advance(3)
    qk = K.queue_keys(asyncq_queue)
    assert await finish1(broker, Outcome("requeue", asyncq_queue, a)) is True
    fields = await task_hash(redis_client, asyncq_queue, a)
    assert fields["state"] == b"pending"
    assert fields["pending_since"] == str(clock.now_ms()).encode()
    assert not {"owner", "retried", "error", "failed_at"} & fields.keys()
    assert await zmembers(redis_client, qk.lease) == {}
    assert await redis_client.llen(qk.active) == 0
    assert await redis_client.exists(qk.processed, qk.failed) == 0
    raws, _ = await broker.dequeue(asyncq_queue, 1, OWNER, LEASE_MS, WAITER_TTL_MS)
    assert [r.id for r in raws] == [a]  # ahead of b, which was waiting longer
    assert await lmembers(redis_client, qk.pending) == [b]


async def test_requeue_wakes_a_waiting_worker(
    broker: RedisBroker, client: Client, asyncq_queue: str
) -> None:
    [task_id] = await lease(broker, client, asyncq_queue)
    await broker.dequeue(asyncq_queue, 1, OTHER, LEASE_MS, WAITER_TTL_MS)  # finds nothing
    events = broker.listen([K.WAKE_CHANNEL])
    try:
        assert await next_event(events) is None
        assert await finish1(broker, Outcome("requeue", asyncq_queue, task_id)) is True
        assert await next_event(events) == (K.WAKE_CHANNEL, asyncq_queue)
    finally:
        await events.aclose()


# ------------------------------------------------------------------ 95: completed expiry


async def test_delete_expired_completed(
    broker: RedisBroker, client: Client, clock: FakeClock, redis_client: Redis,
    asyncq_queue: str
) -> None:
    ids = await lease(broker, client, asyncq_queue, 4)
    retentions = [10_000, 10_000, 10_000, 100_000]
    for task_id, retention in zip(ids, retentions, strict=True):
        await finish1(broker, Outcome("complete", asyncq_queue, task_id, retention_ms=retention))
    qk = K.queue_keys(asyncq_queue)
    clock.advance(10)  # (the counts, batch by batch: conformance/test_conf_transitions.py)
    await broker.maintenance.delete_expired_completed(asyncq_queue, 100)
    assert list(await zmembers(redis_client, qk.completed)) == [ids[3]]
    for task_id in ids[:3]:
        assert await task_hash(redis_client, asyncq_queue, task_id) == {}
    assert (await task_hash(redis_client, asyncq_queue, ids[3]))["state"] == b"completed"




async def _evalsha_calls(redis: Redis) -> int:
    stats = await redis.info("commandstats")
    return int(stats.get("cmdstat_evalsha", {}).get("calls", 0))


async def test_a_flushs_done_outcomes_of_a_queue_are_written_in_one_call(
    broker: RedisBroker, client: Client, clock: FakeClock, redis_client: Redis,
    asyncq_queue: str,
) -> None:
    """Each task is finished as done.lua finishes it (events, lock, mark, lost lease), and the
    counters count only those done."""
    a, b, c = await lease(broker, client, asyncq_queue, 3, unique=60)
    [other] = await lease(broker, client, asyncq_queue, 1, owner=OTHER)
    qk = K.queue_keys(asyncq_queue)
    events = broker.listen_events([asyncq_queue])
    try:
        await anext(events)  # the stream's first flush: listening from here on
        await broker.set_listening([asyncq_queue], 10_000)
        await broker.load_scripts()  # (so no call is sent twice for NOSCRIPT)
        before = await _evalsha_calls(redis_client)
        results = await broker.finish([
            Outcome("done", asyncq_queue, a, result=b"ra", result_enc="b"),
            Outcome("done", asyncq_queue, b, error="not wanted"),
            Outcome("done", asyncq_queue, c, retention_ms=60_000),
            Outcome("done", asyncq_queue, other),  # leased to another owner
        ], OWNER)
        assert await _evalsha_calls(redis_client) - before == 1
        assert results == [True, True, True, False]
        seen = {}
        for _ in range(3):
            event = await next_event(events)
            seen[event.id] = event
    finally:
        await events.aclose()  # type: ignore[attr-defined]
    assert {i: e.state.value for i, e in seen.items()} == {
        a: "completed", b: "deleted", c: "completed"}
    assert seen[a].result == b"ra"
    for task_id in (a, b, c):
        assert await task_hash(redis_client, asyncq_queue, task_id) == {}
    assert await lmembers(redis_client, qk.active) == [other]
    assert list(await zmembers(redis_client, qk.lease)) == [other]
    assert list(await zmembers(redis_client, qk.marks)) == [c]  # (b was revoked)
    assert await redis_client.keys(qk.unique("t", b"*")) == []  # every lock released
    assert await redis_client.get(qk.processed) == b"3"
    await assert_daily_counter(redis_client, qk.processed_day(K.day_string(clock.now_ms())),
                               3, clock.now_ms())
