"""RedisBroker.store / store_many: what storing a task writes to Redis (items 78-81)."""

from __future__ import annotations

import pytest
from broker_helpers import (
    LEASE_MS,
    OWNER,
    WAITER_TTL_MS,
    new_task,
)
from redis.asyncio import Redis
from redis.exceptions import ResponseError

from asyncq import BrokerError, FakeClock
from asyncq._broker import Outcome, RedisBroker, UniqueLock
from asyncq._broker import _keys as K
from asyncq._broker._connection import make_broker
from tests.helpers.dataplane import (
    dead_redis_url,
    lmembers,
    next_event,
    smembers,
    task_hash,
    zmembers,
)

pytestmark = pytest.mark.anyio


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
    lock, lock2 = qk.unique("t", b"x"), qk.unique("t", b"y")  # (named by the broker from:)
    one, two = UniqueLock("t", b"x", None), UniqueLock("t", b"y", None)
    await broker.store(new_task(asyncq_queue, "a", now, unique=one, unique_ttl_ms=20_000))
    assert await redis_client.get(lock) == b"a"
    assert 15_000 < await redis_client.pttl(lock) <= 20_000
    assert (await task_hash(redis_client, asyncq_queue, "a"))["unique_key"] == lock.encode()
    # Same lock, new id: duplicate. Same id, another lock: id conflict, and no lock is taken
    # (the codes: conformance/test_conf_transitions.py).
    await broker.store(new_task(asyncq_queue, "b", now, unique=one, unique_ttl_ms=20_000))
    await broker.store(new_task(asyncq_queue, "a", now, unique=two, unique_ttl_ms=20_000))
    assert await redis_client.exists(lock2) == 0
    assert await task_hash(redis_client, asyncq_queue, "b") == {}
    assert await lmembers(redis_client, qk.pending) == ["a"]


async def test_store_many(
    broker: RedisBroker, clock: FakeClock, redis_client: Redis, asyncq_queue: str
) -> None:
    now = clock.now_ms()
    qk = K.queue_keys(asyncq_queue)
    await broker.store_many([
        new_task(asyncq_queue, "a", now),
        new_task(asyncq_queue, "b", now, process_at_ms=now + 5_000),
        new_task(asyncq_queue, "a", now),  # duplicate id inside the batch
        new_task(asyncq_queue, "c", now),
    ])
    assert await lmembers(redis_client, qk.pending) == ["c", "a"]
    assert await zmembers(redis_client, qk.scheduled) == {"b": now + 5_000}
    assert (await task_hash(redis_client, asyncq_queue, "b"))["state"] == b"scheduled"
    assert asyncq_queue in await smembers(redis_client, K.QUEUES)


async def test_scripts_are_reloaded_after_redis_lost_them(
    broker: RedisBroker, clock: FakeClock, redis_client: Redis, asyncq_queue: str
) -> None:
    """A restarted Redis has an empty script cache: NOSCRIPT must be handled, not surfaced
    (what each call returns: conformance/test_conf_redis.py)."""
    now = clock.now_ms()
    await broker.store(new_task(asyncq_queue, "warm", now))
    await redis_client.script_flush()
    await broker.store(new_task(asyncq_queue, "a", now))
    await redis_client.script_flush()
    await broker.store_many([new_task(asyncq_queue, f"m{i}", now) for i in range(3)])
    await redis_client.script_flush()
    raws, _ = await broker.dequeue(asyncq_queue, 2, OWNER, LEASE_MS, WAITER_TTL_MS)
    await redis_client.script_flush()
    await broker.finish([Outcome("done", asyncq_queue, r.id) for r in raws], OWNER)
    assert await redis_client.llen(K.queue_keys(asyncq_queue).pending) == 3


async def test_store_many_keeps_batch_order_when_some_scripts_are_not_cached(
    broker: RedisBroker, clock: FakeClock, redis_client: Redis, asyncq_queue: str
) -> None:
    """The first of two items with one id wins, even if only the second's script was cached
    (Redis restarted, then one enqueue ran before the batch)."""
    now = clock.now_ms()
    await redis_client.script_flush()  # (the codes: conformance/test_conf_redis.py)
    await broker.store(new_task(asyncq_queue, "warm", now))  # caches "enqueue"
    await broker.store_many([
        new_task(asyncq_queue, "x", now, process_at_ms=now + 60_000),  # "schedule": not cached
        new_task(asyncq_queue, "x", now),
    ])
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
    """(The transitions' errors: conformance/test_conf_redis.py.)"""
    broker = make_broker(dead_redis_url(), clock=clock)
    try:
        events = broker.listen([K.CANCEL_CHANNEL])
        try:
            with pytest.raises(BrokerError):
                await next_event(events)
        finally:
            await events.aclose()
    finally:
        await broker.close()


