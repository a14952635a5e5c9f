"""Announcing new queues: the first task stored in a queue (or a worker registering its
queues) announces the queue once; a listener asking for it hears ``QueuesAdded``, one not
asking subscribes to nothing more."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import TypeVar

import anyio
import pytest
from redis.asyncio import Redis

from asyncq import Client, Inspector, Task
from asyncq._broker import CancelRequest, QueuesAdded
from asyncq._broker import _keys as K
from asyncq._broker._connection import make_broker

pytestmark = pytest.mark.anyio
T = TypeVar("T")


async def next_item(items: AsyncIterator[T], timeout: float = 5.0) -> T:
    with anyio.fail_after(timeout):
        return await anext(items)


async def test_a_queue_is_announced_once_when_it_is_first_registered(
    redis_client: Redis, asyncq_queue: str,
) -> None:
    broker = make_broker(redis_client)
    client = Client(broker)
    signals = broker.listen_signals([], new_queues=True)
    a, b, c = (f"{asyncq_queue}:{n}" for n in "abc")
    try:
        assert await next_item(signals) is None  # subscribed
        await client.enqueue("t", queue=a)
        assert await next_item(signals) == QueuesAdded((a,))
        await client.enqueue("t", queue=a)  # known: nothing announced
        await client.enqueue_many([Task("t", queue=q) for q in (b, c, a)])
        assert await next_item(signals) == QueuesAdded((b, c))
        await broker.register_queues([a, b])  # (a worker registering its queues)
        await client.enqueue("t", queue=c, process_in=60)
        async with Inspector(broker) as inspector:
            await inspector.delete_queue(c, force=True)
        await client.enqueue("t", queue=c, process_in=60)  # a removed queue, created again
        assert await next_item(signals) == QueuesAdded((c,))
        await broker.publish_cancel("x")  # (nothing else was announced before this)
        assert await next_item(signals) == CancelRequest("x")
    finally:
        await signals.aclose()
        await broker.close()


async def test_a_listener_not_asking_for_new_queues_does_not_hear_them(
    redis_client: Redis, asyncq_queue: str,
) -> None:
    broker = make_broker(redis_client)
    signals = broker.listen_signals([asyncq_queue])
    try:
        assert await next_item(signals) is None
        await Client(broker).enqueue("t", queue=f"{asyncq_queue}:new")
        await broker.publish_cancel("x")
        assert await next_item(signals) == CancelRequest("x")
        # One connection, two channels (cancel, wake): nothing subscribed for announcements.
        channels = {c.decode() for c in await redis_client.pubsub_channels("asyncq:*")}
        assert K.NEW_QUEUES_CHANNEL not in channels
    finally:
        await signals.aclose()
        await broker.close()
