"""Wildcard queues on a 3-master Redis Cluster: a worker serving a pattern finds tenant queues
created on every master after it started (announced on the cluster-wide wake channel), hands
their tasks off in one hop, and every script it runs stays in one queue's slot."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator

import pytest
from redis.asyncio import RedisCluster
from redis.crc import key_slot
from topology.cluster import LocalCluster

from asyncq import Client, ServeMux, Task, Worker
from asyncq._broker import _keys as K
from asyncq._broker._connection import connect
from asyncq.testing import wait_drained, wait_until
from tests.helpers.inprocess import gate_dequeues

from .conftest import SlotChecker

pytestmark = pytest.mark.anyio


@pytest.fixture
async def rc(cluster: LocalCluster, anyio_backend: object) -> AsyncIterator[RedisCluster]:
    client, close = connect(cluster.url)
    assert isinstance(client, RedisCluster)
    await client.initialize()
    try:
        yield client
    finally:
        await close()


def tenants_on_each_master(cluster: LocalCluster, prefix: str) -> list[str]:
    """One queue ``<prefix>:<n>`` per master."""
    chosen: dict[int, str] = {}
    n = 0
    while len(chosen) < len(cluster.master_ports()):
        name = f"{prefix}:{n}"
        chosen.setdefault(cluster.node_for_slot(key_slot(name.encode())), name)
        n += 1
    return list(chosen.values())


async def test_a_pattern_serves_new_queues_on_every_master_in_one_hop(
    cluster: LocalCluster, rc: RedisCluster, slot_checker: SlotChecker,
) -> None:
    prefix = f"cw-{uuid.uuid4().hex[:8]}"
    tenants = tenants_on_each_master(cluster, prefix)
    started: list[tuple[str, str]] = []
    mux = ServeMux()

    @mux.handler("t")
    async def handle(task: Task) -> None:
        assert task.id is not None
        started.append((task.queue, task.id))

    async with Client(cluster.url) as client, \
            Worker(cluster.url, mux, queues={f"{prefix}:*": 1}, queue_scan_interval=60,
                   idle_poll_interval=30) as worker:
        assert worker.served.names == []
        for queue in tenants:  # created now, each on its own master
            info = await client.enqueue("t", queue=queue)
            # (well before the next scan, 60 s, or idle poll, 30 s: the announcement did it)
            await wait_until(lambda q=queue, i=info: (q, i.id) in started, timeout=20,
                             message=f"the new queue {queue} served")
        assert worker.served.names == sorted(tenants)

        async def idle_everywhere() -> bool:
            return all([await rc.zcard(K.queue_keys(q).idle) == 1 for q in tenants])

        await wait_until(idle_everywhere, timeout=20, message="idle on every matched queue")
        gate = gate_dequeues(worker.broker)  # from here only a hand-off brings a task
        infos = [(q, await client.enqueue("t", queue=q)) for q in tenants]
        await wait_until(lambda: all((q, i.id) in started for q, i in infos), timeout=20,
                         message="one task handed off on each master")
        gate.set()
        await wait_drained(rc, tenants, worker=worker, timeout=10)
    assert sorted(q for q, _ in started) == sorted(tenants * 2)
    assert slot_checker.calls.get("dequeue", 0) > 0
