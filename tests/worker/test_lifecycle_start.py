"""A worker started while Redis is down (a pod started during an outage): with --health-port
(or --wait-for-redis yes) it waits, alive and not ready, and starts working once Redis answers;
with --processes the supervisor's processes wait too instead of crash-looping until it gives
up. Without probes (or with --wait-for-redis no) it still fails fast."""

from __future__ import annotations

import json
import os
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

import pytest

from asyncq import Client
from asyncq._testing.redis_server import RedisServer
from asyncq.testing import wait_until
from tests.helpers.ports import free_port
from tests.helpers.processes import log_events, worker_process

pytestmark = pytest.mark.anyio


def probe(port: int, path: str) -> tuple[int, dict[str, Any]] | None:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=10) as reply:
            return int(reply.status), json.loads(reply.read())
    except urllib.error.HTTPError as exc:
        return int(exc.code), json.loads(exc.read())
    except OSError:
        return None


@pytest.mark.parametrize("processes", [1, 2])
async def test_a_worker_started_while_redis_is_down_waits_not_ready(
    processes: int, own_server: RedisServer, tmp_path: Path,
) -> None:
    url = own_server.url
    own_server.stop()
    log = tmp_path / "worker.log"
    port = free_port()
    # (A supervisor that gives up quickly: a crash loop shows at once.)
    env = {**os.environ, "ASYNCQ_SUPERVISOR_POLICY": "first_delay=0.05,max_quick_crashes=2"}
    async with worker_process(url, "default", log, "--health-port", str(port),
                              "--processes", str(processes), env=env) as proc:
        def waiting() -> bool:
            assert proc.returncode is None, log.read_text()
            answer = probe(port, "/readyz")
            if answer is None or answer[0] != 503:
                return False
            states = ([p.get("status") for p in answer[1]["processes"].values()]
                      if processes > 1 else [answer[1]["status"]])
            return states == ["waiting for redis"] * processes

        await wait_until(waiting, timeout=60, message="not ready: waiting for redis")
        live = probe(port, "/livez")
        assert live is not None and live[0] == 200, live
        waits = [e for e in log_events(log) if e["event"].startswith("Redis does not answer")]
        assert len(waits) == processes, log.read_text()

        own_server.start()
        async with Client(url) as client:
            info = await client.enqueue("slow:echo", {"n": 1}, queue="default")

            def ready() -> bool:
                assert proc.returncode is None, log.read_text()
                answer = probe(port, "/readyz")
                return answer is not None and answer[0] == 200

            await wait_until(ready, timeout=60, message="ready once Redis answers")
            done = await client.wait(info, timeout=60)
        assert done.state.value == "completed"


@pytest.mark.parametrize("flags", [(), ("--health-port", "0", "--wait-for-redis", "no")])
async def test_without_waiting_a_worker_fails_fast_when_redis_is_down(
    flags: tuple[str, ...], own_server: RedisServer, tmp_path: Path,
) -> None:
    url = own_server.url
    own_server.stop()
    log = tmp_path / "worker.log"
    async with worker_process(url, "default", log, *flags) as proc:
        code = await proc.wait()
    assert code == 1 and "cannot reach Redis" in log.read_text(), log.read_text()
