"""A worker process is SIGKILLed while its handlers run: another worker finishes every task
after the dead worker's leases expire; only the tasks it was running may run twice."""

from __future__ import annotations

import signal
import time
from pathlib import Path

import chaosapp
import pytest
from chaoslib import Ledger, build_report, cli_worker, task_ids, wait_settled
from redis.asyncio import Redis

from asyncq import Client, Task
from asyncq._broker import _keys as K
from asyncq.testing import WorkerFactory, wait_until

pytestmark = [pytest.mark.anyio, pytest.mark.chaos]

N = 300
LEASE = 2.0


async def test_sigkill_mid_batch_another_worker_finishes_after_lease_expiry(
    asyncq_redis_url: str, asyncq_client: Client, asyncq_worker: WorkerFactory,
    asyncq_queue: str, redis_client: Redis, ledger: Ledger, tmp_path: Path,
) -> None:
    q = asyncq_queue
    ids = task_ids("kill", N)
    results = await asyncq_client.enqueue_many(
        Task("chaos:work", chaosapp.payload(ledger.key, i, ms=[50, 300]), task_id=ids[i],
             queue=q, retention=3600)
        for i in range(N))
    assert all(not isinstance(r, Exception) for r in results)

    async with cli_worker(asyncq_redis_url, q, asyncq_redis_url, tmp_path / "w1.log",
                          "--concurrency", "20", "--lease-duration", str(LEASE)) as proc:
        # Mid-batch: some tasks are done and a full set of handlers is running.
        await wait_until(lambda: _mid_batch(ledger), timeout=20, message="mid-batch")
        proc.kill()
        assert await proc.wait() == -signal.SIGKILL
    killed = time.monotonic()
    active_at_kill = {m.decode() for m in await redis_client.lrange(K.queue_keys(q).active, 0, -1)}
    assert len(active_at_kill) >= 10, active_at_kill

    async with asyncq_worker(chaosapp.mux, queues={q: 1}, concurrency=20, lease_duration=LEASE,
                             heartbeat_interval=0.5, recover_interval=0.25, recover_grace=0.25,
                             retry_delay=lambda n, e, t: 0) as w:
        await wait_settled(redis_client, [q], timeout=30)
        recovered = w.worker.recoverer.recovered
    elapsed = time.monotonic() - killed

    report = await build_report("worker SIGKILL", redis_client, q, ledger, ids)
    report.extra = {"active_at_kill": len(active_at_kill), "recovered": recovered,
                    "settled_after_s": round(elapsed, 2)}
    report.publish()
    assert (report.completed, report.archived, report.lost) == (N, 0, 0), report
    # Only what the dead worker was running can have run twice, and at most twice.
    assert set(report.duplicate_ids) <= active_at_kill, report
    starts, _ = await ledger.counts(N)
    assert max(starts) <= 2
    assert recovered == len(active_at_kill)
    # A recovered task carries the reason.
    for task_id in sorted(active_at_kill)[:5]:
        fields = await redis_client.hmget(K.queue_keys(q).task(task_id), "retried", "error")
        assert fields == [b"1", b"LeaseExpiredError: task lease expired"]


async def _mid_batch(ledger: Ledger) -> bool:
    starts, finishes = await ledger.counts(N)
    done = sum(1 for f in finishes if f)
    running = sum(1 for s, f in zip(starts, finishes, strict=True) if s and not f)
    return done >= 60 and running >= 15
