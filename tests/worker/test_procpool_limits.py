"""The time limit of a process-run handler counts from when the handler starts in its child
(issue 38 D3, D4): not while the task waits for a free child, nor while a fresh child starts
and imports the handler's module (after a kill or a recycle too). A handler that runs past its
limit is still killed at it."""

from __future__ import annotations

import pytest
from redis.asyncio import Redis

from asyncq import Client, ServeMux
from asyncq.testing import WorkerFactory
from tests.helpers.dataplane import task_hash
from tests.worker import procpool_handlers as h
from tests.worker import slow_import_handlers as slow

pytestmark = pytest.mark.anyio


async def test_waiting_for_a_free_child_does_not_count_against_the_limit(
    asyncq_client: Client, asyncq_worker: WorkerFactory, asyncq_queue: str,
    redis_client: Redis,
) -> None:
    """16 runs of 0.4 s with a 2 s limit on 2 children, 20 slots: most wait longer than 2 s
    for a child, none runs longer; every one completes. A runaway among them is killed."""
    mux = ServeMux()
    mux.handle("nap", h.nap, isolate="process", timeout=2)
    mux.handle("hang", h.spin_forever, isolate="process", timeout=1)
    naps = [await asyncq_client.enqueue("nap", 0.4, queue=asyncq_queue, max_retry=0,
                                        retention=120) for _ in range(16)]
    hung = await asyncq_client.enqueue("hang", queue=asyncq_queue, max_retry=0)
    async with asyncq_worker(mux, queues={asyncq_queue: 1}, concurrency=20,
                             process_pool_size=2, process_kill_grace=0.2) as w:
        await w.wait_drained(asyncq_queue, timeout=120)
    states = [(await task_hash(redis_client, asyncq_queue, i.id)) for i in naps]
    assert [(s["state"], s.get("error")) for s in states] == [(b"completed", None)] * 16
    fields = await task_hash(redis_client, asyncq_queue, hung.id)
    assert fields["state"] == b"archived" and fields["error"].startswith(b"TimeoutError")


async def test_a_fresh_childs_start_up_and_import_do_not_count_against_the_limit(
    asyncq_client: Client, asyncq_worker: WorkerFactory, asyncq_queue: str,
    redis_client: Redis,
) -> None:
    """Each child imports a module that takes 1.5 s; the handler's limit is 1 s. Two quick
    runs in the first child (cold, then warm), a runaway in the child that replaced it after
    its two tasks (killed at its limit, counted from its handler's start), and a quick run in
    the child replacing the killed one: every quick run completes."""
    assert slow.IMPORT_S > 1
    mux = ServeMux()
    mux.handle("quick", slow.quick, isolate="process", timeout=1)
    mux.handle("hang", h.spin_forever, isolate="process", timeout=1)
    first = [await asyncq_client.enqueue("quick", queue=asyncq_queue, max_retry=0,
                                         retention=120) for _ in range(2)]
    hung = await asyncq_client.enqueue("hang", queue=asyncq_queue, max_retry=0)
    after = await asyncq_client.enqueue("quick", queue=asyncq_queue, max_retry=0,
                                        retention=120)
    async with asyncq_worker(mux, queues={asyncq_queue: 1}, concurrency=1,
                             process_pool_size=1, max_tasks_per_child=2,
                             process_kill_grace=0.2) as w:
        await w.wait_drained(asyncq_queue, timeout=120)
    pids = []
    for info in [*first, after]:
        fields = await task_hash(redis_client, asyncq_queue, info.id)
        assert (fields["state"], fields.get("error")) == (b"completed", None)
        pids.append(await asyncq_client.result(info.id, queue=asyncq_queue, timeout=5))
    assert pids[0] == pids[1] != pids[2]  # the first child twice, then a fresh one
    fields = await task_hash(redis_client, asyncq_queue, hung.id)
    assert fields["state"] == b"archived" and fields["error"].startswith(b"TimeoutError")
