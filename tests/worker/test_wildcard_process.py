"""Wildcard queues in a real worker process (``asyncq worker -q 'tenant:*=1'``): tenant queues
created after it started are served, and a pattern's weight is shared fairly among them under
load — one busy tenant does not hold back the others."""

from __future__ import annotations

from pathlib import Path

import pytest
from redis.asyncio import Redis

from asyncq import Client, Inspector, Task
from asyncq.testing import wait_until
from tests.helpers.processes import log_events, worker_process
from tests.worker.test_worker_process import server_of

pytestmark = pytest.mark.anyio

APP = "tests.apps.tenants:mux"


async def ranks(inspector: Inspector, queue: str) -> list[int]:
    """The finishing ranks the completed tasks of ``queue`` returned, sorted."""
    found: list[int] = []
    page = 1
    while batch := await inspector.list_tasks(queue, "completed", page=page, page_size=100):
        found += [int(t.result_json()) for t in batch]
        page += 1
    return sorted(found)


async def test_three_tenants_share_a_pattern_fairly_in_a_worker_process(
    asyncq_redis_url: str, asyncq_client: Client, asyncq_inspector: Inspector,
    asyncq_queue: str, redis_client: Redis, tmp_path: Path,
) -> None:
    """300 tasks for tenant a, then 30 each for b and c, all queues created after the worker
    process started: b and c are done long before a, whose tasks had come first."""
    pattern = f"{asyncq_queue}:*"
    a, b, c = (f"{asyncq_queue}:{t}" for t in "abc")
    log = tmp_path / "worker.log"
    async with worker_process(asyncq_redis_url, pattern, log, "--concurrency", "4",
                              "--queue-scan-interval", "60", target=APP) as proc:
        _, doc = await wait_until(lambda: server_of(redis_client, proc.pid), timeout=15,
                                  message="the worker process ready")
        assert doc["queues"] == {pattern: 1} and doc["matched"] == {pattern: []}
        for queue, count in ((a, 300), (b, 30), (c, 30)):
            await asyncq_client.enqueue_many(
                [Task("tenants:rank", {"ms": 5}, queue=queue) for _ in range(count)])

        async def all_done() -> bool:
            infos = await asyncq_inspector.queue_infos([a, b, c])
            return sum(i.completed for i in infos) == 360

        await wait_until(all_done, timeout=60, message="360 tasks completed")

        async def published() -> bool:
            found = await server_of(redis_client, proc.pid)
            return found is not None and found[1]["matched"] == {pattern: [a, b, c]}

        await wait_until(published, timeout=15, message="the matched queues in its state")
    ra, rb, rc = [await ranks(asyncq_inspector, q) for q in (a, b, c)]
    assert (len(ra), len(rb), len(rc)) == (300, 30, 30)
    assert sorted(ra + rb + rc) == list(range(1, 361))  # one process, every rank once
    last_small = max(rb[-1], rc[-1])
    a_before = sum(r < last_small for r in ra)
    print(f"b done at rank {rb[-1]}, c at {rc[-1]}, a at {ra[-1]} of 360; "
          f"a finished {a_before} tasks before b and c were done")
    # Served in turn: b and c end near rank 3 * 30 (FIFO over the queues would end them last,
    # after a's 300), and a has done about as many as each of them by then.
    assert last_small < 150
    assert a_before < 100
    assert ra[-1] == 360
    events = [e for e in log_events(log) if e["event"] == "queues matched"]
    assert {q for e in events for q in e["added"]} == {a, b, c}
