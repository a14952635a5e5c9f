"""Pool exhaustion (issue 12 item 1): two worker processes each run 300 handlers at once
through 8 Redis connections, while 2 000 concurrent enqueues go through 5. Callers beyond the
pool wait for a connection: every enqueue succeeds, every task runs exactly once, and no task
is retried because a connection was not free."""

from __future__ import annotations

import asyncio
from pathlib import Path

import chaosapp
import pytest
from chaoslib import (
    Ledger,
    build_report,
    cli_worker,
    stop_process,
    task_ids,
    wait_settled,
)
from redis.asyncio import Redis

from asyncq import Client, ConnectionOptions, Task
from tests.helpers.processes import log_events

pytestmark = [pytest.mark.anyio, pytest.mark.chaos]

N = 2_000


@pytest.mark.timeout(180)
async def test_more_concurrent_calls_than_connections_lose_and_retry_nothing(
    asyncq_redis_url: str, asyncq_queue: str, redis_client: Redis, ledger: Ledger,
    tmp_path: Path,
) -> None:
    q = asyncq_queue
    ids = task_ids("pool", N)
    small_pool = f"{asyncq_redis_url}?max_connections=8"
    logs = [tmp_path / "w1.log", tmp_path / "w2.log"]
    async with cli_worker(small_pool, q, asyncq_redis_url, logs[0], "--concurrency",
                          "300") as w1, \
            cli_worker(small_pool, q, asyncq_redis_url, logs[1], "--concurrency", "300") as w2, \
            Client(asyncq_redis_url, connection=ConnectionOptions(max_connections=5)) as client:
        results = await asyncio.gather(*[
            client.enqueue(Task("chaos:work", chaosapp.payload(ledger.key, i, ms=[20, 80]),
                                task_id=task_id, queue=q, max_retry=3))
            for i, task_id in enumerate(ids)], return_exceptions=True)
        assert [r for r in results if isinstance(r, BaseException)] == []
        await wait_settled(redis_client, [q], timeout=120)
        for proc in (w1, w2):
            code, _ = await stop_process(proc, timeout=30)
            assert code == 0
    report = await build_report("pool-exhaustion", redis_client, q, ledger, ids, kept=False)
    report.publish()
    assert (report.lost, report.duplicates, report.completed) == (0, 0, N), report
    events = [e for log in logs for e in log_events(log)]
    assert not [e for e in events if e.get("event") in ("task failed", "task archived")], events
