"""Graceful shutdown (SIGTERM) of a worker process in the middle of 10 000 tasks: every task
is done once, or cancelled at the shutdown timeout, requeued, and done by the next worker."""

from __future__ import annotations

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

from asyncq import Client, Task
from asyncq.testing import queue_counts, wait_until
from tests.helpers.processes import log_events

pytestmark = [pytest.mark.anyio, pytest.mark.chaos]

N = 10_000
CONCURRENCY = 50
SHUTDOWN_TIMEOUT = 0.1


async def test_sigterm_in_the_middle_of_10000_tasks(
    asyncq_redis_url: str, asyncq_client: Client, asyncq_queue: str, redis_client: Redis,
    ledger: Ledger, tmp_path: Path,
) -> None:
    q = asyncq_queue
    ids = task_ids("term", N)
    for start in range(0, N, 1000):
        results = await asyncq_client.enqueue_many(
            Task("chaos:work", chaosapp.payload(ledger.key, i, ms=_duration(i)),
                 task_id=ids[i], queue=q, retention=3600)
            for i in range(start, min(N, start + 1000)))
        assert all(not isinstance(r, Exception) for r in results)

    args = ("--concurrency", str(CONCURRENCY), "--shutdown-timeout", str(SHUTDOWN_TIMEOUT),
            "--lease-duration", "5")
    log1 = tmp_path / "w1.log"
    async with cli_worker(asyncq_redis_url, q, asyncq_redis_url, log1, *args) as proc:
        await wait_until(lambda: _finished_at_least(ledger, 3000), timeout=60,
                         message="3000 tasks done")
        code, took = await stop_process(proc, timeout=10)
    assert code == 0, log1.read_text()[-3000:]
    # Bound: shutdown_timeout, then at most 1 s for cancelled handlers, then the outcomes.
    assert took < SHUTDOWN_TIMEOUT + 3, took
    counts = await queue_counts(redis_client, q)
    assert counts["active"] == 0, counts  # nothing left leased by the stopped worker
    done_first = await ledger.finished(N)
    assert done_first < N, "the first worker finished everything before SIGTERM"

    log2 = tmp_path / "w2.log"
    async with cli_worker(asyncq_redis_url, q, asyncq_redis_url, log2, *args) as proc2:
        await wait_settled(redis_client, [q], timeout=60)
        code2, _ = await stop_process(proc2, timeout=10)
    assert code2 == 0

    report = await build_report("SIGTERM mid 10k", redis_client, q, ledger, ids)
    requeued = sum(e.get("count", 0) for e in log_events(log1)
                   if e["event"] == "shutdown timeout reached; requeueing running tasks")
    report.extra = {"done_by_first_worker": done_first, "requeued_at_shutdown": requeued,
                    "shutdown_s": round(took, 2)}
    report.publish()
    assert (report.completed, report.archived, report.lost) == (N, 0, 0), report
    starts, finishes = await ledger.counts(N)
    assert min(finishes) == 1, "a task never finished"
    # At least once: a handler cancelled at the shutdown timeout after its last write but
    # before it returned runs again, so a second finish only comes with a second start.
    assert all(f <= s for s, f in zip(starts, finishes, strict=True)), \
        "a task finished more often than it started"
    # A second start only for the handlers cancelled at the shutdown timeout (requeued); one
    # cancelled before its first ledger write reached Redis left no start, so it may be fewer.
    assert 0 < report.duplicates <= requeued <= CONCURRENCY, report
    assert max(starts) <= 2


def _duration(i: int) -> object:
    """Mostly quick tasks; one in 40 takes a second, so some outlast the shutdown timeout."""
    return 1000 if i % 40 == 0 else [0, 10]


async def _finished_at_least(ledger: Ledger, n: int) -> bool:
    return await ledger.finished(N) >= n
