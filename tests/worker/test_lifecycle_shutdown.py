"""SIGTERM while Redis is unreachable: the worker process exits within its shutdown timeout
plus a few seconds (it used to wait a lease duration for outcomes it could not write), and
names the tasks whose outcomes it left unwritten (their leases expire; they are recovered)."""

from __future__ import annotations

import signal
import time
from pathlib import Path

import anyio
import pytest
from redis.asyncio import Redis

from asyncq import Client
from asyncq._testing.redis_server import RedisServer
from asyncq.testing import wait_until
from tests.helpers.dataplane import task_hash
from tests.helpers.processes import log_events, worker_process

pytestmark = pytest.mark.anyio

#: What docs/how-to/deploy.md promises beyond --shutdown-timeout (generous here: the process
#: also starts Python and shares a loaded machine; waiting a lease out took 31 s).
FEW_SECONDS = 15.0


async def test_sigterm_while_redis_is_down_is_bounded_and_names_what_was_left(
    own_server: RedisServer, tmp_path: Path,
) -> None:
    log = tmp_path / "worker.log"
    async with Client(own_server.url) as client:
        info = await client.enqueue("slow:block", queue="default")
    async with worker_process(own_server.url, "default", log, "--shutdown-timeout", "1",
                              "--lease-duration", "30", "--heartbeat-interval", "0.5") as proc:
        def running() -> bool:
            assert proc.returncode is None, log.read_text()
            return any(e["event"] == "worker ready" for e in log_events(log))

        await wait_until(running, timeout=30, message="worker ready")
        redis = Redis.from_url(own_server.url)
        try:
            async def started() -> bool:  # (slow:block writes a result once it runs)
                return "result" in await task_hash(redis, "default", info.id)
            await wait_until(started, timeout=30, message="the task started")
        finally:
            await redis.aclose()
        own_server.stop()
        await wait_until(lambda: any(e["event"] == "redis calls failing"
                                     for e in log_events(log)), timeout=30,
                         message="the worker notices Redis is down")
        sent = time.monotonic()
        proc.send_signal(signal.SIGTERM)
        with anyio.fail_after(60):
            code = await proc.wait()
        took = time.monotonic() - sent
    assert code == 0, log.read_text()
    assert took < 1 + FEW_SECONDS, (took, log.read_text())
    left = [e for e in log_events(log) if e["event"].startswith("outcomes left unwritten")]
    assert len(left) == 1 and left[0]["task_ids"] == [info.id], log.read_text()

