"""Issue 12 item 12 (operator half): ``Inspector.recover_task`` and ``asyncq task recover``
send back a task stranded in "active" by a worker that is gone, or whose lease expired; a task
whose lease is live on a live worker is refused (cancel it instead)."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime, timedelta

import anyio
import pytest
from redis.asyncio import Redis

from asyncq import (
    Client,
    FakeClock,
    Inspector,
    ServeMux,
    Task,
    TaskNotFoundError,
    TaskState,
    TaskStateError,
)
from asyncq._broker import WorkerRecord
from asyncq._broker._connection import make_broker
from asyncq.testing import WorkerFactory, wait_until
from tests.helpers.cli import Cli

pytestmark = pytest.mark.anyio

GONE = f"worker-that-died-{uuid.uuid4().hex[:8]}"


async def strand(url: str, queue: str, client: Client, *, lease_ms: int = 600_000,
                 alive: bool = False, **options: object) -> str:
    """A task leased by a worker that never comes back (its lease still runs ``lease_ms``);
    ``alive``: that worker's server state is still published."""
    info = await client.enqueue(Task("t", queue=queue, **options))
    broker = make_broker(url)
    try:
        (raw,), _ = await broker.dequeue(queue, 1, GONE, lease_ms, 1000)
        assert raw.id == info.id
        if alive:
            await broker.workers.write(
                WorkerRecord(GONE, "h", 1, 1, {queue: 1}, False, "active", 0), 600_000)
        else:
            await broker.workers.clear(GONE)
    finally:
        await broker.close()
    return info.id


async def test_a_task_of_a_gone_worker_is_recovered_and_runs(
    asyncq_client: Client, asyncq_redis_url: str, asyncq_queue: str,
    asyncq_worker: WorkerFactory,
) -> None:
    q = asyncq_queue
    task_id = await strand(asyncq_redis_url, q, asyncq_client)
    async with Inspector(asyncq_redis_url) as inspector:
        # No worker would recover it before its 10-minute lease ends.
        await inspector.recover_task(q, task_id)
        info = await inspector.task_info(q, task_id)
        assert info.state is TaskState.RETRY and info.retried == 1
        assert info.last_error == (f"LeaseExpiredError: recovered by an operator: its worker "
                                   f"{GONE!r} is gone")
        ran: list[str] = []
        mux = ServeMux()

        async def handler(task: Task) -> None:
            ran.append(task.id or "")
        mux.handle("t", handler)
        async with asyncq_worker(mux, queues={q: 1}, forward_interval=0.05):
            await wait_until(lambda: ran, timeout=10, message="recovered task ran")
        assert ran == [task_id]


async def test_an_expired_lease_is_recovered_even_if_its_worker_lives(
    asyncq_client: Client, asyncq_redis_url: str, asyncq_queue: str,
) -> None:
    q = asyncq_queue
    task_id = await strand(asyncq_redis_url, q, asyncq_client, lease_ms=1, alive=True,
                           max_retry=0)
    # Read a second later (a clock of its own), the 1 ms lease has run out.
    later = FakeClock(datetime.now(UTC) + timedelta(seconds=1))
    async with Inspector(asyncq_redis_url, clock=later) as inspector:
        await inspector.recover_task(q, task_id)
        info = await inspector.task_info(q, task_id)
        assert info.state is TaskState.ARCHIVED  # no retries left
        assert info.last_error.endswith("its lease expired")


async def test_a_live_lease_or_a_task_not_active_is_refused(
    asyncq_client: Client, asyncq_redis_url: str, asyncq_queue: str,
    asyncq_worker: WorkerFactory,
) -> None:
    q = asyncq_queue
    started = anyio.Event()
    mux = ServeMux()

    async def handler(task: Task) -> None:
        started.set()
        await anyio.sleep(30)
    mux.handle("t", handler)
    pending = await asyncq_client.enqueue(Task("other", queue=q, process_in=60))
    async with Inspector(asyncq_redis_url) as inspector:
        with pytest.raises(TaskStateError, match="not active"):
            await inspector.recover_task(q, pending.id)
        with pytest.raises(TaskNotFoundError):
            await inspector.recover_task(q, "no-such-task")
        alive_id = await strand(asyncq_redis_url, q, asyncq_client, alive=True)
        with pytest.raises(TaskStateError, match="cancel it instead"):
            await inspector.recover_task(q, alive_id)
        info = await asyncq_client.enqueue(Task("t", queue=q))
        async with asyncq_worker(mux, queues={q: 1}, heartbeat_interval=0.1):
            await started.wait()
            with pytest.raises(TaskStateError, match="live worker"):
                await inspector.recover_task(q, info.id)
            assert (await inspector.task_info(q, info.id)).state is TaskState.ACTIVE
            assert await inspector.cancel(info.id, queue=q)


async def test_cli_task_recover(asyncq_client: Client, asyncq_redis_url: str, asyncq_queue: str,
                                redis_client: Redis, cli: Cli) -> None:
    q = asyncq_queue
    task_id = await strand(asyncq_redis_url, q, asyncq_client)
    rm = await cli("queue", "delete", q, "--force", ok=None)
    assert rm.returncode == 1 and b"recover" in rm.stderr
    done = await cli("task", "recover", "-q", q, task_id, ok=None)
    assert done.returncode == 0, done.stderr
    assert done.stdout.decode().strip() == f"recovered task {task_id}: now retry"
    again = await cli("task", "recover", "-q", q, task_id, ok=None)
    assert again.returncode == 1 and b"not active" in again.stderr

