"""RedisBroker against a real Redis (spec §7 items 78-105, in asyncq's terms).

Tasks are created through a Client sharing the broker and a FakeClock, so every stored time is
known to the millisecond and time-based behaviour is tested by moving the clock, not sleeping.
"""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator
from typing import Any

import orjson
import pytest
from dataplane_helpers import (
    dead_redis_url,
    lmembers,
    msg_doc,
    next_event,
    smembers,
    task_hash,
    zmembers,
)
from redis.asyncio import Redis
from redis.exceptions import ResponseError

import asyncq
from asyncq import BrokerError, Client, FakeClock, Task, TaskInfo
from asyncq import _keys as K
from asyncq._broker import NewTask, Outcome, RawTask, RedisBroker, _calls
from asyncq._connection import make_broker
from asyncq._message import TaskMessage

pytestmark = pytest.mark.anyio

OWNER = "srv-a"
OTHER = "srv-b"
LEASE_MS = 30_000
WAITER_TTL_MS = 30_000  # long enough that a loaded machine never lets the flag lapse
DAY_MS = 86_400_000
INT64_MAX = 9223372036854775807


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


@pytest.fixture
async def broker(asyncq_redis_url: str, clock: FakeClock,
                 anyio_backend: object) -> AsyncIterator[RedisBroker]:
    b = make_broker(asyncq_redis_url, clock=clock)
    try:
        yield b
    finally:
        await b.close()


@pytest.fixture
def client(broker: RedisBroker, clock: FakeClock) -> Client:
    return Client(broker, clock=clock)  # shares the broker: never closed on its own


async def enqueue(client: Client, queue: str, payload: object = None, **opts: Any) -> str:
    info = await client.enqueue("t", payload, queue=queue, **opts)
    return info.id


async def lease(broker: RedisBroker, client: Client, queue: str, n: int = 1,
                owner: str = OWNER, **opts: Any) -> list[str]:
    """Enqueue ``n`` tasks and lease them all to ``owner``; returns their ids, oldest first."""
    ids = [await enqueue(client, queue, f"p{i}".encode(), **opts) for i in range(n)]
    raws, dropped = await broker.dequeue(queue, n, owner, LEASE_MS, WAITER_TTL_MS)
    assert [r.id for r in raws] == ids
    assert dropped == 0
    return ids


async def finish1(broker: RedisBroker, outcome: Outcome, owner: str = OWNER) -> bool:
    [result] = await broker.finish([outcome], owner)
    assert isinstance(result, bool)
    return result


def new_task(queue: str, task_id: str, now: int, *, payload: bytes = b"x",
             process_at_ms: int = 0, unique_key: str | None = None,
             unique_ttl_ms: int = 0) -> NewTask:
    msg = TaskMessage(id=task_id, type="t", queue=queue, enqueued_at_ms=now,
                      unique_key=unique_key or "")
    return NewTask(msg, payload, process_at_ms, unique_key, unique_ttl_ms)


async def assert_daily_counter(redis: Redis, key: str, value: int, first_at_ms: int) -> None:
    """The daily counter holds ``value`` and expires 90 days after its first increment."""
    assert await redis.get(key) == str(value).encode()
    assert await redis.pexpiretime(key) == first_at_ms + 90 * DAY_MS


# ------------------------------------------------------------------ 78-81: storing


async def test_store_writes_hash_and_pending_and_registers_queue(
    broker: RedisBroker, clock: FakeClock, redis_client: Redis, asyncq_queue: str
) -> None:
    now = clock.now_ms()
    first = new_task(asyncq_queue, "a", now, payload=b"\x00pay")
    assert await broker.store(first) == 1
    assert await broker.store(new_task(asyncq_queue, "b", now)) == 1

    fields = await task_hash(redis_client, asyncq_queue, "a")
    assert fields == {"msg": first.msg.encode(), "payload": b"\x00pay", "state": b"pending",
                      "pending_since": str(now).encode()}
    qk = K.queue_keys(asyncq_queue)
    assert await lmembers(redis_client, qk.pending) == ["b", "a"]  # LPUSH: newest at the head
    assert asyncq_queue in await smembers(redis_client, K.QUEUES)

    # The same id again is a conflict and changes nothing.
    assert await broker.store(new_task(asyncq_queue, "a", now, payload=b"other")) == 0
    assert (await task_hash(redis_client, asyncq_queue, "a"))["payload"] == b"\x00pay"
    assert await lmembers(redis_client, qk.pending) == ["b", "a"]


async def test_queue_registration_follows_its_marker(
    broker: RedisBroker, clock: FakeClock, redis_client: Redis, asyncq_queue: str
) -> None:
    now = clock.now_ms()
    qk = K.queue_keys(asyncq_queue)
    await broker.store(new_task(asyncq_queue, "a", now))
    assert await redis_client.get(qk.registered) == b"1"
    # The queue was deleted (its keys, marker included, then its registry entry).
    await redis_client.delete(qk.registered)
    await redis_client.srem(K.QUEUES, asyncq_queue)
    await broker.store(new_task(asyncq_queue, "b", now))
    assert asyncq_queue in await smembers(redis_client, K.QUEUES)


async def test_store_unique(
    broker: RedisBroker, clock: FakeClock, redis_client: Redis, asyncq_queue: str
) -> None:
    now = clock.now_ms()
    qk = K.queue_keys(asyncq_queue)
    lock, lock2 = qk.unique("t", b"x"), qk.unique("t", b"y")
    assert await broker.store(new_task(asyncq_queue, "a", now, unique_key=lock,
                                       unique_ttl_ms=20_000)) == 1
    assert await redis_client.get(lock) == b"a"
    assert 15_000 < await redis_client.pttl(lock) <= 20_000
    assert (await task_hash(redis_client, asyncq_queue, "a"))["unique_key"] == lock.encode()
    # Same lock, new id: duplicate. Same id, another lock: id conflict, and no lock is taken.
    assert await broker.store(new_task(asyncq_queue, "b", now, unique_key=lock,
                                       unique_ttl_ms=20_000)) == -1
    assert await broker.store(new_task(asyncq_queue, "a", now, unique_key=lock2,
                                       unique_ttl_ms=20_000)) == 0
    assert await redis_client.exists(lock2) == 0
    assert await task_hash(redis_client, asyncq_queue, "b") == {}
    assert await lmembers(redis_client, qk.pending) == ["a"]


async def test_store_many(
    broker: RedisBroker, clock: FakeClock, redis_client: Redis, asyncq_queue: str
) -> None:
    now = clock.now_ms()
    qk = K.queue_keys(asyncq_queue)
    assert await broker.store_many([]) == []
    codes = await broker.store_many([
        new_task(asyncq_queue, "a", now),
        new_task(asyncq_queue, "b", now, process_at_ms=now + 5_000),
        new_task(asyncq_queue, "a", now),  # duplicate id inside the batch
        new_task(asyncq_queue, "c", now),
    ])
    assert codes == [1, 1, 0, 1]
    assert await lmembers(redis_client, qk.pending) == ["c", "a"]
    assert await zmembers(redis_client, qk.scheduled) == {"b": now + 5_000}
    assert (await task_hash(redis_client, asyncq_queue, "b"))["state"] == b"scheduled"
    assert asyncq_queue in await smembers(redis_client, K.QUEUES)


async def test_scripts_are_reloaded_after_redis_lost_them(
    broker: RedisBroker, clock: FakeClock, redis_client: Redis, asyncq_queue: str
) -> None:
    """A restarted Redis has an empty script cache: NOSCRIPT must be handled, not surfaced."""
    now = clock.now_ms()
    await broker.store(new_task(asyncq_queue, "warm", now))
    await redis_client.script_flush()
    assert await broker.store(new_task(asyncq_queue, "a", now)) == 1
    await redis_client.script_flush()
    codes = await broker.store_many([new_task(asyncq_queue, f"m{i}", now) for i in range(3)])
    assert codes == [1, 1, 1]
    await redis_client.script_flush()
    raws, _ = await broker.dequeue(asyncq_queue, 2, OWNER, LEASE_MS, WAITER_TTL_MS)
    await redis_client.script_flush()
    results = await broker.finish(
        [Outcome("done", asyncq_queue, r.id) for r in raws], OWNER)
    assert results == [True, True]
    assert await redis_client.llen(K.queue_keys(asyncq_queue).pending) == 3


async def test_store_many_keeps_batch_order_when_some_scripts_are_not_cached(
    broker: RedisBroker, clock: FakeClock, redis_client: Redis, asyncq_queue: str
) -> None:
    """The first of two items with one id wins, even if only the second's script was cached
    (Redis restarted, then one enqueue ran before the batch)."""
    now = clock.now_ms()
    await redis_client.script_flush()
    assert await broker.store(new_task(asyncq_queue, "warm", now)) == 1  # caches "enqueue"
    codes = await broker.store_many([
        new_task(asyncq_queue, "x", now, process_at_ms=now + 60_000),  # "schedule": not cached
        new_task(asyncq_queue, "x", now),
    ])
    assert codes == [1, 0]
    assert (await task_hash(redis_client, asyncq_queue, "x"))["state"] == b"scheduled"
    assert await lmembers(redis_client, K.queue_keys(asyncq_queue).pending) == ["warm"]


async def test_an_error_reply_in_a_pipeline_is_a_broker_error_chained_from_it(
    broker: RedisBroker, clock: FakeClock, redis_client: Redis, asyncq_queue: str
) -> None:
    """One failing script of a batch fails its tasks only, with the redis error as the cause
    (a script error: not transient, trying again will not help)."""
    now = clock.now_ms()
    other = asyncq_queue + "-ok"
    pending = K.queue_keys(asyncq_queue).pending
    await redis_client.set(pending, "not a list")
    try:
        codes = await broker.store_many([new_task(asyncq_queue, "a", now),
                                         new_task(other, "b", now)])
    finally:  # the server is shared: leave no queue that other tests cannot read
        await redis_client.delete(pending)
    assert codes[1] == 1
    error = codes[0]
    assert isinstance(error, BrokerError)
    assert isinstance(error.__cause__, ResponseError)
    assert "WRONGTYPE" in str(error)
    assert not error.transient


async def test_broker_errors_when_redis_is_down(clock: FakeClock) -> None:
    broker = make_broker(dead_redis_url(), clock=clock)
    try:
        with pytest.raises(BrokerError):
            await broker.ping()
        with pytest.raises(BrokerError):
            await broker.store(new_task("q", "a", clock.now_ms()))
        with pytest.raises(BrokerError):
            await broker.store_many([new_task("q", "a", clock.now_ms())])
        with pytest.raises(BrokerError):
            await broker.dequeue("q", 1, OWNER, LEASE_MS, WAITER_TTL_MS)
        with pytest.raises(BrokerError):
            await broker.finish([Outcome("done", "q", "a")], OWNER)
        events = broker.listen([K.CANCEL_CHANNEL])
        try:
            with pytest.raises(BrokerError):
                await next_event(events)
        finally:
            await events.aclose()
    finally:
        await broker.close()


# ------------------------------------------------------------------ 82, 83: dequeue


async def test_dequeue_leases_a_batch_in_fifo_order(
    broker: RedisBroker, client: Client, clock: FakeClock, redis_client: Redis,
    asyncq_queue: str
) -> None:
    ids = [await enqueue(client, asyncq_queue, f"p{i}".encode()) for i in range(5)]
    qk = K.queue_keys(asyncq_queue)
    now = clock.now_ms()

    raws, dropped = await broker.dequeue(asyncq_queue, 3, OWNER, LEASE_MS, WAITER_TTL_MS)
    assert dropped == 0
    assert [r.id for r in raws] == ids[:3]
    first = raws[0]
    assert isinstance(first, RawTask)
    assert first.payload == b"p0"
    assert first.retried == 0
    stored = await task_hash(redis_client, asyncq_queue, ids[0])
    assert first.msg == stored["msg"]
    assert stored["state"] == b"active"
    assert stored["owner"] == OWNER.encode()
    assert "pending_since" not in stored
    assert set(await lmembers(redis_client, qk.active)) == set(ids[:3])
    assert await lmembers(redis_client, qk.pending) == ids[:2:-1]
    assert await zmembers(redis_client, qk.lease) == {i: now + LEASE_MS for i in ids[:3]}
    assert await redis_client.exists(qk.waiters) == 0  # got all it asked for

    raws, dropped = await broker.dequeue(asyncq_queue, 5, OWNER, LEASE_MS, WAITER_TTL_MS)
    assert [r.id for r in raws] == ids[3:]
    assert await redis_client.llen(qk.pending) == 0
    # Under-filled: the waiters flag tells the next enqueue to publish a wake-up.
    assert await redis_client.exists(qk.waiters) == 1
    assert 0 < await redis_client.pttl(qk.waiters) <= WAITER_TTL_MS


async def test_dequeue_empty_queue_changes_nothing_but_the_waiters_flag(
    broker: RedisBroker, redis_client: Redis, asyncq_queue: str
) -> None:
    assert await broker.dequeue(asyncq_queue, 4, OWNER, LEASE_MS, WAITER_TTL_MS) == ([], 0)
    qk = K.queue_keys(asyncq_queue)
    names = {k.decode() async for k in redis_client.scan_iter(match=qk.base + "*")}
    assert names == {qk.waiters}


async def test_dequeue_skips_a_paused_queue(
    broker: RedisBroker, client: Client, clock: FakeClock, redis_client: Redis,
    asyncq_queue: str
) -> None:
    task_id = await enqueue(client, asyncq_queue)
    qk = K.queue_keys(asyncq_queue)
    assert await broker.pause(asyncq_queue) is True
    assert await redis_client.get(qk.paused) == str(clock.now_ms()).encode()
    assert await broker.pause(asyncq_queue) is False
    assert await broker.dequeue(asyncq_queue, 1, OWNER, LEASE_MS, WAITER_TTL_MS) == ([], 0)
    assert await lmembers(redis_client, qk.pending) == [task_id]
    assert await redis_client.llen(qk.active) == 0
    assert (await task_hash(redis_client, asyncq_queue, task_id))["state"] == b"pending"

    assert await broker.unpause(asyncq_queue) is True
    assert await broker.unpause(asyncq_queue) is False
    raws, _ = await broker.dequeue(asyncq_queue, 1, OWNER, LEASE_MS, WAITER_TTL_MS)
    assert [r.id for r in raws] == [task_id]


async def test_unpause_wakes_idle_workers(
    broker: RedisBroker, asyncq_queue: str
) -> None:
    await broker.pause(asyncq_queue)
    events = broker.listen([K.WAKE_CHANNEL])
    try:
        assert await next_event(events) is None
        assert await broker.unpause(asyncq_queue) is True
        assert await next_event(events) == (K.WAKE_CHANNEL, asyncq_queue)
    finally:
        await events.aclose()


async def test_dequeue_drops_ids_without_a_task_hash(
    broker: RedisBroker, client: Client, redis_client: Redis, asyncq_queue: str
) -> None:
    qk = K.queue_keys(asyncq_queue)
    a = await enqueue(client, asyncq_queue)
    await redis_client.lpush(qk.pending, "ghost")
    b = await enqueue(client, asyncq_queue)
    raws, dropped = await broker.dequeue(asyncq_queue, 2, OWNER, LEASE_MS, WAITER_TTL_MS)
    assert [r.id for r in raws] == [a, b]
    assert dropped == 1
    assert await lmembers(redis_client, qk.pending) == []
    assert sorted(await lmembers(redis_client, qk.active)) == sorted([a, b])
    assert "ghost" not in await zmembers(redis_client, qk.lease)


# ------------------------------------------------------------------ wake-ups


async def test_enqueue_publishes_a_wake_up_only_when_a_worker_waits(
    broker: RedisBroker, client: Client, redis_client: Redis, asyncq_queue: str
) -> None:
    idle = f"{asyncq_queue}-idle"
    await broker.dequeue(idle, 1, OWNER, LEASE_MS, WAITER_TTL_MS)  # a worker found it empty
    events = broker.listen([K.WAKE_CHANNEL])
    try:
        assert await next_event(events) is None
        await enqueue(client, asyncq_queue)  # nobody waits on this queue: no publish
        await enqueue(client, idle)
        assert await next_event(events) == (K.WAKE_CHANNEL, idle)
        assert await redis_client.exists(K.queue_keys(idle).waiters) == 0
    finally:
        await events.aclose()


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
    # Finishing it again finds nothing: no change, no second count.
    assert await finish1(broker, Outcome("done", asyncq_queue, task_id)) is False
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
    assert await finish1(broker, outcome, owner=OTHER) is False
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
    assert await finish1(broker, outcome) is False
    assert await task_hash(redis_client, asyncq_queue, task_id) == before
    assert await lmembers(redis_client, K.queue_keys(asyncq_queue).pending) == [task_id]
    # And a task that does not exist at all is not created.
    assert await finish1(broker, Outcome(kind, asyncq_queue, "nope", retry_at_ms=1)) is False
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

    # It comes back with the retry count it has, and a second failure counts again.
    clock.advance(60)
    assert await broker.forward(asyncq_queue, "retry", 100) == (1, -1)
    raws, _ = await broker.dequeue(asyncq_queue, 1, OWNER, LEASE_MS, WAITER_TTL_MS)
    assert [(r.id, r.retried) for r in raws] == [(task_id, 1)]
    assert await finish1(broker, Outcome("retry", asyncq_queue, task_id,
                                         retry_at_ms=clock.now_ms(), error="again")) is True
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
    results = await broker.finish([
        Outcome("done", asyncq_queue, a),
        Outcome("retry", asyncq_queue, b, retry_at_ms=now + 10, error="e"),
        Outcome("archive", asyncq_queue, c, error="e"),
        Outcome("complete", asyncq_queue, d, retention_ms=50),
        Outcome("done", asyncq_queue, other_owner),  # not ours
    ], OWNER)
    assert results == [True, True, True, True, False]
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
    qk = K.queue_keys(asyncq_queue)
    assert await broker.forward(asyncq_queue, "scheduled", 100) == (0, -1)
    pending = await enqueue(client, asyncq_queue)
    s10 = await enqueue(client, asyncq_queue, process_in=10)
    s20 = await enqueue(client, asyncq_queue, process_in=20)
    s60 = await enqueue(client, asyncq_queue, process_in=60)

    clock.advance(20)  # s20 is due exactly now: forwarded too
    assert await broker.forward(asyncq_queue, "scheduled", 100) == (2, t0 + 60_000)
    assert await zmembers(redis_client, qk.scheduled) == {s60: t0 + 60_000}
    # The existing task stays first in line; the earlier-due one runs before the later one.
    assert (await lmembers(redis_client, qk.pending))[::-1] == [pending, s10, s20]
    for task_id in (s10, s20):
        fields = await task_hash(redis_client, asyncq_queue, task_id)
        assert fields["state"] == b"pending"
        assert fields["pending_since"] == str(clock.now_ms()).encode()
    assert (await task_hash(redis_client, asyncq_queue, s60))["state"] == b"scheduled"
    assert await broker.forward(asyncq_queue, "scheduled", 100) == (0, t0 + 60_000)


async def test_forward_respects_the_limit(
    broker: RedisBroker, client: Client, clock: FakeClock, redis_client: Redis,
    asyncq_queue: str
) -> None:
    t0 = clock.now_ms()
    ids = [await enqueue(client, asyncq_queue, process_in=i + 1) for i in range(3)]
    clock.advance(10)
    assert await broker.forward(asyncq_queue, "scheduled", 2) == (2, t0 + 3_000)
    assert await zmembers(redis_client, K.queue_keys(asyncq_queue).scheduled) == {
        ids[2]: t0 + 3_000}
    assert await broker.forward(asyncq_queue, "scheduled", 2) == (1, -1)


async def test_forward_sends_grouped_tasks_to_their_group(
    broker: RedisBroker, client: Client, clock: FakeClock, redis_client: Redis,
    asyncq_queue: str
) -> None:
    grouped = await enqueue(client, asyncq_queue, process_in=10, group="batch")
    plain = await enqueue(client, asyncq_queue, process_in=10)
    qk = K.queue_keys(asyncq_queue)
    assert await smembers(redis_client, qk.groups) == set()
    clock.advance(15)
    assert await broker.forward(asyncq_queue, "scheduled", 100) == (2, -1)
    assert await zmembers(redis_client, qk.group("batch")) == {grouped: clock.now_ms()}
    assert await smembers(redis_client, qk.groups) == {"batch"}  # visible to the aggregator
    assert await lmembers(redis_client, qk.pending) == [plain]
    assert (await task_hash(redis_client, asyncq_queue, grouped))["state"] == b"aggregating"
    assert await broker.list_groups(asyncq_queue) == ["batch"]


async def test_forward_drops_ids_without_a_task_hash(
    broker: RedisBroker, clock: FakeClock, redis_client: Redis, asyncq_queue: str
) -> None:
    qk = K.queue_keys(asyncq_queue)
    await redis_client.zadd(qk.scheduled, {"ghost": clock.now_ms() - 1})
    assert await broker.forward(asyncq_queue, "scheduled", 100) == (1, -1)
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
        assert (await broker.forward(asyncq_queue, "scheduled", 10))[0] == 1
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
        assert await finish1(broker, Outcome("complete", asyncq_queue, task_id,
                                             retention_ms=retention))
    qk = K.queue_keys(asyncq_queue)
    assert await broker.delete_expired_completed(asyncq_queue, 100) == 0
    clock.advance(10)  # expiry == now counts as expired
    assert await broker.delete_expired_completed(asyncq_queue, 2) == 2
    assert await broker.delete_expired_completed(asyncq_queue, 2) == 1
    assert await broker.delete_expired_completed(asyncq_queue, 2) == 0
    assert list(await zmembers(redis_client, qk.completed)) == [ids[3]]
    for task_id in ids[:3]:
        assert await task_hash(redis_client, asyncq_queue, task_id) == {}
    assert (await task_hash(redis_client, asyncq_queue, ids[3]))["state"] == b"completed"


# ------------------------------------------------------------------ 96, 97: leases


async def test_list_lease_expired_respects_the_cutoff(
    broker: RedisBroker, client: Client, clock: FakeClock, asyncq_queue: str
) -> None:
    t0 = clock.now_ms()
    [a] = await lease(broker, client, asyncq_queue)
    clock.advance(10)
    [b] = await lease(broker, client, asyncq_queue)
    assert await broker.list_lease_expired(asyncq_queue, t0 + LEASE_MS - 1, 100) == []
    expired = await broker.list_lease_expired(asyncq_queue, t0 + LEASE_MS, 100)
    assert [r.id for r in expired] == [a]
    assert expired[0].payload == b"p0"
    assert expired[0].retried == 0
    assert msg_doc({"msg": expired[0].msg})["id"] == a
    both = await broker.list_lease_expired(asyncq_queue, t0 + LEASE_MS + 10_000, 100)
    assert [r.id for r in both] == [a, b]
    assert [r.id for r in await broker.list_lease_expired(
        asyncq_queue, t0 + LEASE_MS + 10_000, 1)] == [a]


async def test_list_lease_expired_repairs_entries_without_a_task(
    broker: RedisBroker, clock: FakeClock, redis_client: Redis, asyncq_queue: str
) -> None:
    qk = K.queue_keys(asyncq_queue)
    await redis_client.zadd(qk.lease, {"ghost": clock.now_ms() - 1})
    await redis_client.lpush(qk.active, "ghost")
    assert await broker.list_lease_expired(asyncq_queue, clock.now_ms(), 100) == []
    assert await redis_client.exists(qk.lease, qk.active) == 0


async def test_list_lease_expired_drops_stale_entries_of_tasks_no_longer_active(
    broker: RedisBroker, client: Client, clock: FakeClock, redis_client: Redis,
    asyncq_queue: str
) -> None:
    """A lease entry left for a task that is not active can never be recovered: listing it
    forever would make the recoverer spin on it, so it is removed instead."""
    qk = K.queue_keys(asyncq_queue)
    pending = [await enqueue(client, asyncq_queue) for _ in range(3)]
    await redis_client.zadd(qk.lease, dict.fromkeys(pending, clock.now_ms() - 1))
    assert await broker.list_lease_expired(asyncq_queue, clock.now_ms(), 2) == []
    assert await broker.list_lease_expired(asyncq_queue, clock.now_ms(), 2) == []
    assert await redis_client.exists(qk.lease) == 0
    assert sorted(await lmembers(redis_client, qk.pending)) == sorted(pending)
    for task_id in pending:
        assert (await task_hash(redis_client, asyncq_queue, task_id))["state"] == b"pending"


async def test_recover_retries_or_archives_an_expired_task(
    broker: RedisBroker, client: Client, clock: FakeClock, redis_client: Redis,
    asyncq_queue: str
) -> None:
    a, b = await lease(broker, client, asyncq_queue, 2)
    clock.advance(LEASE_MS / 1000 + 60)
    cutoff = clock.now_ms() - 30_000
    expired = await broker.list_lease_expired(asyncq_queue, cutoff, 100)
    assert {r.id for r in expired} == {a, b}
    # Recovery works whoever owned the task.
    assert await broker.recover(Outcome("retry", asyncq_queue, a, retry_at_ms=clock.now_ms(),
                                        error="lease expired"), cutoff) is True
    assert await broker.recover(Outcome("archive", asyncq_queue, b, error="lease expired"),
                                cutoff) is True
    qk = K.queue_keys(asyncq_queue)
    assert await zmembers(redis_client, qk.retry) == {a: clock.now_ms()}
    assert await zmembers(redis_client, qk.archived) == {b: clock.now_ms()}
    assert (await task_hash(redis_client, asyncq_queue, a))["retried"] == b"1"
    assert await redis_client.exists(qk.active, qk.lease) == 0


async def test_recover_does_not_steal_a_renewed_lease(
    broker: RedisBroker, client: Client, clock: FakeClock, redis_client: Redis,
    asyncq_queue: str
) -> None:
    [task_id] = await lease(broker, client, asyncq_queue)
    clock.advance(LEASE_MS / 1000 + 60)
    cutoff = clock.now_ms() - 30_000
    [raw] = await broker.list_lease_expired(asyncq_queue, cutoff, 100)
    # The worker renews its lease between the listing and the recovery.
    assert await broker.extend_leases(asyncq_queue, [raw.id], OWNER, LEASE_MS) == [True]
    before = await task_hash(redis_client, asyncq_queue, task_id)
    for outcome in (Outcome("retry", asyncq_queue, task_id, retry_at_ms=1, error="x"),
                    Outcome("archive", asyncq_queue, task_id, error="x")):
        assert await broker.recover(outcome, cutoff) is False
    assert await task_hash(redis_client, asyncq_queue, task_id) == before
    qk = K.queue_keys(asyncq_queue)
    assert await zmembers(redis_client, qk.lease) == {task_id: clock.now_ms() + LEASE_MS}
    assert await lmembers(redis_client, qk.active) == [task_id]


async def test_extend_leases(
    broker: RedisBroker, client: Client, clock: FakeClock, redis_client: Redis,
    asyncq_queue: str
) -> None:
    t0 = clock.now_ms()
    mine1, mine2, finished = await lease(broker, client, asyncq_queue, 3)
    [theirs] = await lease(broker, client, asyncq_queue, owner=OTHER)
    assert await finish1(broker, Outcome("done", asyncq_queue, finished)) is True
    qk = K.queue_keys(asyncq_queue)
    await redis_client.zrem(qk.lease, mine2)  # lost its lease entry (eviction, restore...)
    clock.advance(5)
    flags = await broker.extend_leases(
        asyncq_queue, [mine1, mine2, theirs, finished, "unknown"], OWNER, LEASE_MS)
    assert flags == [True, True, False, False, False]
    new_expiry = clock.now_ms() + LEASE_MS
    assert await zmembers(redis_client, qk.lease) == {
        mine1: new_expiry, mine2: new_expiry, theirs: t0 + LEASE_MS}
    assert await broker.extend_leases(asyncq_queue, [], OWNER, LEASE_MS) == []


async def test_extend_lease_of_a_recovered_task_is_lost(
    broker: RedisBroker, client: Client, clock: FakeClock, redis_client: Redis,
    asyncq_queue: str
) -> None:
    [task_id] = await lease(broker, client, asyncq_queue)
    clock.advance(LEASE_MS / 1000 + 60)
    assert await broker.recover(Outcome("retry", asyncq_queue, task_id, retry_at_ms=1,
                                        error="x"), clock.now_ms()) is True
    assert await broker.extend_leases(asyncq_queue, [task_id], OWNER, LEASE_MS) == [False]
    assert await zmembers(redis_client, K.queue_keys(asyncq_queue).lease) == {}


async def test_reclaim_orphans_gives_active_tasks_without_lease_one(
    broker: RedisBroker, client: Client, clock: FakeClock, redis_client: Redis,
    asyncq_queue: str
) -> None:
    t0 = clock.now_ms()
    orphan, fine = await lease(broker, client, asyncq_queue, 2)
    qk = K.queue_keys(asyncq_queue)
    await redis_client.zrem(qk.lease, orphan)
    clock.advance(1)
    assert await broker.reclaim_orphans(asyncq_queue, 100) == 1
    assert await zmembers(redis_client, qk.lease) == {
        orphan: clock.now_ms(), fine: t0 + LEASE_MS}
    assert await broker.reclaim_orphans(asyncq_queue, 100) == 0
    # The orphan is now visible to the recoverer and can be recovered.
    expired = await broker.list_lease_expired(asyncq_queue, clock.now_ms(), 100)
    assert [r.id for r in expired] == [orphan]
    assert await broker.recover(Outcome("archive", asyncq_queue, orphan, error="orphan"),
                                clock.now_ms()) is True


# ------------------------------------------------------------------ 98, 99: server state


async def test_write_and_clear_server_state(
    broker: RedisBroker, clock: FakeClock, redis_client: Redis
) -> None:
    sid, other = f"host:1:{uuid.uuid4()}", f"host:2:{uuid.uuid4()}"
    skey, wkey = K.server_key(sid), K.workers_key(sid)
    try:
        await broker.write_server_state(sid, b'{"status":"active"}', {}, 10_000)
        assert await redis_client.get(skey) == b'{"status":"active"}'
        assert 8_000 < await redis_client.pttl(skey) <= 10_000
        assert await redis_client.zscore(K.SERVERS, skey) == clock.now_ms() + 10_000
        assert await redis_client.exists(wkey) == 0  # no workers: no hash

        await broker.write_server_state(sid, b"{}", {"t1": b"w1", "t2": b"w2"}, 10_000)
        assert await redis_client.hgetall(wkey) == {b"t1": b"w1", b"t2": b"w2"}
        assert 8_000 < await redis_client.pttl(wkey) <= 10_000
        assert await redis_client.zscore(K.WORKERS, wkey) == clock.now_ms() + 10_000
        # Each write replaces the running set: finished tasks disappear.
        await broker.write_server_state(sid, b"{}", {"t3": b"w3"}, 10_000)
        assert await redis_client.hgetall(wkey) == {b"t3": b"w3"}

        await broker.write_server_state(other, b"{}", {"x": b"y"}, 10_000)
        await broker.clear_server_state(sid)
        assert await redis_client.exists(skey, wkey) == 0
        assert await redis_client.zscore(K.SERVERS, skey) is None
        assert await redis_client.zscore(K.WORKERS, wkey) is None
        assert await redis_client.exists(K.server_key(other), K.workers_key(other)) == 2
        assert await redis_client.zscore(K.SERVERS, K.server_key(other)) is not None
    finally:
        await broker.clear_server_state(sid)
        await broker.clear_server_state(other)


# ------------------------------------------------------------------ 100, 101: pub/sub, results


async def test_listen_yields_messages_of_every_channel(broker: RedisBroker,
                                                       asyncq_queue: str) -> None:
    chan_a, chan_b = f"asyncq:test:{asyncq_queue}:a", f"asyncq:test:{asyncq_queue}:b"
    events = broker.listen([chan_a, chan_b])
    try:
        assert await next_event(events) is None
        await broker.publish_cancel("id-1")  # another channel: not delivered
        await broker.redis.publish(chan_b, "hello")
        await broker.redis.publish(chan_a, "world")
        assert await next_event(events) == (chan_b, "hello")
        assert await next_event(events) == (chan_a, "world")
    finally:
        await events.aclose()


async def test_write_result(
    broker: RedisBroker, client: Client, redis_client: Redis, asyncq_queue: str
) -> None:
    [task_id] = await lease(broker, client, asyncq_queue)
    data = bytes(range(256)) * 10
    assert await broker.write_result(asyncq_queue, task_id, data) == len(data)
    assert (await task_hash(redis_client, asyncq_queue, task_id))["result"] == data
    assert await broker.write_result(asyncq_queue, task_id, b"") == 0
    assert (await task_hash(redis_client, asyncq_queue, task_id))["result"] == b""
    # A task that is gone is not recreated as a partial hash.
    assert await broker.write_result(asyncq_queue, "gone", b"data") == -1
    assert await redis_client.exists(K.queue_keys(asyncq_queue).task("gone")) == 0


# ------------------------------------------------------------------ 102-105: aggregation


async def add_group_tasks(client: Client, clock: FakeClock, queue: str, group: str, n: int,
                          step: float = 1.0, **opts: Any) -> dict[str, int]:
    """Add ``n`` tasks to a group, ``step`` seconds apart; returns {id: group score}."""
    out = {}
    for i in range(n):
        if i:
            clock.advance(step)
        info = await client.enqueue("t", f"g{i}".encode(), queue=queue, group=group, **opts)
        out[info.id] = clock.now_ms()
    return out


async def test_aggregation_check_on_empty_group(
    broker: RedisBroker, clock: FakeClock, redis_client: Redis, asyncq_queue: str
) -> None:
    qk = K.queue_keys(asyncq_queue)
    await redis_client.sadd(qk.groups, "g")  # a stale group name
    assert await broker.aggregation_check(asyncq_queue, "g", "s1", 60_000, 0, 5,
                                          clock.now_ms() + 120_000) == 0
    assert await smembers(redis_client, qk.groups) == set()
    assert await redis_client.exists(qk.aggregation_sets, qk.group("g") + ":s1") == 0


async def test_aggregation_check_takes_the_whole_group_at_max_size(
    broker: RedisBroker, client: Client, clock: FakeClock, redis_client: Redis,
    asyncq_queue: str
) -> None:
    members = await add_group_tasks(client, clock, asyncq_queue, "g", 5)
    qk = K.queue_keys(asyncq_queue)
    deadline = clock.now_ms() + 120_000
    assert await broker.aggregation_check(asyncq_queue, "g", "s1", 60_000, 0, 5,
                                          deadline) == 5
    set_key = qk.group("g") + ":s1"
    assert await zmembers(redis_client, set_key) == members  # group scores are kept
    assert await redis_client.exists(qk.group("g")) == 0
    assert await smembers(redis_client, qk.groups) == set()
    assert await zmembers(redis_client, qk.aggregation_sets) == {set_key: deadline}
    raws = await broker.read_aggregation_set(asyncq_queue, "g", "s1")
    assert [r.id for r in raws] == list(members)
    assert [r.payload for r in raws] == [f"g{i}".encode() for i in range(5)]


async def test_aggregation_check_takes_the_oldest_when_over_max_size(
    broker: RedisBroker, client: Client, clock: FakeClock, redis_client: Redis,
    asyncq_queue: str
) -> None:
    members = await add_group_tasks(client, clock, asyncq_queue, "g", 5)
    ids = list(members)
    qk = K.queue_keys(asyncq_queue)
    assert await broker.aggregation_check(asyncq_queue, "g", "s1", 60_000, 0, 3,
                                          clock.now_ms() + 120_000) == 3
    assert list(await zmembers(redis_client, qk.group("g") + ":s1")) == ids[:3]
    assert list(await zmembers(redis_client, qk.group("g"))) == ids[3:]
    assert await smembers(redis_client, qk.groups) == {"g"}


@pytest.mark.parametrize(
    ("advance", "grace_ms", "max_delay_ms", "max_size", "taken"),
    [
        # Tasks joined at t0, t0+10 s, t0+20 s; the check runs `advance` s after the last.
        (0, 60_000, 0, 0, 0),  # fresh, no size limit: wait
        (0, 60_000, 0, 10, 0),  # fresh, below max size: wait
        (0, 60_000, 0, 2, 2),  # over max size: the 2 oldest go at once, grace or not
        (59, 60_000, 0, 0, 0),  # newest 59 s old (< grace): wait
        (60, 60_000, 0, 0, 3),  # newest exactly the grace period old: go
        (61, 60_000, 0, 5, 3),  # past grace, under max size: the whole group
        (40, 60_000, 0, 0, 0),  # oldest 60 s old, but max delay 0 means none: grace only
        (40, 60_000, 60_000, 0, 3),  # oldest reached the max delay although newest is fresh
        (30, 60_000, 60_000, 0, 0),  # oldest 50 s old: below max delay and grace
    ],
)
async def test_aggregation_check_grace_and_max_delay(
    broker: RedisBroker, client: Client, clock: FakeClock, redis_client: Redis,
    asyncq_queue: str, advance: float, grace_ms: int, max_delay_ms: int, max_size: int,
    taken: int
) -> None:
    members = await add_group_tasks(client, clock, asyncq_queue, "g", 3, step=10)
    clock.advance(advance)
    qk = K.queue_keys(asyncq_queue)
    got = await broker.aggregation_check(asyncq_queue, "g", "s1", grace_ms, max_delay_ms,
                                         max_size, clock.now_ms() + 120_000)
    assert got == taken
    assert list(await zmembers(redis_client, qk.group("g") + ":s1")) == list(members)[:taken]
    assert await redis_client.zcard(qk.group("g")) == 3 - taken
    assert (await redis_client.exists(qk.aggregation_sets)) == (1 if taken else 0)


async def test_read_aggregation_set_skips_tasks_that_are_gone(
    broker: RedisBroker, client: Client, clock: FakeClock, redis_client: Redis,
    asyncq_queue: str
) -> None:
    ids = list(await add_group_tasks(client, clock, asyncq_queue, "g", 3))
    await broker.aggregation_check(asyncq_queue, "g", "s1", 0, 0, 0, clock.now_ms() + 1)
    await redis_client.delete(K.queue_keys(asyncq_queue).task(ids[1]))
    raws = await broker.read_aggregation_set(asyncq_queue, "g", "s1")
    assert [r.id for r in raws] == [ids[0], ids[2]]


async def test_delete_aggregation_set(
    broker: RedisBroker, client: Client, clock: FakeClock, redis_client: Redis,
    asyncq_queue: str
) -> None:
    qk = K.queue_keys(asyncq_queue)
    first = list(await add_group_tasks(client, clock, asyncq_queue, "g", 2, unique=600))
    assert await broker.aggregation_check(asyncq_queue, "g", "s1", 0, 0, 0,
                                          clock.now_ms() + 1) == 2
    second = list(await add_group_tasks(client, clock, asyncq_queue, "g", 1))
    assert await broker.aggregation_check(asyncq_queue, "g", "s2", 0, 0, 0,
                                          clock.now_ms() + 1) == 1

    assert await broker.delete_aggregation_set(asyncq_queue, "g", "s1") == 2
    assert await redis_client.exists(qk.group("g") + ":s1") == 0
    for task_id in first:
        assert await task_hash(redis_client, asyncq_queue, task_id) == {}
    for payload in (b"g0", b"g1"):  # their uniqueness locks are released
        assert await redis_client.exists(qk.unique("t", payload)) == 0
    assert list(await zmembers(redis_client, qk.aggregation_sets)) == [qk.group("g") + ":s2"]
    assert list(await zmembers(redis_client, qk.group("g") + ":s2")) == second
    assert await task_hash(redis_client, asyncq_queue, second[0]) != {}


async def test_reclaim_stale_aggregation_sets(
    broker: RedisBroker, client: Client, clock: FakeClock, redis_client: Redis,
    asyncq_queue: str
) -> None:
    qk = K.queue_keys(asyncq_queue)
    stale = await add_group_tasks(client, clock, asyncq_queue, "g:x", 2)  # ':' in the name
    assert await broker.aggregation_check(asyncq_queue, "g:x", "s1", 0, 0, 0,
                                          clock.now_ms() + 60_000) == 2
    fresh = await add_group_tasks(client, clock, asyncq_queue, "h", 1)
    assert await broker.aggregation_check(asyncq_queue, "h", "s2", 0, 0, 0,
                                          clock.now_ms() + 600_000) == 1
    assert await smembers(redis_client, qk.groups) == set()

    assert await broker.reclaim_stale_aggregation_sets(asyncq_queue) == 0
    clock.advance(60)
    assert await broker.reclaim_stale_aggregation_sets(asyncq_queue) == 1
    assert await zmembers(redis_client, qk.group("g:x")) == stale
    assert await redis_client.exists(qk.group("g:x") + ":s1") == 0
    assert await smembers(redis_client, qk.groups) == {"g:x"}
    assert list(await zmembers(redis_client, qk.aggregation_sets)) == [qk.group("h") + ":s2"]
    assert await zmembers(redis_client, qk.group("h") + ":s2") == fresh
    assert await broker.list_groups(asyncq_queue) == ["g:x"]


async def test_list_groups(broker: RedisBroker, client: Client, asyncq_queue: str) -> None:
    assert await broker.list_groups(asyncq_queue) == []
    for group in ("b", "a", "c", "a"):
        await client.enqueue("t", queue=asyncq_queue, group=group)
    assert await broker.list_groups(asyncq_queue) == ["a", "b", "c"]


# ------------------------------------------------------------------ a whole life


async def test_a_task_through_its_whole_life(
    broker: RedisBroker, client: Client, clock: FakeClock, redis_client: Redis,
    asyncq_queue: str
) -> None:
    info = await client.enqueue(Task("report", {"id": 1}, queue=asyncq_queue, retention=60,
                                     max_retry=3, headers={"h": "v"}, process_in=5))
    assert isinstance(info, TaskInfo)
    clock.advance(5)
    assert (await broker.forward(asyncq_queue, "scheduled", 100))[0] == 1
    [raw] = (await broker.dequeue(asyncq_queue, 1, OWNER, LEASE_MS, WAITER_TTL_MS))[0]
    assert orjson.loads(raw.payload) == {"id": 1}
    assert msg_doc({"msg": raw.msg})["headers"] == {"h": "v"}
    await broker.write_result(asyncq_queue, info.id, b"partial")
    assert await finish1(broker, Outcome("retry", asyncq_queue, info.id,
                                         retry_at_ms=clock.now_ms() + 1000, error="e1"))
    clock.advance(1)
    assert (await broker.forward(asyncq_queue, "retry", 100))[0] == 1
    [raw] = (await broker.dequeue(asyncq_queue, 1, OWNER, LEASE_MS, WAITER_TTL_MS))[0]
    assert raw.retried == 1
    assert await finish1(broker, Outcome("complete", asyncq_queue, info.id,
                                         retention_ms=60_000, result=b"final"))
    fields = await task_hash(redis_client, asyncq_queue, info.id)
    assert (fields["state"], fields["result"], fields["retried"]) == (
        b"completed", b"final", b"1")
    clock.advance(60)
    assert await broker.delete_expired_completed(asyncq_queue, 100) == 1
    qk = K.queue_keys(asyncq_queue)
    remaining = {k.decode() async for k in redis_client.scan_iter(match=qk.base + "*")}
    day = K.day_string(clock.now_ms())
    assert remaining == {qk.processed, qk.failed, qk.processed_day(day), qk.failed_day(day),
                         qk.registered}


@pytest.mark.anyio
async def test_store_many_batches_keep_input_order_and_per_item_codes(
    asyncq_redis_url: str, asyncq_queue: str, redis_client: Any
) -> None:
    """Runs of ready tasks share one script call, yet each item gets its own code in order,
    a repeated id keeps the first payload, and a scheduled task in the middle splits the run."""
    async with asyncq.Client(asyncq_redis_url) as client:
        tasks = [asyncq.Task("t", {"n": n}, queue=asyncq_queue, task_id=f"id{n}")
                 for n in range(600)]
        tasks.insert(300, asyncq.Task("t", {"n": "dup"}, queue=asyncq_queue, task_id="id5"))
        tasks.insert(10, asyncq.Task("t", {"n": "later"}, queue=asyncq_queue,
                                     task_id="sched", process_in=3600))
        results = await client.enqueue_many(tasks)
    assert isinstance(results[301], asyncq.TaskIDConflictError)
    assert results[10].state is asyncq.TaskState.SCHEDULED  # type: ignore[union-attr]
    ok = [r for r in results if isinstance(r, asyncq.TaskInfo)]
    assert len(ok) == 601
    pending = await redis_client.lrange(f"asyncq:{{{asyncq_queue}}}:pending", 0, -1)
    assert [p.decode() for p in reversed(pending)] == [f"id{n}" for n in range(600)]
    payload = await redis_client.hget(f"asyncq:{{{asyncq_queue}}}:t:id5", "payload")
    assert payload == b'{"n":5}'
