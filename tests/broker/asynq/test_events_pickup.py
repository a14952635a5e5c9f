"""Pickup by idle asyncq workers in asynq's layout: a one-hop hand-off leases the task exactly
as a dequeue does, in the script that made it pending (a Go server never sees it half handed);
a hand-off nobody hears leaves the task pending for anyone, Go included; a lost hand-off
message is returned by the owner's next dequeue; without an idle registration, the waiters flag
brings a wake-up."""

from __future__ import annotations

import asyncio

import pytest
from redis.asyncio import Redis

from asyncq import Client
from asyncq._broker import Outcome
from asyncq._broker._asynq import _codec, _wake
from asyncq._broker._asynq import _keys as K
from asyncq._broker._asynq._broker import AsynqBroker
from tests.broker.broker_helpers import hearing

OWNER = "srv-p"
LEASE_MS = 30_000




async def fields(redis: Redis, queue: str, task_id: str) -> dict[str, bytes]:
    raw = await redis.hgetall(K.queue_keys(queue).task(task_id))
    return {k.decode(): v for k, v in raw.items()}


async def test_a_hand_off_leases_the_task_as_a_dequeue_would(
        abroker: AsynqBroker, aclient: Client, redis_client: Redis, asyncq_queue: str) -> None:
    """(What the owner is handed, and its lease: conformance/test_conf_pickup.py.)"""
    q = asyncq_queue
    qk = K.queue_keys(q)
    await abroker.dequeue(q, 4, OWNER, LEASE_MS, 5000, one_hop=True)
    async with hearing(abroker.listen_handoffs([q], OWNER)) as handoffs:
        info = await aclient.enqueue("t", b"\x00body", queue=q, max_retry=3)
        handoff = await asyncio.wait_for(anext(handoffs), 5)
    # What Go reads: active, in the active list, leased until the score, nothing pending.
    h = await fields(redis_client, q, info.id)
    assert h["state"] == b"active" and "pending_since" not in h
    assert h["owner"] == OWNER.encode()
    score = await redis_client.zscore(qk.lease, info.id)
    assert score == int(h["lease_until"]) and handoff.lease_until_ms == score * 1000
    assert await redis_client.lrange(qk.active, 0, -1) == [info.id.encode()]
    assert await redis_client.llen(qk.pending) == 0
    await abroker.finish([Outcome("done", q, info.id)], OWNER)
    # One hand-off per registration: the next task waits for a dequeue.
    later = await aclient.enqueue("t", queue=q)
    assert (await fields(redis_client, q, later.id))["state"] == b"pending"


async def test_a_hand_off_nobody_hears_leaves_the_task_pending(
        abroker: AsynqBroker, aclient: Client, redis_client: Redis, asyncq_queue: str) -> None:
    q = asyncq_queue
    await abroker.dequeue(q, 1, OWNER, LEASE_MS, 5000, one_hop=True)  # (nobody subscribed)
    info = await aclient.enqueue("t", queue=q)
    assert (await fields(redis_client, q, info.id))["state"] == b"pending"
    assert await redis_client.zcard(K.extra_keys(q).idle) == 0  # the registration dropped
    # A Go server's dequeue (RPOPLPUSH) would take it: it is the pending list's next.
    assert await redis_client.lindex(K.queue_keys(q).pending, -1) == info.id.encode()


async def test_a_lost_hand_off_message_comes_back_with_the_next_dequeue(
        abroker: AsynqBroker, aclient: Client, redis_client: Redis, asyncq_queue: str,
        monkeypatch: pytest.MonkeyPatch) -> None:
    q = asyncq_queue
    await abroker.dequeue(q, 1, OWNER, LEASE_MS, 5000, one_hop=True)
    async with hearing(abroker.listen_handoffs([q], OWNER)):
        info = await aclient.enqueue("t", b"p", queue=q)  # heard, then never read: lost
    assert (await fields(redis_client, q, info.id))["state"] == b"active"
    # Within the grace the message is trusted to arrive; after it, the dequeue returns it.
    assert await abroker.dequeue(q, 1, OWNER, LEASE_MS, 5000) == ([], 0)
    monkeypatch.setattr(_wake, "HANDOFF_GRACE_MS", 0)
    [raw], _ = await abroker.dequeue(q, 1, OWNER, LEASE_MS, 5000)
    assert (raw.id, raw.payload) == (info.id, b"p")
    assert await abroker.dequeue(q, 1, OWNER, LEASE_MS, 5000) == ([], 0)  # (once)


async def test_leave_idle_withdraws_the_registration(
        abroker: AsynqBroker, aclient: Client, redis_client: Redis, asyncq_queue: str) -> None:
    q = asyncq_queue
    await abroker.dequeue(q, 1, OWNER, LEASE_MS, 5000, one_hop=True)
    assert await redis_client.zrange(K.extra_keys(q).idle, 0, -1) == [
        f"{LEASE_MS}:{OWNER}".encode()]
    await abroker.leave_idle([q], OWNER, LEASE_MS)
    assert await redis_client.zcard(K.extra_keys(q).idle) == 0


async def test_without_a_registration_the_waiters_flag_brings_a_wake_up(
        abroker: AsynqBroker, aclient: Client, redis_client: Redis, asyncq_queue: str) -> None:
    """(The wake-ups themselves: conformance/test_conf_pickup.py.)"""
    q = asyncq_queue
    async with hearing(abroker.listen_signals([q, "other"])) as signals:
        await abroker.dequeue(q, 1, OWNER, LEASE_MS, 5000)
        assert await redis_client.exists(K.extra_keys(q).waiters)
        await aclient.enqueue("t", queue=q)
        await asyncio.wait_for(anext(signals), 5)
        assert not await redis_client.exists(K.extra_keys(q).waiters)  # (one per idle spell)


async def test_a_go_written_task_wakes_nobody_but_is_dequeued(
        abroker: AsynqBroker, redis_client: Redis, asyncq_queue: str) -> None:
    """Go's enqueue publishes nothing: the waiters flag stays, the registration too; the idle
    worker's next poll (its dequeue) takes the task."""
    q = asyncq_queue
    qk, xk = K.queue_keys(q), K.extra_keys(q)
    await abroker.dequeue(q, 1, OWNER, LEASE_MS, 5000, one_hop=True)
    go = _codec.AsynqTask(type="go:task", payload=b"g", id="go-1", queue=q, timeout=60)
    await redis_client.hset(qk.task("go-1"), mapping={
        "msg": _codec.encode(go), "state": "pending", "pending_since": 10**18})
    await redis_client.lpush(qk.pending, "go-1")
    assert await redis_client.exists(xk.waiters) and await redis_client.zcard(xk.idle) == 1
    [raw], _ = await abroker.dequeue(q, 1, OWNER, LEASE_MS, 5000, one_hop=True)
    assert (raw.id, raw.payload, raw.msg.type) == ("go-1", b"g", "go:task")


async def test_a_lost_hand_off_a_go_server_leased_again_stays_with_go(
        abroker: AsynqBroker, aclient: Client, redis_client: Redis, asyncq_queue: str,
        monkeypatch: pytest.MonkeyPatch) -> None:
    """Go's recoverer took the task back and a Go server leased it again: its scripts keep the
    asyncq-only owner field but write another lease, so the record is dropped unreturned."""
    q = asyncq_queue
    qk = K.queue_keys(q)
    monkeypatch.setattr(_wake, "HANDOFF_GRACE_MS", 0)
    await abroker.dequeue(q, 1, OWNER, LEASE_MS, 5000, one_hop=True)
    async with hearing(abroker.listen_handoffs([q], OWNER)):
        info = await aclient.enqueue("t", queue=q)
    score = await redis_client.zscore(qk.lease, info.id)
    assert score is not None
    await redis_client.zadd(qk.lease, {info.id: score + 45})  # (Go's lease: state active)
    assert await abroker.dequeue(q, 1, OWNER, LEASE_MS, 5000) == ([], 0)
    assert not await redis_client.exists(K.extra_keys(q).handoff(OWNER))
