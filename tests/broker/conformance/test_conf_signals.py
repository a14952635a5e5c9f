"""What a worker hears besides hand-offs, on every broker: the first task stored in a queue
(or a worker registering its queues) announces the queue once, to a listener asking for new
queues (``QueuesAdded``), and cancel requests come as ``CancelRequest``."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import TypeVar

import anyio
import pytest

from asyncq import Client, Inspector, Task
from asyncq._broker import Broker, CancelRequest, QueuesAdded

pytestmark = pytest.mark.anyio
T = TypeVar("T")

ON_CLUSTER = True


async def next_item(items: AsyncIterator[T], timeout: float = 5.0) -> T:
    with anyio.fail_after(timeout):
        return await anext(items)


async def test_a_queue_is_announced_once_when_it_is_first_registered(
    broker: Broker, client: Client, asyncq_queue: str,
) -> None:
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
        await signals.aclose()  # type: ignore[attr-defined]
