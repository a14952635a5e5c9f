"""A cancel sent while the worker's pub/sub connection is reconnecting (issue 12 item 3): a
worker process runs 20-second tasks; each round kills its pub/sub connection (``CLIENT KILL
TYPE pubsub``) and cancels one task 0-50 ms later. Every cancellation is honoured within
seconds (the marker is read on reconnect), none of the tasks runs to its end."""

from __future__ import annotations

import time
from pathlib import Path

import anyio
import chaosapp
import pytest
from chaoslib import Ledger, cli_worker, observer, stop_process

from asyncq import Client, Task
from asyncq._broker import _keys as K
from asyncq._testing.redis_server import RedisServer
from asyncq.testing import wait_until

pytestmark = [pytest.mark.anyio, pytest.mark.chaos]

DELAYS_MS = [0, 5, 10, 20, 30, 40, 50, 0, 25, 50]


async def _started(ledger: Ledger, n: int) -> bool:
    starts, _ = await ledger.counts(n + 1)
    return bool(starts[n])


@pytest.mark.timeout(120)
async def test_cancel_during_pubsub_reconnect_is_honoured(
    own_server: RedisServer, asyncq_redis_url: str, asyncq_queue: str, ledger: Ledger,
    tmp_path: Path,
) -> None:
    q = asyncq_queue
    url = own_server.url
    redis = observer(url)
    took: list[float] = []
    try:
        async with Client(url) as client, \
                cli_worker(url, q, asyncq_redis_url, tmp_path / "w.log",
                           "--concurrency", "4") as proc:
            for n, delay_ms in enumerate(DELAYS_MS):
                info = await client.enqueue(Task(
                    "chaos:work", chaosapp.payload(ledger.key, n, ms=20_000),
                    task_id=f"cancel-{n}", queue=q, max_retry=0))
                await wait_until(lambda n=n: _started(ledger, n), timeout=30,
                                 message="task started")
                assert await redis.execute_command("CLIENT", "KILL", "TYPE", "pubsub") >= 1
                await anyio.sleep(delay_ms / 1000)
                sent = time.monotonic()
                assert await client.cancel(info.id, queue=q) == "requested"

                async def archived(task_id: str = info.id or "") -> bool:
                    state = await redis.hget(K.queue_keys(q).task(task_id), "state")
                    return bool(state == b"archived")

                await wait_until(archived, timeout=10, message=f"cancel {n} honoured")
                took.append(round(time.monotonic() - sent, 2))
            assert proc.returncode is None, "the worker died"
            code, _ = await stop_process(proc, timeout=15)
            assert code == 0
        starts, finishes = await ledger.counts(len(DELAYS_MS))
        for n in range(len(DELAYS_MS)):
            error = await redis.hget(K.queue_keys(q).task(f"cancel-{n}"), "error")
            assert error == b"TaskCancelledError: task cancelled on request"
    finally:
        await redis.aclose()
    print(f"\ncancel honoured after (s): {took}")
    assert starts == [1] * len(DELAYS_MS)
    assert finishes == [0] * len(DELAYS_MS)
