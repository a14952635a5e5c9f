"""Redis unreachable for longer than a lease — every client paused (``CLIENT PAUSE … ALL``: the
connections stay open but nothing answers) or the server stopped — while handlers run:

* handlers whose lease could not be kept are cancelled when it runs out (locally: the worker
  cannot ask Redis), and their tasks run again once Redis is back;
* handlers that finished during the outage have their outcomes written once Redis is back:
  the completion writes are not dropped, and those tasks do not run again.
"""

from __future__ import annotations

import time

import anyio
import chaosapp
import pytest
from chaoslib import Ledger, build_report, observer, task_ids, wait_settled

from asyncq import Client, LeaseExpiredError, Task
from asyncq._testing.redis_server import RedisServer
from asyncq.testing import WorkerFactory, wait_until

pytestmark = [pytest.mark.anyio, pytest.mark.chaos]

LEASE = 2.0
OUTAGE = 6.0  # > the lease, and > the 5 s socket timeout: reads time out while paused
LONG, SHORT, QUEUED = 8, 8, 100


@pytest.mark.parametrize("how", ["pause", "stop"])
async def test_redis_unreachable_for_longer_than_a_lease(
    how: str, aof_server: RedisServer, asyncq_queue: str, ledger: Ledger,
) -> None:
    q = asyncq_queue
    n = LONG + SHORT + QUEUED
    ids = task_ids("outage", n)
    redis = observer(aof_server.url)
    lease_lost: list[str] = []
    lease_lost_at: list[float] = []

    def on_error(task: Task, exc: BaseException) -> None:
        if isinstance(exc, LeaseExpiredError):
            assert task.id is not None
            lease_lost.append(task.id)
            lease_lost_at.append(time.monotonic())

    factory = WorkerFactory(aof_server.url)
    try:
        async with Client(aof_server.url) as client:
            # LONG handlers outlast the lease; SHORT ones finish during the outage; the QUEUED
            # ones wait until slots free up (concurrency = LONG + SHORT).
            durations = [10_000] * LONG + [1_000] * SHORT + [[0, 20]] * QUEUED
            tasks = [Task("chaos:work", chaosapp.payload(ledger.key, i, ms=d, ms_rerun=50),
                          task_id=ids[i], queue=q, retention=3600)
                     for i, d in enumerate(durations)]
            assert all(not isinstance(r, Exception)
                       for r in await client.enqueue_many(tasks[:LONG + SHORT]))
            async with factory(chaosapp.mux, queues={q: 1}, concurrency=LONG + SHORT,
                               lease_duration=LEASE, heartbeat_interval=0.5,
                               recover_interval=0.5, recover_grace=0.5,
                               retry_delay=lambda n, e, t: 0, error_handler=on_error) as w:
                await wait_until(lambda: _started(ledger, LONG + SHORT), timeout=10)
                assert all(not isinstance(r, Exception)
                           for r in await client.enqueue_many(tasks[LONG + SHORT:]))
                began = time.monotonic()
                if how == "pause":
                    await redis.execute_command("CLIENT", "PAUSE", int(OUTAGE * 1000), "ALL")
                    await anyio.sleep(OUTAGE)
                else:
                    aof_server.stop()
                    await anyio.sleep(OUTAGE)
                    aof_server.start()
                # While Redis was away, the short handlers finished (their outcomes wait) and
                # the long ones lost their leases and were cancelled.
                await wait_settled(redis, [q], timeout=30)
                await w.wait_drained()
                acker = w.worker.acker
                given_up, written = acker.given_up, acker.written
            report = await build_report(f"Redis unreachable ({how})", redis, q, ledger, ids)
    finally:
        await redis.aclose()
    report.extra = {"lease_lost": len(lease_lost), "outcomes_given_up": given_up,
                    "outcomes_written": written,
                    "settled_s_after_outage_start": round(time.monotonic() - began, 1)}
    report.publish()
    assert (report.completed, report.archived, report.lost) == (n, 0, 0), report
    long_ids, short_ids = set(ids[:LONG]), set(ids[LONG:LONG + SHORT])
    # The long handlers lost their leases, were cancelled, and ran again.
    assert set(lease_lost) == long_ids, lease_lost
    # ... when their lease ran out (renewed at most one heartbeat before the outage), not when
    # some Redis call finally timed out.
    assert max(lease_lost_at) - began < LEASE + 0.5 + 0.5, [t - began for t in lease_lost_at]
    assert set(report.duplicate_ids) == long_ids, report
    # The short ones finished during the outage: their completions were written, not dropped.
    assert given_up == 0
    assert not set(report.duplicate_ids) & short_ids


async def _started(ledger: Ledger, k: int) -> bool:
    return await ledger.started(k) == k
