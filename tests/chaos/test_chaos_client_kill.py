"""Connections killed under load: ``CLIENT KILL TYPE normal`` (and ``TYPE pubsub``) every 50 ms
for a few seconds, from a separate connection, while two worker processes run and a producer
enqueues: no task is lost or left stuck, and the workers survive."""

from __future__ import annotations

import time
from pathlib import Path

import anyio
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
from test_chaos_redis_restart import (
    Producer,
    _servers,
    assert_outages_logged_at_edges,
    producer_client,
)

from asyncq._testing.redis_server import RedisServer
from asyncq.testing import wait_until
from tests.helpers.processes import log_events

pytestmark = [pytest.mark.anyio, pytest.mark.chaos]

N = 3000
KILL_EVERY = 0.05
KILL_ROUNDS = 60  # 3 s of killing


@pytest.mark.timeout(120)
async def test_connections_killed_under_load(
    aof_server: RedisServer, asyncq_redis_url: str, asyncq_queue: str, ledger: Ledger,
    tmp_path: Path,
) -> None:
    q = asyncq_queue
    url = aof_server.url
    ids = task_ids("kill-conn", N)
    args = ("--concurrency", "20", "--lease-duration", "2")
    logs = [tmp_path / "w1.log", tmp_path / "w2.log"]
    redis = observer(url)
    killer = Redis.from_url(url, single_connection_client=True)
    client = producer_client(url)
    killed = 0
    try:
        async with cli_worker(url, q, asyncq_redis_url, logs[0], *args) as w1, \
                cli_worker(url, q, asyncq_redis_url, logs[1], *args) as w2:
            # Both workers are up (a worker that cannot reach Redis at start-up exits).
            await wait_until(lambda: _servers(redis, 2), timeout=20)
            producer = Producer(client, q, ledger, ids)
            async with anyio.create_task_group() as tg:
                tg.start_soon(producer.run)
                await wait_until(lambda: producer.accepted >= N // 5, timeout=30)
                for i in range(KILL_ROUNDS):  # the fault, bounded
                    killed += await killer.execute_command("CLIENT", "KILL", "TYPE", "normal")
                    if i % 4 == 0:
                        killed += await killer.execute_command("CLIENT", "KILL", "TYPE", "pubsub")
                    await anyio.sleep(KILL_EVERY)
                faults_ended = time.monotonic()
            await wait_settled(redis, [q], timeout=60)
            settled_after = time.monotonic() - faults_ended
            assert w1.returncode is None and w2.returncode is None, "a worker died"
            for proc in (w1, w2):
                code, _ = await stop_process(proc, timeout=15)
                assert code == 0
        report = await build_report("CLIENT KILL under load", redis, q, ledger, ids)
    finally:
        await client.close()
        await killer.aclose()
        await redis.aclose()

    events = [e for log in logs for e in log_events(log)]
    cancelled = sum(1 for e in events if e["event"] == "lease lost; handler cancelled")
    report.extra = {"settled_s_after_faults": round(settled_after, 1),
                    "connections_killed": killed, "enqueue_gave_up": producer.gave_up,
                    "lease_lost_cancellations": cancelled,
                    "outages_logged": sum(1 for e in events
                                          if e["event"] == "redis calls failing")}
    report.publish()
    assert killed > KILL_ROUNDS
    assert (report.completed, report.archived, report.lost) == (N, 0, 0), report
    assert report.duplicates <= cancelled, report
    for log in logs:
        assert_outages_logged_at_edges(log_events(log), most=KILL_ROUNDS)
