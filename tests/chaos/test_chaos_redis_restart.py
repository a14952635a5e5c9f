"""Redis restarts (gracefully or after SIGKILL; AOF with ``appendfsync always``) while two
worker processes and a producer run: the workers reconnect with backoff and carry on, nothing
crashes, and no accepted task is lost."""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import Any

import anyio
import chaosapp
import pytest
from chaoslib import (
    Ledger,
    build_report,
    cli_worker,
    observer,
    stop_process,
    task_ids,
    wait_settled,
)
from redis.asyncio import Redis

from asyncq import BrokerError, Client, Task, TaskIDConflictError
from asyncq._broker import _keys as K
from asyncq._testing.redis_server import RedisServer
from asyncq.testing import wait_until
from tests.helpers.processes import log_events

pytestmark = [pytest.mark.anyio, pytest.mark.chaos]

N = 2000
DOWN = 1.0  # seconds the server stays down


class Producer:
    """Enqueues tasks 0..N-1 one by one through a ``Client(retry_attempts=...)``: a failed
    attempt is retried by the client, which recognises its own earlier attempt whose reply
    was lost, so every task is accepted exactly once and no TaskIDConflictError surfaces."""

    def __init__(self, client: Client, queue: str, ledger: Ledger, ids: list[str]) -> None:
        self.client, self.queue, self.ledger, self.ids = client, queue, ledger, ids
        self.accepted = 0
        self.gave_up = 0

    async def run(self) -> None:
        for i, task_id in enumerate(self.ids):
            task = Task("chaos:work", chaosapp.payload(self.ledger.key, i, ms=[0, 30]),
                        task_id=task_id, queue=self.queue, retention=3600)
            gave_up = False
            while True:
                try:
                    await self.client.enqueue(task)
                    break
                except BrokerError:  # retries exhausted (Redis down for long): start over
                    self.gave_up += 1
                    gave_up = True
                    assert self.gave_up < 10, "Redis did not come back"
                except TaskIDConflictError:
                    # Only possible after giving up: a new call can't know the last attempt
                    # of the previous one stored the task (see Client's idempotency note).
                    assert gave_up, f"{task_id}: conflict although the client retried"
                    break
            self.accepted += 1
            if i % 20 == 0:
                await anyio.sleep(0.01)  # a steady flow, not one burst


def producer_client(url: str) -> Client:
    return Client(url, retry_attempts=12)


@pytest.mark.parametrize("how", ["stop", "kill"], ids=["graceful restart", "crash restart"])
async def test_redis_restart_while_workers_and_producer_run(
    how: str, aof_server: RedisServer, asyncq_redis_url: str, asyncq_queue: str,
    ledger: Ledger, tmp_path: Path,
) -> None:
    q = asyncq_queue
    url = aof_server.url
    ids = task_ids("restart", N)
    args = ("--concurrency", "20", "--lease-duration", "2")
    logs = [tmp_path / "w1.log", tmp_path / "w2.log"]
    redis = observer(url)
    client = producer_client(url)
    try:
        async with cli_worker(url, q, asyncq_redis_url, logs[0], *args) as w1, \
                cli_worker(url, q, asyncq_redis_url, logs[1], *args) as w2:
            # Both workers are up (a worker that cannot reach Redis at start-up exits).
            await wait_until(lambda: _servers(redis, 2), timeout=20)
            producer = Producer(client, q, ledger, ids)
            async with anyio.create_task_group() as tg:
                tg.start_soon(producer.run)
                await wait_until(lambda: producer.accepted >= N // 4, timeout=30)
                await wait_until(lambda: _running(ledger), timeout=10)
                if how == "kill":
                    aof_server.kill()
                else:
                    aof_server.stop()
                await anyio.sleep(DOWN)  # the fault: Redis stays down for a while
                aof_server.start()
            assert producer.accepted == N
            await wait_settled(redis, [q], timeout=60)
            assert w1.returncode is None and w2.returncode is None, "a worker died"
            for proc in (w1, w2):
                code, _ = await stop_process(proc, timeout=15)
                assert code == 0
        report = await build_report(f"Redis {how} restart", redis, q, ledger, ids)
    finally:
        await client.close()
        await redis.aclose()

    events = [e for log in logs for e in log_events(log)]
    cancelled = sum(1 for e in events if e["event"] == "lease lost; handler cancelled")
    report.extra = {"enqueue_gave_up": producer.gave_up,
                    "lease_lost_cancellations": cancelled,
                    "worker_warnings": sorted({e["event"] for e in events
                                               if e.get("level") == "warning"})}
    report.publish()
    assert (report.completed, report.archived, report.lost) == (N, 0, 0), report
    # Only a handler whose lease could not be kept may run again.
    assert report.duplicates <= cancelled, report
    assert not [e for e in events if e.get("level") in ("error", "critical")], "errors logged"
    for log in logs:
        assert_outages_logged_at_edges(log_events(log))


def assert_outages_logged_at_edges(events: list[dict[str, Any]], most: int = 3) -> None:
    """Each loop of a worker logs an outage once when it starts and once when it ends — not
    once per retry (a loop may still be failing when the worker is stopped)."""
    key = ("component", "operation", "queue")
    started = Counter(tuple(e.get(k) for k in key) for e in events
                      if e["event"] == "redis calls failing")
    ended = Counter(tuple(e.get(k) for k in key) for e in events
                    if e["event"] == "redis calls recovered")
    assert started, "no outage was logged"
    assert all(0 <= started[k] - ended[k] <= 1 for k in started | ended), (started, ended)
    assert max(started.values()) <= most, started


async def _servers(redis: Redis, n: int) -> bool:
    return bool(await redis.zcard(K.SERVERS) == n)


async def _running(ledger: Ledger) -> bool:
    starts, finishes = await ledger.counts(N)
    return any(s and not f for s, f in zip(starts, finishes, strict=True))
