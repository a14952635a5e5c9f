"""Queue caps on Redis Cluster: a cap per queue on each master holds across two workers, a
raise set while tasks wait lets them start at once, and every limit script named keys of one
slot (the suite's slot checker)."""

from __future__ import annotations

import asyncio

import pytest
from topology.cluster import LocalCluster

from asyncq import Client, Inspector, ServeMux, Task, Worker
from asyncq._broker._connection import connect
from asyncq.testing import wait_drained, wait_until

from .conftest import SlotChecker
from .test_cluster import queues_on_each_master

pytestmark = pytest.mark.anyio


async def test_queue_caps_hold_on_every_master_and_a_raise_applies_at_once(
    cluster: LocalCluster, slot_checker: SlotChecker,
) -> None:
    queues = list(queues_on_each_master(cluster).values())
    running = dict.fromkeys(queues, 0)
    most = dict.fromkeys(queues, 0)
    done: list[str] = []
    go = asyncio.Event()

    async def work(task: Task) -> None:
        q = task.queue or ""
        running[q] += 1
        most[q] = max(most[q], running[q])
        try:
            await go.wait()
        finally:
            running[q] -= 1
        done.append(q)

    mux = ServeMux()
    mux.handle("w", work)
    redis, close = connect(cluster.url)
    try:
        async with Client(cluster.url) as client, Inspector(cluster.url) as inspector:
            for q in queues:
                await inspector.set_queue_concurrency(q, 1)
            await client.enqueue_many([Task("w", queue=q) for q in queues for _ in range(6)])
            options = {"queues": dict.fromkeys(queues, 1), "concurrency": 10,
                       "forward_interval": 0.1}
            async with Worker(cluster.url, mux, **options) as w1, \
                    Worker(cluster.url, mux, **options) as w2:
                await wait_until(lambda: running == dict.fromkeys(queues, 1), timeout=10,
                                 message="one running per queue")
                caps = [await inspector.queue_concurrency(q) for q in queues]
                assert [(c.limit, c.in_use) for c in caps if c] == [(1, 1)] * 3
                for q in queues:
                    assert await inspector.set_queue_concurrency(q, 3) == 2
                await wait_until(lambda: running == dict.fromkeys(queues, 3), timeout=10,
                                 message="three running per queue after the raise")
                go.set()
                await wait_drained(redis, queues, worker=w1, timeout=30,  # type: ignore[arg-type]
                                   include_scheduled=True)
                await wait_drained(redis, queues, worker=w2, timeout=10)  # type: ignore[arg-type]
    finally:
        await close()
    assert sorted(done) == sorted(q for q in queues for _ in range(6))
    assert most == dict.fromkeys(queues, 3)
    assert {"limit_acquire", "limit_release", "limit_set", "limit_usage"} <= set(
        slot_checker.calls)
