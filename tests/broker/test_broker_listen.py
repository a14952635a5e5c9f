"""What a broker's listeners yield is typed and decoded: cancel requests and wake-ups of the
worker's queues, task events (undecodable ones skipped), hand-offs; the wire format stays in
the broker."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import TypeVar

import anyio
import pytest
from redis.asyncio import Redis

from asyncq import Client, TaskEvent, TaskState
from asyncq._broker import CancelRequest, QueueWake
from asyncq._broker import _keys as K
from asyncq._broker._connection import make_broker

pytestmark = pytest.mark.anyio
T = TypeVar("T")


async def next_item(items: AsyncIterator[T], timeout: float = 5.0) -> T:
    with anyio.fail_after(timeout):
        return await anext(items)


async def test_signals_are_cancel_requests_and_wake_ups_of_the_queues_asked_for(
    redis_client: Redis, asyncq_queue: str,
) -> None:
    broker = make_broker(redis_client)
    signals = broker.listen_signals([asyncq_queue])
    try:
        assert await next_item(signals) is None  # subscribed
        await broker.publish_cancel("task-1")
        assert await next_item(signals) == CancelRequest("task-1")
        for message in ("someone-elses-queue", "someone-elses-queue@12",
                        f"{asyncq_queue}@soon", asyncq_queue, f"{asyncq_queue}@1234"):
            await redis_client.publish(K.WAKE_CHANNEL, message)
        assert await next_item(signals) == QueueWake(asyncq_queue)
        assert await next_item(signals) == QueueWake(asyncq_queue, 1234)
    finally:
        await signals.aclose()  # type: ignore[attr-defined]
        await broker.close()


async def test_events_come_decoded_and_an_undecodable_one_is_skipped(
    redis_client: Redis, asyncq_queue: str,
) -> None:
    broker = make_broker(redis_client)
    events = broker.listen_events([asyncq_queue])
    try:
        flush = await next_item(events)
        assert callable(flush) and not isinstance(flush, TaskEvent)
        await broker.set_listening([asyncq_queue], 10_000)
        await redis_client.execute_command("SPUBLISH", K.queue_keys(asyncq_queue).events,
                                           b"not json")
        info = await Client(broker).enqueue("t", queue=asyncq_queue)
        event = await next_item(events)
        assert isinstance(event, TaskEvent)
        assert (event.id, event.queue, event.state) == (info.id, asyncq_queue,
                                                        TaskState.PENDING)
    finally:
        await events.aclose()  # type: ignore[attr-defined]
        await broker.close()
