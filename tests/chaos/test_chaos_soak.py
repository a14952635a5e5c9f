"""Soak: 1 000 000 tasks through 2 worker processes, with random failures and retries (5 % of
runs fail: half raise an error retried after the worker's tiny ``retry_delay``, half raise
``Retry(delay=0)``). The ledger must be exact — every task succeeded exactly once, every extra
run is a recorded failure, Redis's processed/failed counters agree — and the workers' memory
must stay flat (RSS sampled with psutil).

Slow (minutes): runs with ``--run-slow`` / ``make test-chaos``. ``ASYNCQ_SOAK_TASKS`` changes
the number of tasks (e.g. 100000 for a quick look).
"""

from __future__ import annotations

import os
import time
from pathlib import Path

import anyio
import chaosapp
import pytest
from chaoslib import Ledger, LedgerReport, rss_mb, runner_worker, stop_process, wait_settled
from redis.asyncio import Redis

from asyncq import Client, Task
from asyncq._broker import _keys as K
from asyncq._testing.redis_server import RedisServer
from asyncq.testing import wait_until

pytestmark = [pytest.mark.anyio, pytest.mark.chaos, pytest.mark.slow]

N = int(os.environ.get("ASYNCQ_SOAK_TASKS", "1000000"))
FAIL_P = 0.05
BATCH = 1000
BACKLOG = 50_000  # the producer keeps at most this many tasks pending
SAMPLE_EVERY = 5.0


@pytest.mark.timeout(1500)
async def test_soak_one_million_tasks_two_workers_random_failures(
    own_server: RedisServer, asyncq_redis_url: str, asyncq_queue: str, ledger: Ledger,
    tmp_path: Path,
) -> None:
    q = asyncq_queue
    qk = K.queue_keys(q)
    options = {"queues": {q: 1}, "concurrency": 50, "lease_duration": 10,
               "heartbeat_interval": 2, "retry_delay_ms": 10, "forward_interval": 0.2,
               "dequeue_batch": 100, "shutdown_timeout": 5}
    server = own_server
    redis = Redis.from_url(server.url)
    client = Client(server.url)
    samples: dict[int, list[tuple[int, float]]] = {}
    try:
        async with runner_worker(server.url, asyncq_redis_url, tmp_path / "w1.log",
                                 **options) as w1, \
                runner_worker(server.url, asyncq_redis_url, tmp_path / "w2.log",
                              **options) as w2:
            began = time.monotonic()
            async with anyio.create_task_group() as tg:
                tg.start_soon(_produce, client, redis, q, ledger)
                tg.start_soon(_sample, [w1.pid, w2.pid], redis, qk.processed, samples)
                await wait_until(lambda: _all_finished(redis, qk.processed, ledger),
                                 timeout=1400, message="every task finished")
                await wait_settled(redis, [q], timeout=60)
                tg.cancel_scope.cancel()
            wall = time.monotonic() - began
            for proc in (w1, w2):
                code, _ = await stop_process(proc, timeout=30)
                assert code == 0
        processed = int(await redis.get(qk.processed) or 0)
        failed = int(await redis.get(qk.failed) or 0)
        counts = {name: await redis.llen(key) for name, key in
                  (("pending", qk.pending), ("active", qk.active))}
        counts |= {name: await redis.zcard(key) for name, key in
                   (("retry", qk.retry), ("archived", qk.archived))}
    finally:
        await client.close()
        await redis.aclose()

    starts, finishes = await ledger.counts(N)
    runs = sum(starts)
    report = LedgerReport("soak", enqueued=N, completed=sum(1 for f in finishes if f == 1),
                          archived=counts["archived"],
                          duplicates=sum(f - 1 for f in finishes if f > 1),
                          lost=sum(1 for f in finishes if f == 0))
    rss = {pid: [mb for _, mb in series] for pid, series in samples.items()}
    report.extra = {
        "wall_s": round(wall, 1), "tasks_per_s": round(N / wall),
        "runs": runs, "failed_runs": runs - N, "redis_processed": processed,
        "redis_failed": failed, "rss_mb": {str(pid): _summary(series)
                                           for pid, series in samples.items()},
    }
    report.publish()
    assert report.lost == 0 and report.duplicates == 0 and report.completed == N, report
    assert counts == {"pending": 0, "active": 0, "retry": 0, "archived": 0}, counts
    # Every run is accounted for: the successes, plus one recorded failure per extra run.
    assert processed == runs and failed == runs - N, report
    assert 0.03 * N < runs - N < 0.08 * N  # the failures did happen
    # Flat memory: after warm-up (the first quarter), RSS grows by less than 15 MB.
    for pid, series in rss.items():
        warm = series[len(series) // 4:]
        assert len(warm) >= 3, series
        assert max(warm) - warm[0] < 15, (pid, series)


def _summary(series: list[tuple[int, float]]) -> dict[str, float]:
    """RSS when the worker started, once ~5 % of the runs were done (warm), after warm-up
    (a quarter of the samples), at the end, and the peak."""
    warm = next((mb for done, mb in series if done >= N // 20), series[-1][1])
    mbs = [mb for _, mb in series]
    return {"process_start": round(mbs[0], 1), "at_5pct": round(warm, 1),
            "after_warmup": round(mbs[len(mbs) // 4], 1), "end": round(mbs[-1], 1),
            "max": round(max(mbs), 1), "samples": len(mbs)}


async def _produce(client: Client, redis: Redis, queue: str, ledger: Ledger) -> None:
    pending = K.queue_keys(queue).pending
    for start in range(0, N, BATCH):
        await wait_until(lambda: _backlog_below(redis, pending), timeout=600)
        results = await client.enqueue_many(
            Task("chaos:flaky", chaosapp.payload(ledger.key, i, p=FAIL_P),
                 task_id=f"soak-{i}", queue=queue)
            for i in range(start, min(N, start + BATCH)))
        assert not [r for r in results if isinstance(r, Exception)], results[:3]


async def _backlog_below(redis: Redis, pending: str) -> bool:
    return bool(await redis.llen(pending) <= BACKLOG)


async def _sample(pids: list[int], redis: Redis, processed_key: str,
                  samples: dict[int, list[tuple[int, float]]]) -> None:
    while True:
        done = int(await redis.get(processed_key) or 0)
        for pid in pids:
            samples.setdefault(pid, []).append((done, rss_mb(pid)))
        await anyio.sleep(SAMPLE_EVERY)


async def _all_finished(redis: Redis, processed_key: str, ledger: Ledger) -> bool:
    if int(await redis.get(processed_key) or 0) < N:  # cheap, polled often
        return False
    return await ledger.finished(N) == N
