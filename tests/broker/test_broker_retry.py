"""Retry and archive outcomes, and the forwarder's move of due tasks (items 90-94)."""

from __future__ import annotations

import pytest
from broker_helpers import (
    DAY_MS,
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
from asyncq._broker import Outcome, RedisBroker, _calls
from asyncq._broker import _keys as K
from tests.helpers.dataplane import (
    lmembers,
    next_event,
    smembers,
    task_hash,
    zmembers,
)

pytestmark = pytest.mark.anyio


# ------------------------------------------------------------------ 90-93: retry, archive


async def test_retry(
    broker: RedisBroker, client: Client, clock: FakeClock, redis_client: Redis,
    asyncq_queue: str
) -> None:
    [task_id] = await lease(broker, client, asyncq_queue, unique=600)
    clock.advance(2)
    now = clock.now_ms()
    qk = K.queue_keys(asyncq_queue)
    assert await finish1(broker, Outcome("retry", asyncq_queue, task_id,
                                         retry_at_ms=now + 60_000, error="boom")) is True
    fields = await task_hash(redis_client, asyncq_queue, task_id)
    assert fields["state"] == b"retry"
    assert fields["retried"] == b"1"
    assert fields["error"] == b"boom"
    assert fields["failed_at"] == str(now).encode()
    assert "owner" not in fields
    assert await zmembers(redis_client, qk.retry) == {task_id: now + 60_000}
    assert await redis_client.llen(qk.active) == 0
    assert await zmembers(redis_client, qk.lease) == {}
    day = K.day_string(now)
    assert await redis_client.get(qk.processed) == b"1"
    assert await redis_client.get(qk.failed) == b"1"
    await assert_daily_counter(redis_client, qk.processed_day(day), 1, now)
    await assert_daily_counter(redis_client, qk.failed_day(day), 1, now)
    # The task is still queued, so its uniqueness lock stays.
    assert await redis_client.get(qk.unique("t", b"p0")) == task_id.encode()

    # It comes back with the retry count it has, and a second failure counts again (what the
    # calls return: conformance/test_conf_transitions.py).
    clock.advance(60)
    await broker.maintenance.forward(asyncq_queue, "retry", 100)
    await broker.dequeue(asyncq_queue, 1, OWNER, LEASE_MS, WAITER_TTL_MS)
    await finish1(broker, Outcome("retry", asyncq_queue, task_id, retry_at_ms=clock.now_ms(),
                                  error="again"))
    fields = await task_hash(redis_client, asyncq_queue, task_id)
    assert (fields["retried"], fields["error"]) == (b"2", b"again")
    assert await redis_client.get(qk.failed) == b"2"


async def test_retry_that_is_not_a_failure(
    broker: RedisBroker, client: Client, clock: FakeClock, redis_client: Redis,
    asyncq_queue: str
) -> None:
    [task_id] = await lease(broker, client, asyncq_queue)
    now = clock.now_ms()
    qk = K.queue_keys(asyncq_queue)
    assert await finish1(broker, Outcome("retry", asyncq_queue, task_id, retry_at_ms=now + 5,
                                         error="rate limited", is_failure=False)) is True
    fields = await task_hash(redis_client, asyncq_queue, task_id)
    assert fields["state"] == b"retry"
    assert fields.get("retried", b"0") == b"0"
    assert fields["error"] == b"rate limited"
    assert await zmembers(redis_client, qk.retry) == {task_id: now + 5}
    day = K.day_string(now)
    assert await redis_client.exists(qk.processed, qk.failed, qk.processed_day(day),
                                     qk.failed_day(day)) == 0


async def test_archive(
    broker: RedisBroker, client: Client, clock: FakeClock, redis_client: Redis,
    asyncq_queue: str
) -> None:
    [task_id] = await lease(broker, client, asyncq_queue, unique=600)
    clock.advance(7)
    now = clock.now_ms()
    qk = K.queue_keys(asyncq_queue)
    assert await finish1(broker, Outcome("archive", asyncq_queue, task_id,
                                         error="fatal")) is True
    fields = await task_hash(redis_client, asyncq_queue, task_id)
    assert fields["state"] == b"archived"
    assert fields["error"] == b"fatal"
    assert fields["failed_at"] == str(now).encode()
    assert fields.get("retried", b"0") == b"0"
    assert "owner" not in fields
    assert await zmembers(redis_client, qk.archived) == {task_id: now}
    assert await redis_client.llen(qk.active) == 0
    assert await zmembers(redis_client, qk.lease) == {}
    day = K.day_string(now)
    assert await redis_client.get(qk.processed) == b"1"
    assert await redis_client.get(qk.failed) == b"1"
    await assert_daily_counter(redis_client, qk.failed_day(day), 1, now)
    assert await redis_client.get(qk.unique("t", b"p0")) == task_id.encode()


async def test_archive_is_capped_and_trimmed_tasks_are_deleted(
    broker: RedisBroker, client: Client, clock: FakeClock, redis_client: Redis,
    asyncq_queue: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(_calls, "ARCHIVE_MAX_SIZE", 5)
    ids = await lease(broker, client, asyncq_queue, 7)
    qk = K.queue_keys(asyncq_queue)
    for task_id in ids:
        clock.advance(1)
        assert await finish1(broker, Outcome("archive", asyncq_queue, task_id, error="x"))
    assert list(await zmembers(redis_client, qk.archived)) == ids[2:]
    for task_id in ids[:2]:  # no orphaned task records left behind
        assert await task_hash(redis_client, asyncq_queue, task_id) == {}
    for task_id in ids[2:]:
        assert (await task_hash(redis_client, asyncq_queue, task_id))["state"] == b"archived"


async def test_archive_drops_entries_older_than_90_days(
    broker: RedisBroker, client: Client, clock: FakeClock, redis_client: Redis,
    asyncq_queue: str
) -> None:
    old = await lease(broker, client, asyncq_queue, 2)
    for task_id in old:
        assert await finish1(broker, Outcome("archive", asyncq_queue, task_id, error="x"))
    clock.advance(89 * DAY_MS / 1000)
    [recent] = await lease(broker, client, asyncq_queue)
    assert await finish1(broker, Outcome("archive", asyncq_queue, recent, error="x"))
    qk = K.queue_keys(asyncq_queue)
    assert set(await zmembers(redis_client, qk.archived)) == {*old, recent}  # 89 days: kept

    clock.advance(2 * DAY_MS / 1000)  # the first two are now 91 days old
    [new] = await lease(broker, client, asyncq_queue)
    assert await finish1(broker, Outcome("archive", asyncq_queue, new, error="x"))
    assert set(await zmembers(redis_client, qk.archived)) == {recent, new}
    for task_id in old:
        assert await task_hash(redis_client, asyncq_queue, task_id) == {}
    assert await task_hash(redis_client, asyncq_queue, recent) != {}


async def test_finish_many_outcomes_in_one_call(
    broker: RedisBroker, client: Client, clock: FakeClock, redis_client: Redis,
    asyncq_queue: str
) -> None:
    a, b, c, d = await lease(broker, client, asyncq_queue, 4)
    other_owner = (await lease(broker, client, asyncq_queue, owner=OTHER))[0]
    now = clock.now_ms()
    await broker.finish([  # (what it returns: conformance/test_conf_transitions.py)
        Outcome("done", asyncq_queue, a),
        Outcome("retry", asyncq_queue, b, retry_at_ms=now + 10, error="e"),
        Outcome("archive", asyncq_queue, c, error="e"),
        Outcome("complete", asyncq_queue, d, retention_ms=50),
        Outcome("done", asyncq_queue, other_owner),  # not ours
    ], OWNER)
    qk = K.queue_keys(asyncq_queue)
    assert await lmembers(redis_client, qk.active) == [other_owner]
    assert await zmembers(redis_client, qk.retry) == {b: now + 10}
    assert await zmembers(redis_client, qk.archived) == {c: now}
    assert await zmembers(redis_client, qk.completed) == {d: now + 50}
    assert await redis_client.get(qk.processed) == b"4"
    assert await redis_client.get(qk.failed) == b"2"


# ------------------------------------------------------------------ 94: forward


async def test_forward_due_scheduled_tasks(
    broker: RedisBroker, client: Client, clock: FakeClock, redis_client: Redis,
    asyncq_queue: str
) -> None:
    t0 = clock.now_ms()
    qk = K.queue_keys(asyncq_queue)  # (nothing due: conformance/test_conf_transitions.py)
    pending = await enqueue(client, asyncq_queue)
    s10 = await enqueue(client, asyncq_queue, process_in=10)
    s20 = await enqueue(client, asyncq_queue, process_in=20)
    s60 = await enqueue(client, asyncq_queue, process_in=60)

    clock.advance(20)  # s20 is due exactly now: forwarded too
    assert await broker.maintenance.forward(asyncq_queue, "scheduled", 100) == (2, t0 + 60_000)
    assert await zmembers(redis_client, qk.scheduled) == {s60: t0 + 60_000}
    # The existing task stays first in line; the earlier-due one runs before the later one.
    assert (await lmembers(redis_client, qk.pending))[::-1] == [pending, s10, s20]
    for task_id in (s10, s20):
        fields = await task_hash(redis_client, asyncq_queue, task_id)
        assert fields["state"] == b"pending"
        assert fields["pending_since"] == str(clock.now_ms()).encode()
    assert (await task_hash(redis_client, asyncq_queue, s60))["state"] == b"scheduled"
    assert await broker.maintenance.forward(asyncq_queue, "scheduled", 100) == (0, t0 + 60_000)


async def test_forward_respects_the_limit(
    broker: RedisBroker, client: Client, clock: FakeClock, redis_client: Redis,
    asyncq_queue: str
) -> None:
    t0 = clock.now_ms()
    ids = [await enqueue(client, asyncq_queue, process_in=i + 1) for i in range(3)]
    clock.advance(10)
    assert await broker.maintenance.forward(asyncq_queue, "scheduled", 2) == (2, t0 + 3_000)
    assert await zmembers(redis_client, K.queue_keys(asyncq_queue).scheduled) == {
        ids[2]: t0 + 3_000}
    assert await broker.maintenance.forward(asyncq_queue, "scheduled", 2) == (1, -1)


async def test_forward_sends_grouped_tasks_to_their_group(
    broker: RedisBroker, client: Client, clock: FakeClock, redis_client: Redis,
    asyncq_queue: str
) -> None:
    grouped = await enqueue(client, asyncq_queue, process_in=10, group="batch")
    plain = await enqueue(client, asyncq_queue, process_in=10)
    qk = K.queue_keys(asyncq_queue)
    assert await smembers(redis_client, qk.groups) == set()
    clock.advance(15)  # (what forward returns: conformance/test_conf_transitions.py)
    await broker.maintenance.forward(asyncq_queue, "scheduled", 100)
    assert await zmembers(redis_client, qk.group("batch")) == {grouped: clock.now_ms()}
    assert await smembers(redis_client, qk.groups) == {"batch"}  # visible to the aggregator
    assert await lmembers(redis_client, qk.pending) == [plain]
    assert (await task_hash(redis_client, asyncq_queue, grouped))["state"] == b"aggregating"


async def test_forward_drops_ids_without_a_task_hash(
    broker: RedisBroker, clock: FakeClock, redis_client: Redis, asyncq_queue: str
) -> None:
    qk = K.queue_keys(asyncq_queue)
    await redis_client.zadd(qk.scheduled, {"ghost": clock.now_ms() - 1})
    assert await broker.maintenance.forward(asyncq_queue, "scheduled", 100) == (1, -1)
    assert await redis_client.exists(qk.scheduled, qk.pending) == 0
    assert await task_hash(redis_client, asyncq_queue, "ghost") == {}


async def test_forward_wakes_a_waiting_worker(
    broker: RedisBroker, client: Client, clock: FakeClock, asyncq_queue: str
) -> None:
    await enqueue(client, asyncq_queue, process_in=1)
    await broker.dequeue(asyncq_queue, 1, OWNER, LEASE_MS, WAITER_TTL_MS)  # finds nothing
    events = broker.listen([K.WAKE_CHANNEL])
    try:
        assert await next_event(events) is None
        clock.advance(1)
        assert (await broker.maintenance.forward(asyncq_queue, "scheduled", 10))[0] == 1
        assert await next_event(events) == (K.WAKE_CHANNEL, asyncq_queue)
    finally:
        await events.aclose()


