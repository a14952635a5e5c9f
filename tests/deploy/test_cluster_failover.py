"""A Redis Cluster master fails over mid-run (3 masters + 3 replicas): the producer, the worker
and its pub/sub connection follow the promoted replica, which starts without the Lua scripts.

The master killed is the one serving the queue *and* the cancel channel's slot (where the
worker's pub/sub connection lives), so the subscription has to move too. As in the Sentinel
test, writes are paused until the replica has them before the kill (asynchronous replication is
Redis's own window, documented in docs/reference/delivery-guarantees.md).
"""

from __future__ import annotations

import asyncio
import time
import uuid
from collections import Counter
from collections.abc import Iterator

import anyio
import pytest
from redis.crc import key_slot
from topology.cluster import LocalCluster, redis_cli

from asyncq import Client, Inspector, ServeMux, Task, TaskInfo, TaskState, Worker
from asyncq._broker import _keys as K
from asyncq.testing import wait_until

pytestmark = pytest.mark.anyio


@pytest.fixture
def ha_cluster() -> Iterator[LocalCluster]:
    with LocalCluster(masters=3, replicas=1) as topo:
        yield topo


def _offset(port: int, field: str) -> int:
    for line in redis_cli("-p", str(port), "info", "replication", timeout=5).splitlines():
        if line.startswith(field + ":"):
            return int(line.split(":", 1)[1])
    raise LookupError(field)


async def test_cluster_failover_mid_run(ha_cluster: LocalCluster) -> None:
    topo = ha_cluster
    victim = topo.node_for_slot(key_slot(K.CANCEL_CHANNEL.encode()))
    q = next(name for name in (f"cf-{uuid.uuid4().hex[:8]}" for _ in range(10_000))
             if topo.node_for_slot(key_slot(name.encode())) == victim)
    executed: Counter[str] = Counter()
    started: dict[str, asyncio.Event] = {}
    acked: list[str] = []
    mux = ServeMux()

    @mux.handler("work")
    async def work(task: Task) -> None:
        assert task.id is not None
        executed[task.id] += 1

    @mux.handler("block")
    async def block(task: Task) -> None:
        assert task.id is not None
        started.setdefault(task.id, asyncio.Event()).set()
        await asyncio.Event().wait()

    async def produce(stop: anyio.Event) -> None:
        # A producer riding through a failover with batches (the pipelined path); the client
        # retries with backoff itself.
        async with Client(topo.url, retry_attempts=30) as client:
            for i in range(0, 10_000_000, 5):
                if stop.is_set():
                    return
                batch = [Task("work", queue=q, task_id=f"w-{i + j}") for j in range(5)]
                results = await client.enqueue_many(batch)
                acked.extend(r.id for r in results if isinstance(r, TaskInfo))

    stop = anyio.Event()
    async with Worker(topo.url, mux, queues={q: 1}, concurrency=10, forward_interval=0.1,
                      heartbeat_interval=0.25, recover_interval=0.5, recover_grace=0.5
                      ) as worker, anyio.create_task_group() as tg:
        tg.start_soon(produce, stop)
        await wait_until(lambda: len(executed) >= 200, timeout=30, message="running")

        master = next(n for n in topo.nodes if n.port == victim)
        replica_port, = topo.replicas_of(victim)
        redis_cli("-p", str(victim), "client", "pause", "20000", "write")
        await wait_until(lambda: _offset(replica_port, "slave_repl_offset")
                         == _offset(victim, "master_repl_offset"),
                         timeout=10, message="replica caught up")
        acked_at_kill = len(acked)
        master.kill()
        killed = time.monotonic()
        await wait_until(lambda: len(acked) >= acked_at_kill + 200, timeout=30,
                         message="enqueues acknowledged after the failover")
        resumed = time.monotonic() - killed
        stop.set()
        await wait_until(lambda: set(acked) <= set(executed), timeout=30,
                         message="every acknowledged task ran")
        assert topo.node_for_slot(key_slot(q.encode())) == replica_port

        # The subscription moved with the slot: a cancellation still reaches the worker.
        async with Client(topo.url) as client, Inspector(topo.url) as inspector:
            info = await client.enqueue("block", queue=q, max_retry=0)
            await wait_until(lambda: info.id in started, timeout=15, message="block started")
            await wait_until(lambda: worker.subscriber.connected, timeout=15,
                             message="resubscribed")
            await client.cancel(info.id)

            async def archived() -> bool:
                task = await inspector.task_info(q, info.id)
                return task.state is TaskState.ARCHIVED

            await wait_until(archived, timeout=15, message="cancelled after the failover")

    lost = set(acked) - set(executed)
    duplicates = [t for t, n in executed.items() if n > 1]
    print(f"cluster failover: enqueues resumed after {resumed:.2f}s; acknowledged "
          f"{len(acked)}, lost {len(lost)}, duplicates {len(duplicates)}")
    assert not lost
    assert not duplicates
