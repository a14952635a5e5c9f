"""Task expiry on Redis Cluster: every script that archives an expired task (dequeue, forward,
retry, aggregation_check, expire) stays in its queue's slot on every master (the deploy suite's
slot checker fails a call naming two slots), and a worker never runs an expired task there,
through a dequeue or the one-hop hand-off."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime, timedelta

import anyio
import pytest
from redis.crc import key_slot
from topology.cluster import LocalCluster

from asyncq import Client, FakeClock, Inspector, ServeMux, Task, TaskState, Worker
from asyncq._broker import Outcome
from asyncq._broker._connection import make_broker
from asyncq.testing import wait_until

from .conftest import SlotChecker

pytestmark = pytest.mark.anyio

OWNER = "test-owner"
LEASE_MS = 30_000


def queues_on_each_master(cluster: LocalCluster) -> list[str]:
    chosen: dict[int, str] = {}
    while len(chosen) < len(cluster.master_ports()):
        name = f"x-{uuid.uuid4().hex[:8]}"
        chosen.setdefault(cluster.node_for_slot(key_slot(name.encode())), name)
    return list(chosen.values())


async def test_every_expiry_path_archives_in_the_queues_slot_on_every_master(
    cluster: LocalCluster, slot_checker: SlotChecker,
) -> None:
    clock = FakeClock()
    broker = make_broker(cluster.url, clock=clock)
    client = Client(broker, clock=clock)
    inspector = Inspector(cluster.url)
    slot_checker.calls.clear()
    try:
        for q in queues_on_each_master(cluster):
            failing = await client.enqueue("t", queue=q, expires_in=60)
            again = await client.enqueue("t", queue=q, expires_in=60)
            leased, _ = await broker.dequeue(q, 2, OWNER, LEASE_MS, 1000)
            assert [t.id for t in leased] == [failing.id, again.id]
            await client.enqueue("t", queue=q, expires_in=5)  # pending
            await client.enqueue("t", queue=q, process_in=2, expires_in=5)  # scheduled
            await client.enqueue("t", queue=q, group="g", expires_in=5)  # aggregating
            now = clock.now_ms()
            assert await broker.finish([
                Outcome("retry", q, failing.id, retry_at_ms=now + 120_000, error="e"),
                Outcome("expire", q, again.id, error="expired: now"),
            ], OWNER) == [True, True]
            clock.advance(6)
            assert await broker.maintenance.forward(q, "scheduled", 10) == (1, -1)
            assert await broker.dequeue(q, 1, OWNER, LEASE_MS, 1000) == ([], 0)
            assert await broker.aggregation.check(q, "g", "s", 0, 0, 0,
                                                  clock.now_ms() + 60_000) == 0
            info = await inspector.queue_info(q)
            assert (info.archived, info.expired_total, info.pending) == (5, 5, 0)
    finally:
        await inspector.close()
        await client.close()
        await broker.close()
    assert {"dequeue", "forward", "retry", "aggregation_check", "expire"} <= set(
        slot_checker.calls)


async def test_a_worker_on_the_cluster_never_runs_an_expired_task(
    cluster: LocalCluster,
) -> None:
    queues = queues_on_each_master(cluster)
    ran: list[str] = []
    mux = ServeMux()

    @mux.handler("t")
    async def t(task: Task) -> None:
        assert task.id is not None
        ran.append(task.id)

    behind = FakeClock(datetime.now(UTC) - timedelta(hours=1))
    async with Client(cluster.url) as client, Client(cluster.url, clock=behind) as late:
        # Expired before any worker runs: archived by the worker's dequeue.
        stale = [await client.enqueue("t", queue=q, expires_in=0.3) for q in queues]
        await anyio.sleep(0.6)  # (time passing is the point: no worker runs meanwhile)
        async with Worker(cluster.url, mux, queues=dict.fromkeys(queues, 1),
                          idle_poll_interval=60) as worker:
            for info in stale:
                final = await client.wait(info, timeout=30)
                assert final.state is TaskState.ARCHIVED and final.last_error is not None
                assert final.last_error.startswith("expired: ")
            # Expired by the server's clock when enqueued to an idle worker: not handed off.
            await wait_until(lambda: not worker.processor.running, timeout=30, message="idle")
            handed = [await late.enqueue("t", queue=q, expires_in=60) for q in queues]
            fresh = [await client.enqueue("t", queue=q) for q in queues]
            for info in handed:
                assert (await client.wait(info, timeout=30)).state is TaskState.ARCHIVED
            await wait_until(lambda: len(ran) == len(fresh), timeout=10, message="fresh ran")
    assert sorted(ran) == sorted(i.id for i in fresh)
