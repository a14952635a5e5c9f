"""Leases, server state, pub/sub and stored results (items 96-101)."""

from __future__ import annotations

import uuid
from dataclasses import replace

import pytest
from broker_helpers import (
    LEASE_MS,
    OTHER,
    OWNER,
    enqueue,
    finish1,
    lease,
)
from redis.asyncio import Redis

from asyncq import Client, FakeClock
from asyncq._broker import Outcome, RedisBroker, RunningTaskRecord, WorkerRecord
from asyncq._broker import _keys as K
from asyncq._broker._records import decode_running, decode_server
from tests.helpers.dataplane import (
    lmembers,
    next_event,
    task_hash,
    zmembers,
)

pytestmark = pytest.mark.anyio


# ------------------------------------------------------------------ 96, 97: leases


async def test_list_lease_expired_respects_the_cutoff(
    broker: RedisBroker, client: Client, clock: FakeClock, asyncq_queue: str
) -> None:
    t0 = clock.now_ms()
    [a] = await lease(broker, client, asyncq_queue)
    clock.advance(10)
    [b] = await lease(broker, client, asyncq_queue)
    assert await broker.maintenance.list_lease_expired(asyncq_queue, t0 + LEASE_MS - 1, 100) == []
    expired = await broker.maintenance.list_lease_expired(asyncq_queue, t0 + LEASE_MS, 100)
    assert [r.id for r in expired] == [a]
    assert expired[0].payload == b"p0"
    assert expired[0].retried == 0
    assert expired[0].msg.id == a
    both = await broker.maintenance.list_lease_expired(asyncq_queue, t0 + LEASE_MS + 10_000, 100)
    assert [r.id for r in both] == [a, b]
    assert [r.id for r in await broker.maintenance.list_lease_expired(
        asyncq_queue, t0 + LEASE_MS + 10_000, 1)] == [a]


async def test_list_lease_expired_repairs_entries_without_a_task(
    broker: RedisBroker, clock: FakeClock, redis_client: Redis, asyncq_queue: str
) -> None:
    qk = K.queue_keys(asyncq_queue)
    await redis_client.zadd(qk.lease, {"ghost": clock.now_ms() - 1})
    await redis_client.lpush(qk.active, "ghost")
    assert await broker.maintenance.list_lease_expired(asyncq_queue, clock.now_ms(), 100) == []
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
    assert await broker.maintenance.list_lease_expired(asyncq_queue, clock.now_ms(), 2) == []
    assert await broker.maintenance.list_lease_expired(asyncq_queue, clock.now_ms(), 2) == []
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
    # (what the calls return: conformance/test_conf_transitions.py)
    await broker.maintenance.recover(Outcome("retry", asyncq_queue, a, retry_at_ms=clock.now_ms(),
                                             error="lease expired"), cutoff)
    await broker.maintenance.recover(Outcome("archive", asyncq_queue, b, error="lease expired"),
                                     cutoff)
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
    # The worker renews its lease between the listing and the recovery (what the calls
    # return: conformance/test_conf_transitions.py).
    await broker.extend_leases(asyncq_queue, [task_id], OWNER, LEASE_MS)
    before = await task_hash(redis_client, asyncq_queue, task_id)
    for outcome in (Outcome("retry", asyncq_queue, task_id, retry_at_ms=1, error="x"),
                    Outcome("archive", asyncq_queue, task_id, error="x")):
        await broker.maintenance.recover(outcome, cutoff)
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
    assert flags == [True, True, False, False, False]  # (mine2 too: its entry is rebuilt)
    new_expiry = clock.now_ms() + LEASE_MS
    assert await zmembers(redis_client, qk.lease) == {
        mine1: new_expiry, mine2: new_expiry, theirs: t0 + LEASE_MS}


async def test_extend_lease_of_a_recovered_task_is_lost(
    broker: RedisBroker, client: Client, clock: FakeClock, redis_client: Redis,
    asyncq_queue: str
) -> None:
    [task_id] = await lease(broker, client, asyncq_queue)
    clock.advance(LEASE_MS / 1000 + 60)
    await broker.maintenance.recover(
        Outcome("retry", asyncq_queue, task_id, retry_at_ms=1, error="x"), clock.now_ms())
    await broker.extend_leases(asyncq_queue, [task_id], OWNER, LEASE_MS)  # (lost: conformance/)
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
    assert await broker.maintenance.reclaim_orphans(asyncq_queue, 100) == 1
    assert await zmembers(redis_client, qk.lease) == {
        orphan: clock.now_ms(), fine: t0 + LEASE_MS}
    assert await broker.maintenance.reclaim_orphans(asyncq_queue, 100) == 0
    # The orphan is now visible to the recoverer and can be recovered.
    expired = await broker.maintenance.list_lease_expired(asyncq_queue, clock.now_ms(), 100)
    assert [r.id for r in expired] == [orphan]
    assert await broker.maintenance.recover(
        Outcome("archive", asyncq_queue, orphan, error="orphan"), clock.now_ms()) is True


# ------------------------------------------------------------------ 98, 99: server state


async def test_write_and_clear_server_state(
    broker: RedisBroker, clock: FakeClock, redis_client: Redis
) -> None:
    sid, other = f"host:1:{uuid.uuid4()}", f"host:2:{uuid.uuid4()}"
    skey, wkey = K.server_key(sid), K.workers_key(sid)
    try:
        record = WorkerRecord(sid, "h", 1, 4, {"q": 1}, False, "active", 5)
        await broker.workers.write(record, 10_000)
        assert decode_server(await redis_client.get(skey) or b"") == record
        assert 8_000 < await redis_client.pttl(skey) <= 10_000
        assert await redis_client.zscore(K.SERVERS, skey) == clock.now_ms() + 10_000
        assert await redis_client.exists(wkey) == 0  # no workers: no hash

        t1, t2, t3 = (RunningTaskRecord(t, "t", "q", 1) for t in ("t1", "t2", "t3"))
        await broker.workers.write(replace(record, running=(t1, t2)), 10_000)
        assert {k: decode_running(v) for k, v in (await redis_client.hgetall(wkey)).items()} == {
            b"t1": t1, b"t2": t2}
        assert 8_000 < await redis_client.pttl(wkey) <= 10_000
        assert await redis_client.zscore(K.WORKERS, wkey) == clock.now_ms() + 10_000
        # Each write replaces the running set: finished tasks disappear.
        await broker.workers.write(replace(record, running=(t3,)), 10_000)
        assert list(await redis_client.hkeys(wkey)) == [b"t3"]

        await broker.workers.write(replace(record, server_id=other, running=(t1,)), 10_000)
        await broker.workers.clear(sid)
        assert await redis_client.exists(skey, wkey) == 0
        assert await redis_client.zscore(K.SERVERS, skey) is None
        assert await redis_client.zscore(K.WORKERS, wkey) is None
        assert await redis_client.exists(K.server_key(other), K.workers_key(other)) == 2
        assert await redis_client.zscore(K.SERVERS, K.server_key(other)) is not None
    finally:
        await broker.workers.clear(sid)
        await broker.workers.clear(other)


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
    data = bytes(range(256)) * 10  # (the lengths returned: conformance/)
    await broker.write_result(asyncq_queue, task_id, data)
    assert (await task_hash(redis_client, asyncq_queue, task_id))["result"] == data
    await broker.write_result(asyncq_queue, task_id, b"")
    assert (await task_hash(redis_client, asyncq_queue, task_id))["result"] == b""
    # A task that is gone is not recreated as a partial hash.
    await broker.write_result(asyncq_queue, "gone", b"data")
    assert await redis_client.exists(K.queue_keys(asyncq_queue).task("gone")) == 0


