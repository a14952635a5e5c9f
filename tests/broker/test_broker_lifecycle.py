"""A task's whole life through the broker's scripts."""

from __future__ import annotations

from typing import Any

import orjson
import pytest
from broker_helpers import (
    LEASE_MS,
    OWNER,
    WAITER_TTL_MS,
    finish1,
)
from redis.asyncio import Redis

import asyncq
from asyncq import Client, FakeClock, Task, TaskInfo
from asyncq._broker import Outcome, RedisBroker
from asyncq._broker import _keys as K
from tests.helpers.dataplane import (
    task_hash,
)

pytestmark = pytest.mark.anyio


# ------------------------------------------------------------------ a whole life


async def test_a_task_through_its_whole_life(
    broker: RedisBroker, client: Client, clock: FakeClock, redis_client: Redis,
    asyncq_queue: str
) -> None:
    info = await client.enqueue(Task("report", {"id": 1}, queue=asyncq_queue, retention=60,
                                     max_retry=3, headers={"h": "v"}, process_in=5))
    assert isinstance(info, TaskInfo)
    clock.advance(5)
    assert (await broker.maintenance.forward(asyncq_queue, "scheduled", 100))[0] == 1
    [raw] = (await broker.dequeue(asyncq_queue, 1, OWNER, LEASE_MS, WAITER_TTL_MS))[0]
    assert orjson.loads(raw.payload) == {"id": 1}
    assert raw.msg.headers == {"h": "v"}
    await broker.write_result(asyncq_queue, info.id, b"partial")
    assert await finish1(broker, Outcome("retry", asyncq_queue, info.id,
                                         retry_at_ms=clock.now_ms() + 1000, error="e1"))
    clock.advance(1)
    assert (await broker.maintenance.forward(asyncq_queue, "retry", 100))[0] == 1
    [raw] = (await broker.dequeue(asyncq_queue, 1, OWNER, LEASE_MS, WAITER_TTL_MS))[0]
    assert raw.retried == 1
    assert await finish1(broker, Outcome("complete", asyncq_queue, info.id,
                                         retention_ms=60_000, result=b"final"))
    fields = await task_hash(redis_client, asyncq_queue, info.id)
    assert (fields["state"], fields["result"], fields["retried"]) == (
        b"completed", b"final", b"1")
    clock.advance(60)
    assert await broker.maintenance.delete_expired_completed(asyncq_queue, 100) == 1
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
