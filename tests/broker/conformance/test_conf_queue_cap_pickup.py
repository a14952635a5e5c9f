"""Pickup of a queue with a concurrency cap, in both layouts: the dequeue script reads the cap
in the step that leases and marks what it returns (the worker claims a slot for those tasks
only), the owner does not register as idle there, and a one-hop hand-off never bypasses the
claim (the queue's idle workers are woken instead). A queue without a cap is picked up as
before: no claim, hand-offs included."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import TypeVar

import anyio
import pytest
from broker_helpers import LEASE_MS, OWNER, WAITER_TTL_MS

from asyncq import Client, FakeClock, Inspector
from asyncq._broker import Broker
from asyncq._broker._messages import Handoff, QueueWake

pytestmark = pytest.mark.anyio

ON_CLUSTER = True

T = TypeVar("T")


async def next_item(items: AsyncIterator[T], timeout: float = 5.0) -> T:
    with anyio.fail_after(timeout):
        return await anext(items)


async def test_a_capped_queue_is_dequeued_marked_and_never_handed_off(
    broker: Broker, clock: FakeClock, asyncq_queue: str,
) -> None:
    q = asyncq_queue
    client = Client(broker, clock=clock)
    inspector = Inspector(broker)
    handoffs = broker.listen_handoffs([q], OWNER)
    signals = broker.listen_signals([q])
    try:
        assert await next_item(handoffs) is None and await next_item(signals) is None
        # No cap: leased unmarked; an idle owner is handed the next task in one hop.
        first = await client.enqueue("t", queue=q)
        raws, _ = await broker.dequeue(q, 2, OWNER, LEASE_MS, WAITER_TTL_MS, one_hop=True)
        assert [(r.id, r.capped) for r in raws] == [(first.id, False)]
        handed_task = await client.enqueue("t", queue=q)
        handed = await next_item(handoffs)
        assert isinstance(handed, Handoff) and handed.task.id == handed_task.id
        assert not handed.task.capped

        # A cap set now: the idle registration left from before is not used; the wake-up
        # brings a dequeue, whose tasks are marked to claim a slot.
        assert await broker.dequeue(q, 2, OWNER, LEASE_MS, WAITER_TTL_MS,
                                    one_hop=True) == ([], 0)  # idle again: registered
        await inspector.set_queue_concurrency(q, 1)
        capped = await client.enqueue("t", queue=q)
        assert await next_item(signals) == QueueWake(q)
        raws, _ = await broker.dequeue(q, 2, OWNER, LEASE_MS, WAITER_TTL_MS, one_hop=True)
        assert [(r.id, r.capped) for r in raws] == [(capped.id, True)]
        # That dequeue did not register the owner as idle: the next task is not handed off.
        late = await client.enqueue("t", queue=q)
        assert await next_item(signals) == QueueWake(q)
        raws, _ = await broker.dequeue(q, 2, OWNER, LEASE_MS, WAITER_TTL_MS, one_hop=True)
        assert [(r.id, r.capped) for r in raws] == [(late.id, True)]

        # Cleared: unmarked again, and hand-offs resume after the next idle dequeue.
        await inspector.clear_queue_concurrency(q)
        assert await broker.dequeue(q, 2, OWNER, LEASE_MS, WAITER_TTL_MS,
                                    one_hop=True) == ([], 0)
        again = await client.enqueue("t", queue=q)
        handed = await next_item(handoffs)
        assert isinstance(handed, Handoff) and handed.task.id == again.id
    finally:
        await handoffs.aclose()  # type: ignore[attr-defined]
        await signals.aclose()  # type: ignore[attr-defined]
