"""Expiry end to end: a task not started by its expiry never runs — with real worker processes
started after it expired (also a restarted one), by a handler's default for a task enqueued by
name, through the one-hop hand-off to an idle worker, from the prefetch buffer, and when its
retry would come after it; each archived with a reason saying "expired", announced as an event
and counted."""

from __future__ import annotations

import signal
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import anyio
import pytest
from redis.asyncio import Redis

from asyncq import (
    Client,
    FakeClock,
    Inspector,
    ServeMux,
    Task,
    TaskEvent,
    TaskInfo,
    TaskState,
)
from asyncq._broker import _keys as K
from asyncq.testing import WorkerFactory, wait_until
from tests.helpers.processes import worker_process

pytestmark = pytest.mark.anyio

APP = "tests.apps.expiry:mux"


async def past(when: datetime | None, margin: float = 0.5) -> None:
    """Let the clock pass ``when`` (plus a margin): the test is about time passing with no
    worker running, so there is no event to wait for."""
    assert when is not None
    await anyio.sleep(max(0.0, (when - datetime.now(UTC)).total_seconds()) + margin)


async def archived_as_expired(client: Client, info: TaskInfo) -> TaskInfo:
    final = await client.wait(info, timeout=20)
    assert final.state is TaskState.ARCHIVED, final
    assert final.last_error is not None and final.last_error.startswith("expired: "), final
    return final


async def test_a_task_that_expired_before_any_worker_ran_is_archived_unrun(
    asyncq_redis_url: str, asyncq_client: Client, asyncq_queue: str, redis_client: Redis,
    tmp_path: Path,
) -> None:
    """Enqueued with expires_in=0.5 while no worker runs; a worker process started a second
    later archives it (its dequeue does) and never runs its handler; a task enqueued with it
    but without an expiry runs."""
    expiring = await asyncq_client.enqueue(
        "expiry:run", {"mark": str(tmp_path / "expiring")}, queue=asyncq_queue, expires_in=0.5)
    control = await asyncq_client.enqueue(
        "expiry:run", {"mark": str(tmp_path / "control")}, queue=asyncq_queue)
    async with asyncq_client.events(asyncq_queue, task_ids=[expiring.id],
                                    states=["archived"]) as events:
        await past(expiring.expires_at)
        async with worker_process(asyncq_redis_url, asyncq_queue, tmp_path / "w.log",
                                  target=APP):
            with anyio.fail_after(20):
                event = await anext(aiter(events))
            await wait_until(lambda: (tmp_path / "control").exists(), timeout=20,
                             message="the control task ran")
    assert isinstance(event, TaskEvent)
    assert (event.state, event.previous, event.reason) == (
        TaskState.ARCHIVED, TaskState.PENDING, "expired")
    final = await archived_as_expired(asyncq_client, expiring)
    assert final.expires_at == expiring.expires_at
    assert final.started_at is None  # never leased, never run
    assert not (tmp_path / "expiring").exists()
    assert (tmp_path / "control").read_text() == control.id
    assert await redis_client.get(K.queue_keys(asyncq_queue).expired) == b"1"


async def test_a_task_that_expired_while_the_worker_was_restarting_never_runs(
    asyncq_redis_url: str, asyncq_client: Client, asyncq_queue: str, tmp_path: Path,
) -> None:
    log = tmp_path / "w.log"
    async with worker_process(asyncq_redis_url, asyncq_queue, log, target=APP) as proc:
        await asyncq_client.enqueue("expiry:run", {"mark": str(tmp_path / "before")},
                                    queue=asyncq_queue)
        await wait_until(lambda: (tmp_path / "before").exists(), timeout=20,
                         message="the worker ran a task")
        proc.send_signal(signal.SIGTERM)
        with anyio.fail_after(10):
            assert await proc.wait() == 0
    expiring = await asyncq_client.enqueue(
        "expiry:run", {"mark": str(tmp_path / "expiring")}, queue=asyncq_queue, expires_in=0.5)
    await asyncq_client.enqueue("expiry:run", {"mark": str(tmp_path / "after")},
                                queue=asyncq_queue)
    await past(expiring.expires_at)
    async with worker_process(asyncq_redis_url, asyncq_queue, log, target=APP, append=True):
        await wait_until(lambda: (tmp_path / "after").exists(), timeout=20,
                         message="the restarted worker ran a task")
        await archived_as_expired(asyncq_client, expiring)
    assert not (tmp_path / "expiring").exists()


async def test_a_handlers_default_expiry_applies_to_a_task_enqueued_by_name(
    asyncq_redis_url: str, asyncq_client: Client, asyncq_inspector: Inspector,
    asyncq_queue: str, redis_client: Redis, tmp_path: Path,
) -> None:
    """``@mux.handler("expiry:push", expires_in=0.5)``: the producer set nothing (it does not
    know the handler); the worker process resolves the expiry from the enqueue time when it
    would start the task, and the Inspector shows it from the worker's published options."""
    late = await asyncq_client.enqueue("expiry:push", {"mark": str(tmp_path / "late")},
                                       queue=asyncq_queue)
    assert late.expires_at is None  # the client alone cannot know the handler's default
    await anyio.sleep(1.0)  # no worker for a second: longer than the handler's expires_in
    async with worker_process(asyncq_redis_url, asyncq_queue, tmp_path / "w.log", target=APP):
        final = await archived_as_expired(asyncq_client, late)
        assert late.enqueued_at is not None
        assert final.last_error == (
            "expired: not started by its expiry at "
            + (late.enqueued_at + timedelta(seconds=0.5)).strftime("%Y-%m-%dT%H:%M:%S.%f")[:-3]
            + "Z")
        on_time = await asyncq_client.enqueue(
            "expiry:push", {"mark": str(tmp_path / "on_time")}, queue=asyncq_queue)
        await wait_until(lambda: (tmp_path / "on_time").exists(), timeout=20,
                         message="a push started in time ran")
        info = await asyncq_inspector.task_info(asyncq_queue, late.id)
        assert info.expires_at == late.enqueued_at + timedelta(seconds=0.5)
    assert not (tmp_path / "late").exists()
    assert on_time.id
    qk = K.queue_keys(asyncq_queue)
    # Archived unrun: counted as expired, not as a run that failed.
    assert await redis_client.mget(qk.expired, qk.failed) == [b"1", None]


def marking_mux(ran: list[str]) -> ServeMux:
    mux = ServeMux()

    @mux.handler("t")
    async def t(task: Task) -> None:
        ran.append(task.id)

    return mux


async def test_an_idle_worker_is_not_handed_an_expired_task(
    asyncq_client: Client, asyncq_worker: WorkerFactory, asyncq_redis_url: str,
    asyncq_queue: str, redis_client: Redis,
) -> None:
    """The enqueue script hands a new task straight to an idle worker (one hop) unless it has
    expired by the server's clock: then the worker is woken and its dequeue archives it."""
    ran: list[str] = []
    idle = K.queue_keys(asyncq_queue).idle

    async def registered() -> bool:
        return int(await redis_client.zcard(idle)) == 1

    behind = FakeClock(datetime.now(UTC) - timedelta(hours=1))  # a producer an hour behind
    async with Client(asyncq_redis_url, clock=behind) as late_client, \
            asyncq_worker(marking_mux(ran), queues={asyncq_queue: 1},
                          idle_poll_interval=30) as w:
        await wait_until(registered, timeout=20, message="the worker is idle")
        handed = await asyncq_client.enqueue("t", queue=asyncq_queue, expires_in=60)
        await wait_until(lambda: ran == [handed.id], timeout=20, message="handed off and run")
        await wait_until(registered, timeout=20, message="the worker is idle again")
        stale = await late_client.enqueue("t", queue=asyncq_queue, expires_in=60)
        await archived_as_expired(asyncq_client, stale)
        await w.wait_drained(asyncq_queue)
    assert ran == [handed.id]


async def test_a_prefetched_task_that_expires_in_the_buffer_is_archived_unrun(
    asyncq_client: Client, asyncq_worker: WorkerFactory, asyncq_queue: str,
) -> None:
    """Leased while its expiry was ahead, it waited in the worker's prefetch buffer behind a
    long task: the worker archives it as it would start it; the next one starts."""
    release = anyio.Event()
    ran: list[str] = []
    mux = ServeMux()

    @mux.handler("t")
    async def t(task: Task) -> None:
        ran.append(task.id)
        if task.json() == "block":
            await release.wait()

    async with asyncq_worker(mux, queues={asyncq_queue: 1}, concurrency=1, prefetch=2) as w:
        blocker = await asyncq_client.enqueue("t", "block", queue=asyncq_queue)
        await wait_until(lambda: ran == [blocker.id], timeout=20, message="blocker runs")
        expiring = await asyncq_client.enqueue("t", "x", queue=asyncq_queue, expires_in=0.5)
        after = await asyncq_client.enqueue("t", "y", queue=asyncq_queue)
        await wait_until(lambda: len(w.worker.processor.buffer) == 2, timeout=20,
                         message="both prefetched")
        await past(expiring.expires_at, margin=0.1)
        release.set()
        final = await archived_as_expired(asyncq_client, expiring)
        await wait_until(lambda: ran == [blocker.id, after.id], timeout=20,
                         message="the next buffered task ran")
        await w.wait_drained(asyncq_queue)
    assert final.started_at is not None  # leased (to the buffer), never run


async def test_a_retry_after_a_handlers_default_expiry_archives_at_once(
    asyncq_client: Client, asyncq_worker: WorkerFactory, asyncq_queue: str,
) -> None:
    runs: list[float] = []
    mux = ServeMux()

    @mux.handler("t", expires_in=2, retry_delay=30)
    async def t(task: Task) -> Any:
        runs.append(time.monotonic())
        raise RuntimeError("flaky")

    async with asyncq_worker(mux, queues={asyncq_queue: 1}) as w:
        info = await asyncq_client.enqueue("t", queue=asyncq_queue)
        final = await asyncq_client.wait(info, timeout=30)
        await w.wait_drained(asyncq_queue, include_scheduled=True)
    assert len(runs) == 1
    assert final.state is TaskState.ARCHIVED
    assert final.last_error is not None
    assert final.last_error.startswith("expired: its retry at ")
    assert final.last_error.endswith("; last error: RuntimeError: flaky")


async def test_a_scheduled_task_forwarded_after_its_expiry_never_runs(
    asyncq_client: Client, asyncq_worker: WorkerFactory, asyncq_queue: str,
) -> None:
    ran: list[str] = []
    info = await asyncq_client.enqueue("t", queue=asyncq_queue, process_in=0.3, expires_in=0.6)
    assert info.state is TaskState.SCHEDULED
    await past(info.expires_at, margin=0.3)  # due, then expired, while no worker ran
    async with asyncq_client.events(asyncq_queue, task_ids=[info.id],
                                    states=["archived"]) as events, \
            asyncq_worker(marking_mux(ran), queues={asyncq_queue: 1}) as w:
        with anyio.fail_after(10):
            event = await anext(aiter(events))
        await w.wait_drained(asyncq_queue, include_scheduled=True)
    assert isinstance(event, TaskEvent)
    assert (event.previous, event.reason) == (TaskState.SCHEDULED, "expired")
    assert ran == []
