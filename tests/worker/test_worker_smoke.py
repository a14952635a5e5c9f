"""End-to-end: a worker started by the asyncq_worker fixture runs enqueued tasks."""

from __future__ import annotations

import pytest

import asyncq
from asyncq.testing import WorkerFactory

pytestmark = pytest.mark.anyio


async def test_enqueued_tasks_run_once_each(
    asyncq_client: asyncq.Client, asyncq_worker: WorkerFactory, asyncq_queue: str
) -> None:
    seen: list[int] = []
    mux = asyncq.ServeMux()

    @mux.handler("count")
    async def count(task: asyncq.Task) -> None:
        seen.append(task.json()["n"])

    for n in range(5):
        await asyncq_client.enqueue("count", {"n": n}, queue=asyncq_queue)
    async with asyncq_worker(mux, queues={asyncq_queue: 1}) as w:
        for n in range(5, 10):
            await asyncq_client.enqueue("count", {"n": n}, queue=asyncq_queue)
        await w.wait_drained()
    assert sorted(seen) == list(range(10))
