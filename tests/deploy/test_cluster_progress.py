"""Progress reports on a Redis Cluster: real workers serving queues on every master report
progress; each report is stored in its queue's slot, published on its queue's shard channel
and heard by one client listening to all of them, in order, before each result."""

from __future__ import annotations

import asyncio
import uuid

import pytest
from redis.crc import key_slot
from topology.cluster import LocalCluster

from asyncq import Client, Inspector, ServeMux, Task, TaskEvent, TaskState, Worker

pytestmark = pytest.mark.anyio


def queues_on_each_master(cluster: LocalCluster) -> list[str]:
    chosen: dict[int, str] = {}
    while len(chosen) < len(cluster.master_ports()):
        name = f"p-{uuid.uuid4().hex[:8]}"
        chosen.setdefault(cluster.node_for_slot(key_slot(name.encode())), name)
    return list(chosen.values())


async def test_reports_of_queues_on_every_master_reach_one_listener(
    cluster: LocalCluster,
) -> None:
    queues = queues_on_each_master(cluster)
    mux = ServeMux()

    @mux.handler("report:build", retention=60)
    async def build(task: Task) -> str:
        for i in range(1, 4):
            await task.set_progress(i / 3, f"step {i}")
            await asyncio.sleep(0.15)  # (work between reports: each one is written)
        return task.queue

    async with Client(cluster.url) as client, Inspector(cluster.url) as inspector, \
            Worker(cluster.url, mux, queues={q: 1 for q in queues}), \
            client.events(queues) as events:
        infos = {(await client.enqueue("report:build", queue=q)).id: q for q in queues}
        seen: dict[str, list[TaskEvent]] = {task_id: [] for task_id in infos}
        ended = 0
        async with asyncio.timeout(20):
            async for event in events:
                assert isinstance(event, TaskEvent)
                if event.id in seen:
                    seen[event.id].append(event)
                    ended += event.final
                    if ended == len(infos):
                        break
        stored = {task_id: await inspector.task_info(q, task_id)
                  for task_id, q in infos.items()}
    for task_id, q in infos.items():
        got = seen[task_id]
        reports = [e.progress for e in got if e.progress is not None]
        assert reports == sorted(reports) and reports[-1] == 1.0, (q, reports)
        assert got[-1].state is TaskState.COMPLETED and got[-1].result_json() == q
        assert got[-2].progress == 1.0
        assert (stored[task_id].progress, stored[task_id].progress_message) == (1.0, "step 3")
