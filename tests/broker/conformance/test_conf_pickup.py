"""How an idle worker is given work on every broker: an owner left with free slots by a
one-hop dequeue is handed the next task, leased to it as a dequeue would lease it; without
an idle registration, the waiters flag of an empty dequeue brings a wake-up (an enqueue, a
requeue)."""

from __future__ import annotations

import asyncio

import pytest

from asyncq import Client
from asyncq._broker import Broker, Outcome, QueueWake
from tests.broker.broker_helpers import hearing

pytestmark = pytest.mark.anyio

ON_CLUSTER = True

OWNER = "srv-p"
LEASE_MS = 30_000




async def test_a_hand_off_leases_the_task_as_a_dequeue_would(
        broker: Broker, client: Client, asyncq_queue: str) -> None:
    q = asyncq_queue
    assert await broker.dequeue(q, 4, OWNER, LEASE_MS, 5000, one_hop=True) == ([], 0)
    async with hearing(broker.listen_handoffs([q], OWNER)) as handoffs:
        info = await client.enqueue("t", b"\x00body", queue=q, max_retry=3)
        handoff = await asyncio.wait_for(anext(handoffs), 5)
    assert (handoff.queue, handoff.task.id, handoff.task.payload) == (q, info.id, b"\x00body")
    assert handoff.task.msg.max_retry == 3
    # The lease is the owner's as after a dequeue: extended, then finished.
    assert await broker.extend_leases(q, [info.id], OWNER, LEASE_MS) == [1]
    assert await broker.finish([Outcome("done", q, info.id)], OWNER) == [True]


async def test_without_a_registration_the_waiters_flag_brings_a_wake_up(
        broker: Broker, client: Client, asyncq_queue: str) -> None:
    q = asyncq_queue
    async with hearing(broker.listen_signals([q, "other"])) as signals:
        assert await broker.dequeue(q, 1, OWNER, LEASE_MS, 5000) == ([], 0)
        await client.enqueue("t", queue=q)
        assert await asyncio.wait_for(anext(signals), 5) == QueueWake(q)
        # A requeue wakes too (the flag set again by a dequeue that left slots free).
        [raw], _ = await broker.dequeue(q, 2, OWNER, LEASE_MS, 5000)
        assert await broker.finish([Outcome("requeue", q, raw.id)], OWNER) == [True]
        assert await asyncio.wait_for(anext(signals), 5) == QueueWake(q)
