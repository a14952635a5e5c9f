"""Badly behaved handlers in a worker process: one ignores cancellation and never returns, one
raises on every call, one blocks the event loop (``time.sleep(lease / 2)``). The worker stays
healthy — the other tasks keep their leases and run exactly once — and SIGTERM still stops it
within its bound, even with handlers that will never end."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import chaosapp
import pytest
from chaoslib import (
    Ledger,
    build_report,
    runner_worker,
    stop_process,
    task_ids,
)
from redis.asyncio import Redis

from asyncq import Client, Task
from asyncq._broker import _keys as K
from asyncq.testing import wait_until
from tests.helpers.processes import log_events

pytestmark = [pytest.mark.anyio, pytest.mark.chaos]

LEASE = 2.0
SHUTDOWN_TIMEOUT = 0.5
NORMAL, RAISING, BLOCKING, STUBBORN_TIMED = 300, 5, 3, 2
MAX_RETRY = 2


@pytest.mark.timeout(90)
async def test_bad_handlers_do_not_hurt_the_worker(
    asyncq_redis_url: str, asyncq_client: Client, asyncq_queue: str, redis_client: Redis,
    ledger: Ledger, tmp_path: Path,
) -> None:
    q = asyncq_queue
    n = NORMAL + RAISING + BLOCKING + STUBBORN_TIMED + 1
    ids = task_ids("bad", n)
    kinds: list[tuple[str, dict[str, Any], dict[str, Any]]] = (
        [("chaos:work", {"ms": [5, 50]}, {})] * NORMAL
        + [("chaos:raise", {}, {"max_retry": MAX_RETRY})] * RAISING
        + [("chaos:block", {"s": LEASE / 2}, {})] * BLOCKING
        # Ignores the cancellation at its deadline: abandoned after cancel_grace, archived.
        + [("chaos:stubborn", {}, {"timeout": 1, "max_retry": 0})] * STUBBORN_TIMED
        # No deadline: runs until shutdown, ignores that cancellation too.
        + [("chaos:stubborn", {}, {"max_retry": 0})]
    )
    # Interleave the bad ones with the normal ones.
    order = sorted(range(n), key=lambda i: (i * 7919) % n)
    tasks = [Task(kinds[i][0], chaosapp.payload(ledger.key, i, **kinds[i][1]), task_id=ids[i],
                  queue=q, retention=3600, **kinds[i][2]) for i in order]
    assert all(not isinstance(r, Exception) for r in await asyncq_client.enqueue_many(tasks))

    log = tmp_path / "worker.log"
    options = {"queues": {q: 1}, "concurrency": 10, "lease_duration": LEASE,
               "heartbeat_interval": LEASE / 4, "shutdown_timeout": SHUTDOWN_TIMEOUT,
               "cancel_grace": 1.0, "retry_delay_ms": 0, "forward_interval": 0.2}
    async with runner_worker(asyncq_redis_url, asyncq_redis_url, log, **options) as proc:
        # Everything but the endless handler reaches its outcome.
        await wait_until(lambda: _settled_but_one(redis_client, q), timeout=45,
                         message="all but the endless task settled")
        assert proc.returncode is None
        code, took = await stop_process(proc, timeout=15)
    assert code == 0, log.read_text()[-3000:]
    assert took < SHUTDOWN_TIMEOUT + 3, took

    endless = ids[n - 1]
    fields = await redis_client.hmget(K.queue_keys(q).task(endless), "state", "retried")
    assert fields == [b"pending", None], fields  # requeued at shutdown, not failed
    report = await build_report("bad handlers", redis_client, q, ledger, ids[:n - 1],
                                runs_expected=[1] * (NORMAL) + [MAX_RETRY + 1] * RAISING
                                + [1] * (BLOCKING + STUBBORN_TIMED))
    events = log_events(log)
    report.extra = {
        "requeued_at_shutdown": 1, "shutdown_s": round(took, 2),
        "lease_lost": sum(1 for e in events if e["event"] == "lease lost; handler cancelled"),
        "abandoned": sum(1 for e in events
                         if e["event"] == "handler ignored cancellation; abandoning it"),
    }
    report.publish()
    assert report.lost == 0 and report.duplicates == 0, report
    assert report.completed == NORMAL + BLOCKING, report
    assert report.archived_reasons == {"ValueError": RAISING, "TimeoutError": STUBBORN_TIMED}
    assert report.extra["lease_lost"] == 0
    assert report.extra["abandoned"] == STUBBORN_TIMED + 1
    starts, _ = await ledger.counts(n)
    assert starts[n - 1] == 1


async def _settled_but_one(redis: Redis, queue: str) -> bool:
    qk = K.queue_keys(queue)
    pipe = redis.pipeline(transaction=False)
    pipe.llen(qk.pending)
    pipe.llen(qk.active)
    pipe.zcard(qk.retry)
    pipe.zcard(qk.archived)
    pending, active, retry, archived = await pipe.execute()
    return (pending, active, retry, archived) == (0, 1, 0, RAISING + STUBBORN_TIMED)
