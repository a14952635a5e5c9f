"""The producers' side of expiry: ``expires_in``/``expires_at`` reach the stored task from
``enqueue``, ``enqueue_many``, ``apply`` (which raises TaskFailedError saying it expired), the
SyncClient and a typed task's options; a type checker flags a wrong type."""

from __future__ import annotations

import os
import subprocess
import sys
from datetime import UTC, datetime, timedelta
from pathlib import Path

import anyio
import pytest
from anyio import to_thread

import asyncq
from asyncq import Client, ServeMux, SyncClient, Task, TaskFailedError
from asyncq.testing import WorkerFactory


@pytest.mark.anyio
async def test_enqueue_and_enqueue_many_store_the_expiry(
        asyncq_client: Client, asyncq_inspector: asyncq.Inspector, asyncq_queue: str) -> None:
    at = datetime.now(UTC) + timedelta(hours=2)
    one = await asyncq_client.enqueue("t", queue=asyncq_queue, expires_at=at)
    many = await asyncq_client.enqueue_many(
        [Task("t", queue=asyncq_queue, expires_in=60), Task("t", queue=asyncq_queue)])
    assert isinstance(many[0], asyncq.TaskInfo) and isinstance(many[1], asyncq.TaskInfo)
    assert abs((one.expires_at or at) - at) < timedelta(milliseconds=1)
    assert many[0].expires_at is not None and many[1].expires_at is None
    for info in (one, many[0], many[1]):
        stored = await asyncq_inspector.task_info(asyncq_queue, info.id)
        assert stored.expires_at == info.expires_at
    with pytest.raises(ValueError, match="not in the future"):
        await asyncq_client.enqueue_many([Task("t", queue=asyncq_queue, expires_at=datetime.now(
            UTC) - timedelta(seconds=1))])


@pytest.mark.anyio
async def test_apply_raises_saying_the_task_expired(
        asyncq_client: Client, asyncq_worker: WorkerFactory, asyncq_queue: str) -> None:
    ran: list[str] = []
    mux = ServeMux()

    @mux.handler("t")
    async def t(task: Task) -> str:
        ran.append(str(task.id))
        return "done"

    async def start_late() -> None:
        await anyio.sleep(0.6)  # the worker comes up after the task expired
        async with asyncq_worker(mux, queues={asyncq_queue: 1}) as w:
            await w.wait_drained(asyncq_queue)

    async with anyio.create_task_group() as tg:
        tg.start_soon(start_late)
        with pytest.raises(TaskFailedError) as failed:
            await asyncq_client.apply("t", queue=asyncq_queue, expires_in=0.3, timeout=10)
    assert failed.value.last_error is not None
    assert failed.value.last_error.startswith("expired: not started by its expiry at ")
    assert ran == []
    async with asyncq_worker(mux, queues={asyncq_queue: 1}):
        assert await asyncq_client.apply("t", queue=asyncq_queue, expires_in=60,
                                         timeout=10) == "done"


@pytest.mark.anyio
async def test_the_sync_client_and_typed_options_take_it(asyncq_redis_url: str,
                                                        asyncq_queue: str) -> None:
    mux = ServeMux()

    @mux.task("notify")
    async def notify(user: int) -> None: ...

    def produce() -> tuple[asyncq.TaskInfo, asyncq.TaskInfo]:
        with SyncClient(asyncq_redis_url) as client:
            plain = client.enqueue("t", queue=asyncq_queue, expires_in=timedelta(minutes=5))
            typed = notify.options(queue=asyncq_queue, expires_in=30).enqueue(client, 7)
            return plain, typed

    plain, typed = await to_thread.run_sync(produce)
    assert plain.enqueued_at is not None and typed.enqueued_at is not None
    assert plain.expires_at == plain.enqueued_at + timedelta(minutes=5)
    assert typed.expires_at == typed.enqueued_at + timedelta(seconds=30)


SNIPPET = '''\
from datetime import UTC, datetime, timedelta

import asyncq

mux = asyncq.ServeMux()
mux.handle("t", lambda task: None, expires_in=timedelta(minutes=5))


@mux.task("add", expires_in=60)
async def add(a: int, b: int) -> int:
    return a + b


async def main(client: asyncq.Client) -> None:
    await client.enqueue("t", 1, expires_in=5, process_in=1)
    await client.enqueue("t", 1, expires_at=datetime.now(UTC) + timedelta(hours=1))
    await client.apply("t", 1, timeout=5.0, expires_in=timedelta(seconds=30))
    add.options(expires_in=5)
    asyncq.Task("t", expires_in=1.5)
    await client.enqueue("t", 1, expires_in="5m")  # E
    await client.enqueue("t", 1, expires_at=5)  # E
    asyncq.Task("t", expires_at="2030-01-01")  # E
    add.options(expires_in=[1])  # E
    mux.handle("u", lambda task: None, expires_in="soon")  # E
'''


@pytest.mark.timeout(90)  # one mypy run, about 10 s with a fresh cache
def test_mypy_flags_a_wrong_expiry_type(tmp_path: Path) -> None:
    snippet = tmp_path / "expiry_snippet.py"
    snippet.write_text(SNIPPET)
    env = {**os.environ, "MYPYPATH": str(Path(asyncq.__file__).parent.parent)}
    out = subprocess.run(
        [sys.executable, "-m", "mypy", "--strict", "--cache-dir", str(tmp_path / "cache"),
         "--no-error-summary", "--python-version", "3.11", str(snippet)],
        capture_output=True, text=True, timeout=80, check=False, env=env, cwd=tmp_path)
    flagged = {int(line.split(":")[1]) for line in out.stdout.splitlines()
               if ": error: " in line}
    expected = {i + 1 for i, line in enumerate(SNIPPET.splitlines()) if line.endswith("# E")}
    assert flagged == expected, out.stdout + out.stderr
