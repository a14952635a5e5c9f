"""Worker processes: ``asyncq worker`` as a subprocess — SIGTERM, SIGKILL mid-task (another
worker recovers the task after its lease expires), and one-line errors for bad invocations."""

from __future__ import annotations

import signal
import subprocess
import time
from pathlib import Path
from typing import Any

import anyio
import orjson
import pytest
from redis.asyncio import Redis

from asyncq import Client, ServeMux, Task
from asyncq._broker import _keys as K
from asyncq.testing import WorkerFactory, wait_until
from tests.helpers.cli import out, run_main
from tests.helpers.dataplane import dead_redis_url, task_hash
from tests.helpers.processes import ROOT, SLOW_APP, log_events, worker_process

pytestmark = pytest.mark.anyio

TARGET = SLOW_APP




async def active_in(redis: Redis, queue: str, task_id: str) -> bytes | None:
    fields = await task_hash(redis, queue, task_id)
    return fields.get("owner") if fields.get("state") == b"active" else None


async def server_of(redis: Redis, pid: int) -> tuple[str, dict[str, Any]] | None:
    """The server key and state published by the worker process ``pid``, if any."""
    for key in await redis.zrange(K.SERVERS, 0, -1):
        raw = await redis.get(key)
        if raw is not None:
            doc: dict[str, Any] = orjson.loads(raw)
            if doc["pid"] == pid:
                return key.decode(), doc
    return None


async def test_sigterm_stops_the_worker_process_cleanly(
    asyncq_redis_url: str, asyncq_client: Client, asyncq_queue: str, redis_client: Redis,
    tmp_path: Path,
) -> None:
    log = tmp_path / "worker.log"
    info = await asyncq_client.enqueue("slow:block", queue=asyncq_queue)
    async with worker_process(asyncq_redis_url, asyncq_queue, log,
                              "--shutdown-timeout", "0.3") as proc:
        await wait_until(lambda: active_in(redis_client, asyncq_queue, info.id), timeout=10,
                         message="task running in the worker process")
        server_key, doc = await wait_until(lambda: server_of(redis_client, proc.pid), timeout=30)
        assert doc["status"] == "active" and doc["queues"] == {asyncq_queue: 1}
        sent = time.monotonic()
        proc.send_signal(signal.SIGTERM)
        with anyio.fail_after(30):
            code = await proc.wait()
    assert code == 0, log.read_text()
    assert time.monotonic() - sent < 30  # the blocked handler alone would never end
    assert await redis_client.exists(server_key) == 0
    assert await redis_client.zscore(K.SERVERS, server_key) is None
    # The running task was given back, not lost.
    fields = await task_hash(redis_client, asyncq_queue, info.id)
    assert fields["state"] == b"pending" and fields.get("retried", b"0") == b"0"
    events = [e["event"] for e in log_events(log)]
    assert "worker ready" in events and events[-1] == "worker stopped", events


async def test_task_of_a_killed_worker_is_recovered_and_completed_by_another(
    asyncq_redis_url: str, asyncq_client: Client, asyncq_worker: WorkerFactory,
    asyncq_queue: str, redis_client: Redis, tmp_path: Path,
) -> None:
    info = await asyncq_client.enqueue("slow:block", {"n": 1}, queue=asyncq_queue, retention=60)
    async with worker_process(asyncq_redis_url, asyncq_queue, tmp_path / "worker.log",
                              "--lease-duration", "2") as proc:
        await wait_until(lambda: active_in(redis_client, asyncq_queue, info.id), timeout=10,
                         message="task running in the worker process")
        proc.kill()  # SIGKILL: no shutdown, no requeue, the lease is left to expire
        assert await proc.wait() == -signal.SIGKILL
    killed = time.monotonic()
    assert await active_in(redis_client, asyncq_queue, info.id)

    runs: list[Task] = []
    mux = ServeMux()

    @mux.handler("slow:block")
    async def finish(task: Task) -> str:
        runs.append(task)
        return "done"

    async with asyncq_worker(mux, queues={asyncq_queue: 1}, recover_interval=0.2,
                             recover_grace=0.2, retry_delay=lambda n, e, t: 0) as w:
        await wait_until(lambda: runs, timeout=30, message="recovered task completed")
        await w.wait_drained(include_scheduled=True)
    recovered_after = time.monotonic() - killed
    assert [t.retried for t in runs] == [1]
    assert recovered_after < 30, recovered_after  # the lease's end, not the handler's (never)
    fields = await task_hash(redis_client, asyncq_queue, info.id)
    assert (fields["state"], fields["retried"]) == (b"completed", b"1")
    assert fields["error"] == b"LeaseExpiredError: task lease expired"
    assert fields["result"] == b'"done"'


def run_cli(*args: str) -> subprocess.CompletedProcess[str]:
    """``asyncq ARGS`` in-process, its output as text (as ``subprocess.run(text=True)``)."""
    ran = run_main(args, cwd=ROOT)
    return subprocess.CompletedProcess(args, ran.returncode, out(ran), ran.stderr.decode())


@pytest.mark.parametrize(
    ("args", "code", "message"),
    [
        (["nosuch.module:mux"], 1, "asyncq: error: cannot import 'nosuch.module'"),
        (["tests.apps.slow:nope"], 1, "has no attribute 'nope'"),
        ([TARGET, "--redis-url", dead_redis_url()], 1, "asyncq: error: cannot reach Redis at"),
        ([TARGET, "--redis-url", "http://x"], 1, "unsupported Redis URL"),
        ([TARGET, "--concurrency", "abc"], 2, "invalid int value: 'abc'"),
        ([TARGET, "--concurrency", "0"], 1, "concurrency must be an int >= 1"),
        ([TARGET, "--queue", "a=x"], 1, "--queue expects NAME=WEIGHT"),
        ([TARGET, "--lease-duration", "2", "--heartbeat-interval", "5"], 1,
         "at most half of lease_duration"),
        ([], 2, "required: TARGET"),
    ],
    ids=["bad module", "bad attribute", "unreachable redis", "bad url", "bad int",
         "bad concurrency", "bad queue", "slow heartbeat", "no target"],
)
def test_worker_command_errors_are_one_line(args: list[str], code: int, message: str) -> None:
    result = run_cli("worker", *args)
    assert result.returncode == code
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and message in lines[0], result.stderr
    assert "Traceback" not in result.stderr


def test_unknown_flag_is_reported_without_traceback() -> None:
    result = run_cli("worker", TARGET, "--bogus")
    assert result.returncode == 2
    assert "unrecognized arguments: --bogus" in result.stderr.strip().splitlines()[-1]
    assert "Traceback" not in result.stderr
