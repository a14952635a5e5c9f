"""Worker lifespan: entered before the first task runs, exited after the last outcome is
written; what it yields is every task's ``state``; a failing start stops the worker."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import anyio
import pytest
import structlog
from redis.asyncio import Redis

from asyncq import AsyncqError, Client, ServeMux, Task, Worker, WorkerConfig, WorkerStartupError
from asyncq.testing import wait_until
from tests.helpers.dataplane import task_hash

pytestmark = pytest.mark.anyio


async def _state(redis: Redis, queue: str, task_id: str) -> str:
    fields = await task_hash(redis, queue, task_id)
    return fields.get("state", b"gone").decode()


async def test_lifespan_wraps_every_task_and_its_value_is_task_state(
    asyncq_client: Client, asyncq_redis_url: str, asyncq_queue: str, redis_client: Redis,
) -> None:
    """One ledger: the lifespan is entered while the task is still pending, the handlers see
    its value, and it exits only after the outcome of a task still running at shutdown was
    written (here: completed while the worker drained)."""
    ledger: list[str] = []
    pool = object()
    first = await asyncq_client.enqueue("quick", queue=asyncq_queue, retention=60)
    slow = await asyncq_client.enqueue("slow", queue=asyncq_queue, retention=60)
    release = asyncio.Event()

    @asynccontextmanager
    async def lifespan() -> AsyncIterator[object]:
        ledger.append(f"enter: quick {await _state(redis_client, asyncq_queue, first.id)}")
        yield pool
        ledger.append(f"exit: slow {await _state(redis_client, asyncq_queue, slow.id)}")

    mux = ServeMux()

    @mux.handler("quick")
    async def quick(task: Task) -> None:
        ledger.append(f"quick sees the pool: {task.state is pool}")

    @mux.handler("slow")
    async def slow_handler(task: Task) -> None:
        ledger.append(f"slow sees the pool: {task.state is pool}")
        await release.wait()
        ledger.append("slow done")

    worker = Worker(asyncq_redis_url, mux, queues={asyncq_queue: 1}, lifespan=lifespan,
                    shutdown_timeout=10)
    async with anyio.create_task_group() as tg:
        tg.start_soon(worker.run)
        await wait_until(lambda: "slow sees the pool: True" in ledger, message="slow started")
        worker.stop()  # the slow task is still running: the worker drains it
        await wait_until(lambda: not worker.processor.fetching, message="stopping")
        assert not any(entry.startswith("exit") for entry in ledger)
        release.set()
    assert ledger[0] == "enter: quick pending"
    assert set(ledger[1:3]) == {"quick sees the pool: True", "slow sees the pool: True"}
    assert ledger[3:] == ["slow done", "exit: slow completed"]


async def test_lifespan_exits_after_a_task_requeued_at_shutdown_was_written(
    asyncq_client: Client, asyncq_redis_url: str, asyncq_queue: str, redis_client: Redis,
) -> None:
    ledger: list[str] = []
    info = await asyncq_client.enqueue("stuck", queue=asyncq_queue)

    @asynccontextmanager
    async def lifespan() -> AsyncIterator[None]:
        yield
        ledger.append(f"exit: {await _state(redis_client, asyncq_queue, info.id)}")

    async def stuck(task: Task) -> None:
        ledger.append("started")
        await asyncio.Event().wait()

    async with Worker(asyncq_redis_url, stuck, queues={asyncq_queue: 1}, lifespan=lifespan,
                      shutdown_timeout=0.1):
        await wait_until(lambda: ledger == ["started"], message="handler started")
    assert ledger == ["started", "exit: pending"]  # requeued before the lifespan closed


async def test_task_state_is_none_without_a_lifespan(
    asyncq_client: Client, asyncq_redis_url: str, asyncq_queue: str,
) -> None:
    seen: list[Any] = []

    async def handler(task: Task) -> None:
        seen.append(task.state)

    await asyncq_client.enqueue("t", queue=asyncq_queue)
    async with Worker(asyncq_redis_url, handler, queues={asyncq_queue: 1}):
        await wait_until(lambda: seen, message="task ran")
    assert seen == [None]
    assert Task("t").state is None


async def test_a_failing_lifespan_start_stops_the_worker_with_a_clear_error(
    asyncq_client: Client, asyncq_redis_url: str, asyncq_queue: str, redis_client: Redis,
) -> None:
    ran: list[str] = []
    info = await asyncq_client.enqueue("t", queue=asyncq_queue)

    @asynccontextmanager
    async def open_database() -> AsyncIterator[None]:
        raise ConnectionRefusedError("database at db:5432 refused the connection")
        yield

    async def handler(task: Task) -> None:
        ran.append(task.type)

    worker = Worker(asyncq_redis_url, handler, queues={asyncq_queue: 1},
                    lifespan=open_database)
    with pytest.raises(WorkerStartupError) as caught:
        await worker.run(handle_signals=False)
    assert isinstance(caught.value, AsyncqError)
    assert "open_database failed to start" in str(caught.value)
    assert "database at db:5432 refused the connection" in str(caught.value)
    assert isinstance(caught.value.__cause__, ConnectionRefusedError)
    assert "\n" not in str(caught.value)  # one line, for the command's message
    # Nothing was fetched, and `async with` reports the same error.
    with pytest.raises(WorkerStartupError, match="open_database"):
        async with Worker(asyncq_redis_url, handler, queues={asyncq_queue: 1},
                          lifespan=open_database):
            pass
    assert ran == [] and await _state(redis_client, asyncq_queue, info.id) == "pending"


async def test_a_lifespan_that_is_not_an_async_context_manager_is_explained(
    asyncq_redis_url: str, asyncq_queue: str,
) -> None:
    async def not_a_manager() -> None: ...

    async def handler(task: Task) -> None: ...

    worker = Worker(asyncq_redis_url, handler, queues={asyncq_queue: 1},
                    lifespan=not_a_manager)  # type: ignore[arg-type]
    with pytest.raises(WorkerStartupError, match="asynccontextmanager"):
        await worker.run(handle_signals=False)

    @asynccontextmanager
    async def manager() -> AsyncIterator[None]:
        yield

    with pytest.raises(TypeError, match="pass the function"):
        WorkerConfig(lifespan=manager())  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="lifespan must be a function"):
        WorkerConfig(lifespan="db")  # type: ignore[arg-type]


async def test_an_error_in_the_lifespan_exit_is_logged_and_the_worker_stops(
    asyncq_redis_url: str, asyncq_queue: str,
) -> None:
    @asynccontextmanager
    async def lifespan() -> AsyncIterator[None]:
        yield
        raise RuntimeError("pool close failed")

    async def handler(task: Task) -> None: ...

    with structlog.testing.capture_logs() as logs:
        async with Worker(asyncq_redis_url, handler, queues={asyncq_queue: 1},
                          lifespan=lifespan):
            pass
    errors = [e for e in logs if e["event"] == "worker lifespan failed to exit cleanly"]
    assert len(errors) == 1 and "pool close failed" in errors[0]["error"]
    assert any(e["event"] == "worker stopped" for e in logs)


async def test_stop_during_a_slow_lifespan_start_ends_the_worker(
    asyncq_redis_url: str, asyncq_queue: str,
) -> None:
    entered = asyncio.Event()

    @asynccontextmanager
    async def lifespan() -> AsyncIterator[None]:
        entered.set()
        await asyncio.Event().wait()
        yield

    async def handler(task: Task) -> None: ...

    worker = Worker(asyncq_redis_url, handler, queues={asyncq_queue: 1}, lifespan=lifespan)
    with anyio.fail_after(30):
        async with anyio.create_task_group() as tg:
            tg.start_soon(worker.run)
            await entered.wait()
            worker.stop()
    assert not worker.ready
