"""RedisBroker.dequeue and the wake-ups of idle workers (items 82, 83)."""

from __future__ import annotations

import pytest
from broker_helpers import (
    LEASE_MS,
    OWNER,
    WAITER_TTL_MS,
    enqueue,
)
from redis.asyncio import Redis

from asyncq import Client, FakeClock
from asyncq._broker import RedisBroker
from asyncq._broker import _keys as K
from tests.helpers.dataplane import (
    lmembers,
    next_event,
    task_hash,
    zmembers,
)

pytestmark = pytest.mark.anyio


# ------------------------------------------------------------------ 82, 83: dequeue


async def test_dequeue_leases_a_batch_in_fifo_order(
    broker: RedisBroker, client: Client, clock: FakeClock, redis_client: Redis,
    asyncq_queue: str
) -> None:
    ids = [await enqueue(client, asyncq_queue, f"p{i}".encode()) for i in range(5)]
    qk = K.queue_keys(asyncq_queue)
    now = clock.now_ms()

    raws, _ = await broker.dequeue(asyncq_queue, 3, OWNER, LEASE_MS, WAITER_TTL_MS)
    first = raws[0]  # (what it returns: conformance/test_conf_transitions.py)
    stored = await task_hash(redis_client, asyncq_queue, ids[0])
    assert first.msg == stored["msg"]
    assert stored["state"] == b"active"
    assert stored["owner"] == OWNER.encode()
    assert "pending_since" not in stored
    assert set(await lmembers(redis_client, qk.active)) == set(ids[:3])
    assert await lmembers(redis_client, qk.pending) == ids[:2:-1]
    assert await zmembers(redis_client, qk.lease) == {i: now + LEASE_MS for i in ids[:3]}
    assert await redis_client.exists(qk.waiters) == 0  # got all it asked for

    await broker.dequeue(asyncq_queue, 5, OWNER, LEASE_MS, WAITER_TTL_MS)
    assert await redis_client.llen(qk.pending) == 0
    # Under-filled: the waiters flag tells the next enqueue to publish a wake-up.
    assert await redis_client.exists(qk.waiters) == 1
    assert 0 < await redis_client.pttl(qk.waiters) <= WAITER_TTL_MS


async def test_dequeue_empty_queue_changes_nothing_but_the_waiters_flag(
    broker: RedisBroker, redis_client: Redis, asyncq_queue: str
) -> None:
    await broker.dequeue(asyncq_queue, 4, OWNER, LEASE_MS, WAITER_TTL_MS)
    qk = K.queue_keys(asyncq_queue)
    names = {k.decode() async for k in redis_client.scan_iter(match=qk.base + "*")}
    assert names == {qk.waiters}


async def test_dequeue_skips_a_paused_queue(
    broker: RedisBroker, client: Client, clock: FakeClock, redis_client: Redis,
    asyncq_queue: str
) -> None:
    task_id = await enqueue(client, asyncq_queue)
    qk = K.queue_keys(asyncq_queue)
    await broker.pause(asyncq_queue)
    assert await redis_client.get(qk.paused) == str(clock.now_ms()).encode()
    await broker.dequeue(asyncq_queue, 1, OWNER, LEASE_MS, WAITER_TTL_MS)
    assert await lmembers(redis_client, qk.pending) == [task_id]
    assert await redis_client.llen(qk.active) == 0
    assert (await task_hash(redis_client, asyncq_queue, task_id))["state"] == b"pending"
    # (pausing and unpausing as every broker does: conformance/test_conf_transitions.py)


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


