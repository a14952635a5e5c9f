"""Issue 12 item 9: a queue's registration survives ``delete_queue`` while a long-lived Client
keeps enqueueing to it. Every store script sets an in-slot marker of its queue and says when
it was missing; the client then registers the queue (the registry is in another slot). What
every broker does: conformance/test_conf_queue_registry.py; here, asyncq's marker and the
scheduler."""

from __future__ import annotations

import pytest
from redis.asyncio import Redis

from asyncq import Client, Inspector, Scheduler, Task
from asyncq._broker import _keys as K
from asyncq._broker._connection import make_broker
from asyncq.testing import wait_until

pytestmark = pytest.mark.anyio


async def test_a_task_stored_during_delete_queue_keeps_its_queue_registered(
    asyncq_redis_url: str, asyncq_queue: str, redis_client: Redis,
) -> None:
    """The race: the queue's keys are removed, a producer stores a task (and registers the
    queue), then delete_queue drops the queue from the registry: it must register it back."""
    q = asyncq_queue
    broker = make_broker(asyncq_redis_url)
    try:
        async with Client(broker=broker) as client:
            await client.enqueue(Task("t", queue=q))
            await client.enqueue(Task("t", queue=q))
            assert await broker.inspect.bulk("delete", q, "pending") == (2, 0)
            code, _, _ = await broker.inspect.remove_queue(q, "remove", [])
            assert code == 1
            assert not await redis_client.exists(K.queue_keys(q).registered)
            await client.enqueue(Task("t", queue=q))  # between the removal and the SREM
            await broker.inspect.unregister_queue(q)
            assert q in await broker.inspect.queue_names()
    finally:
        await broker.close()


async def test_scheduler_registers_a_deleted_queue_again(
    asyncq_redis_url: str, asyncq_queue: str,
) -> None:
    q = asyncq_queue
    async with Inspector(asyncq_redis_url) as inspector:
        scheduler = Scheduler(asyncq_redis_url)
        scheduler.register("@every 1s", Task("tick", queue=q))
        async with scheduler:
            await wait_until(lambda: _has(inspector, q), timeout=30, message="first tick")
            await inspector.delete_queue(q, force=True)
            await wait_until(lambda: _has(inspector, q), timeout=30, message="next tick")


async def _has(inspector: Inspector, queue: str) -> bool:
    return queue in await inspector.queues() and (await inspector.queue_info(queue)).pending > 0
