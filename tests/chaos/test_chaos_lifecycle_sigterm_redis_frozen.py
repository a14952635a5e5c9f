"""SIGTERM to a worker process while its Redis is frozen (SIGSTOP: connections stay open and
nothing answers, so every call waits out its socket timeout): the process still exits within
--shutdown-timeout plus the few seconds docs/how-to/deploy.md promises, naming the task whose
outcome it could not write."""

from __future__ import annotations

import os
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

SHUTDOWN_TIMEOUT = 2.0
#: What docs/how-to/deploy.md promises beyond --shutdown-timeout.
FEW_SECONDS = 15.0


async def test_sigterm_while_redis_is_frozen_is_bounded(
    own_server: RedisServer, tmp_path: Path,
) -> None:
    log = tmp_path / "worker.log"
    async with Client(own_server.url) as client:
        info = await client.enqueue("slow:block", queue="default")
    async with worker_process(own_server.url, "default", log,
                              "--shutdown-timeout", str(SHUTDOWN_TIMEOUT)) as proc:
        redis = Redis.from_url(own_server.url)
        try:
            async def started() -> bool:  # (slow:block writes a result once it runs)
                assert proc.returncode is None, log.read_text()
                return "result" in await task_hash(redis, "default", info.id)
            await wait_until(started, timeout=30, message="the task started")
        finally:
            await redis.aclose()
        assert own_server.pid is not None
        os.kill(own_server.pid, signal.SIGSTOP)
        try:
            sent = time.monotonic()
            proc.send_signal(signal.SIGTERM)
            with anyio.fail_after(120):
                code = await proc.wait()
            took = time.monotonic() - sent
        finally:
            os.kill(own_server.pid, signal.SIGCONT)
    assert code == 0, log.read_text()
    assert took < SHUTDOWN_TIMEOUT + FEW_SECONDS, (took, log.read_text())
    left = [e for e in log_events(log) if e["event"].startswith("outcomes left unwritten")]
    assert len(left) == 1 and left[0]["task_ids"] == [info.id], log.read_text()
