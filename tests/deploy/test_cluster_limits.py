"""Limits on Redis Cluster: a queue's limit state lives in its slot (every limit script names
keys of that one slot, checked by the suite's slot checker), limits of queues on different
masters hold side by side across two workers, and the Inspector reads them all."""

from __future__ import annotations

import asyncio

import pytest
from redis.asyncio import RedisCluster
from redis.crc import key_slot
from topology.cluster import LocalCluster

from asyncq import (
    Client,
    ConcurrencyLimit,
    Inspector,
    Limiter,
    RateLimit,
    ServeMux,
    Task,
    Worker,
)
from asyncq._broker import _keys as K
from asyncq._broker._connection import connect
from asyncq.testing import wait_drained

from .conftest import SlotChecker
from .test_cluster import queues_on_each_master

pytestmark = pytest.mark.anyio


async def test_limits_hold_per_queue_on_every_master(
    cluster: LocalCluster, slot_checker: SlotChecker,
) -> None:
    redis, close = connect(cluster.url)
    try:
        await _limits_hold(cluster, redis, slot_checker)  # type: ignore[arg-type]
    finally:
        await close()


async def _limits_hold(cluster: LocalCluster, redis: RedisCluster,
                       slot_checker: SlotChecker) -> None:
    queues = list(queues_on_each_master(cluster).values())
    running = dict.fromkeys(queues, 0)
    most = dict.fromkeys(queues, 0)
    done: list[str] = []
    mux = ServeMux()

    @mux.handler("api", limits=[ConcurrencyLimit(2, key=lambda t: t.json()["t"]),
                                RateLimit("500/s", name="api-rate")])
    async def api(task: Task) -> None:
        q = task.queue or ""
        running[q] += 1
        most[q] = max(most[q], running[q])
        await asyncio.sleep(0.02)
        running[q] -= 1
        done.append(q)

    async with Client(cluster.url) as client:
        await client.enqueue_many([Task("api", {"t": "acme{1}"}, queue=q)
                                   for q in queues for _ in range(15)])
        options = {"queues": dict.fromkeys(queues, 1), "concurrency": 10,
                   "forward_interval": 0.1}
        async with Worker(cluster.url, mux, **options) as w1, \
                Worker(cluster.url, mux, **options) as w2:
            await wait_drained(redis, queues, worker=w1, timeout=30, include_scheduled=True)
            await wait_drained(redis, queues, worker=w2, timeout=10)
            async with Inspector(cluster.url) as inspector:
                uses = await inspector.limits()
    assert sorted(done) == sorted(q for q in queues for _ in range(15))
    assert most == dict.fromkeys(queues, 2)  # two workers, yet 2 at once per queue
    mine = {(u.queue, u.kind, u.key) for u in uses if u.queue in queues}
    assert mine == {(q, kind, key) for q in queues
                    for kind, key in (("concurrency", "acme{1}"), ("rate", ""))}
    for q in queues:
        held = K.limit_state(K.limit_base(q, "concurrency", "api"), "acme{1}") + "held"
        assert await redis.cluster_keyslot(held) == key_slot(q.encode())
    assert {"limit_acquire", "limit_release", "limit_usage"} <= set(slot_checker.calls)


async def test_limiter_by_hand_on_a_cluster(cluster: LocalCluster) -> None:
    q = next(iter(queues_on_each_master(cluster).values()))
    async with Client(cluster.url) as client:
        limiter = Limiter(client, ConcurrencyLimit(1, name="by-hand"), queue=q)
        async with limiter.acquire("k"):
            with pytest.raises(TimeoutError):
                async with limiter.acquire("k", timeout=0.1):
                    pass
        async with limiter.acquire("k", timeout=1):
            pass
