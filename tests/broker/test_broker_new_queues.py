"""Announcing new queues in asyncq's layout: a listener not asking for them subscribes to
nothing more (what every broker announces: conformance/test_conf_signals.py)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import TypeVar

import anyio
import pytest
from redis.asyncio import Redis

from asyncq import Client
from asyncq._broker import CancelRequest
from asyncq._broker import _keys as K
from asyncq._broker._connection import make_broker

pytestmark = pytest.mark.anyio
T = TypeVar("T")


async def next_item(items: AsyncIterator[T], timeout: float = 5.0) -> T:
    with anyio.fail_after(timeout):
        return await anext(items)


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
