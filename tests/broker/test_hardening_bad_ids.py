"""Issue 12 item D: a task record whose id is not UTF-8 (written by another producer or by hand)
never blocks its queue. The dequeue reply, the recoverer and the janitor quarantine it: the
record is archived under a readable id with the reason, and the good tasks around it run."""

from __future__ import annotations

import pytest
from redis.asyncio import Redis

from asyncq import Client, ServeMux, Task
from asyncq._broker import RedisBroker
from asyncq._broker import _keys as K
from asyncq._broker._connection import make_broker
from asyncq.testing import WorkerFactory, queue_counts, wait_until

pytestmark = pytest.mark.anyio

BAD = b"bad-\xff\xfe"
NEW_ID = f"invalid-id:{BAD.hex()}"


async def plant(redis: Redis, queue: str, where: str, *, lease_ms: int = 0) -> bytes:
    """A hand-written record under the id BAD, placed in ``where`` (or nowhere)."""
    qk = K.queue_keys(queue)
    key = qk.task_prefix.encode() + BAD
    await redis.hset(key, mapping={"msg": b"{}", "payload": b"", "state": where or "pending"})
    if where == "pending":
        await redis.rpush(qk.pending, BAD)  # dequeued first (pending pops from the right)
    elif where == "active":
        await redis.hset(key, "owner", "gone-worker")
        await redis.lpush(qk.active, BAD)
        await redis.zadd(qk.lease, {BAD: lease_ms})
    return key


async def assert_quarantined(redis: Redis, queue: str, old_key: bytes) -> None:
    qk = K.queue_keys(queue)
    assert not await redis.exists(old_key)
    state, error = await redis.hmget(qk.task(NEW_ID), "state", "error")
    assert state == b"archived"
    assert b"not UTF-8" in error and NEW_ID.encode() in error
    assert await redis.zscore(qk.archived, NEW_ID) is not None
    counts = await queue_counts(redis, queue)
    assert counts["pending"] == counts["active"] == 0


async def test_bad_id_in_a_dequeue_batch_is_quarantined_and_the_batch_runs(
    redis_client: Redis, asyncq_worker: WorkerFactory, asyncq_client: Client, asyncq_queue: str,
) -> None:
    q = asyncq_queue
    for i in range(10):
        await asyncq_client.enqueue(Task("good", {"n": i}, queue=q))
    key = await plant(redis_client, q, "pending")
    ran: list[int] = []
    mux = ServeMux()

    async def good(task: Task) -> None:
        ran.append(task.json()["n"])
    mux.handle("good", good)

    async with asyncq_worker(mux, queues={q: 1}, dequeue_batch=20) as w:
        await w.wait_drained(q)
    assert sorted(ran) == list(range(10))
    await assert_quarantined(redis_client, q, key)


async def test_recoverer_quarantines_a_bad_id_whose_lease_expired(
    redis_client: Redis, asyncq_redis_url: str, asyncq_queue: str,
) -> None:
    q = asyncq_queue
    key = await plant(redis_client, q, "active", lease_ms=1)
    broker = make_broker(asyncq_redis_url)
    assert isinstance(broker, RedisBroker)
    try:
        assert await broker.maintenance.list_lease_expired(q, 10**13, 100) == []
    finally:
        await broker.close()
    await assert_quarantined(redis_client, q, key)


async def test_janitor_quarantines_an_orphaned_bad_id(
    redis_client: Redis, asyncq_worker: WorkerFactory, asyncq_queue: str,
) -> None:
    q = asyncq_queue
    key = await plant(redis_client, q, "")
    async with asyncq_worker(ServeMux(), queues={q: 1}, janitor_interval=0.05,
                             orphan_scan_count=10_000):
        await wait_until(lambda: redis_client.exists(K.queue_keys(q).task(NEW_ID)),
                         message="orphan quarantined")
    await assert_quarantined(redis_client, q, key)
