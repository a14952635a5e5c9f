"""Cancelling a running task: a process-run handler's child is killed (with what it started)
and the task archived; a thread-run sync handler, which cannot be stopped, is archived too and
reported as still running — a warning, a gauge — until its thread returns."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest
import structlog
from prometheus_client import CollectorRegistry
from redis.asyncio import Redis

from asyncq import Client, ServeMux, Task
from asyncq.metrics import WorkerMetrics
from asyncq.testing import WorkerFactory, wait_until
from tests.helpers.dataplane import task_hash
from tests.worker import hostile_handlers as h
from tests.worker.test_pool_hostile import alive, pid_in

pytestmark = pytest.mark.anyio

CANCELLED = b"TaskCancelledError: task cancelled on request"


async def test_cancelling_a_process_run_task_kills_its_child(
    asyncq_client: Client, asyncq_worker: WorkerFactory, asyncq_queue: str,
    redis_client: Redis, tmp_path: Path,
) -> None:
    """The handler spins (no limit of its own) with a process of its own that ignores
    SIGTERM: both are gone once the task is archived as cancelled."""
    mux = ServeMux()
    mux.handle("spin", h.fork_and_spin, isolate="process", timeout=0)
    pid_file = tmp_path / "grandchild"
    info = await asyncq_client.enqueue("spin", str(pid_file), queue=asyncq_queue, max_retry=3)
    async with asyncq_worker(mux, queues={asyncq_queue: 1}, concurrency=1,
                             process_pool_size=1, process_kill_grace=0.2) as w:
        pool = w.worker.processor.threads.procs
        assert pool is not None
        await wait_until(lambda: pid_file.exists() and pid_file.read_text() != "", timeout=30)
        [child] = pool.pids
        assert await asyncq_client.cancel(info.id, queue=asyncq_queue) == "requested"
        await w.wait_drained(asyncq_queue, timeout=30)
        fields = await task_hash(redis_client, asyncq_queue, info.id)
        assert (fields["state"], fields["error"]) == (b"archived", CANCELLED)
        await wait_until(lambda: not alive(child) and not alive(pid_in(pid_file)), timeout=10)
        assert pool.replaced == 1 and child not in pool.pids


async def test_a_cancelled_sync_thread_is_reported_running_until_it_returns(
    asyncq_client: Client, asyncq_worker: WorkerFactory, asyncq_queue: str,
    redis_client: Redis,
) -> None:
    registry = CollectorRegistry()
    started, gate = threading.Event(), threading.Event()

    def slow(task: Task) -> None:
        started.set()
        gate.wait(timeout=30)

    def still_running() -> float | None:
        return registry.get_sample_value("asyncq_worker_sync_threads_still_running",
                                         {"queue": asyncq_queue, "type": "slow"})

    mux = ServeMux()
    mux.handle("slow", slow, max_retry=3)
    info = await asyncq_client.enqueue("slow", queue=asyncq_queue)
    try:
        with structlog.testing.capture_logs() as logs:
            async with asyncq_worker(mux, queues={asyncq_queue: 1},
                                     metrics=WorkerMetrics(registry)) as w:
                await wait_until(started.is_set, timeout=10)
                assert await asyncq_client.cancel(info.id, queue=asyncq_queue) == "requested"
                await w.wait_drained(asyncq_queue, timeout=30)
                fields = await task_hash(redis_client, asyncq_queue, info.id)
                assert (fields["state"], fields["error"]) == (b"archived", CANCELLED)
                assert w.worker.processor.threads.left_behind == 1 and still_running() == 1
                gate.set()
                await wait_until(lambda: w.worker.processor.threads.left_behind == 0,
                                 timeout=10)
                assert still_running() == 0
    finally:
        gate.set()
    said = [(e["event"].split(":")[0], e["log_level"]) for e in logs
            if e.get("task_id") == info.id and e["event"].startswith("sync handler thread")]
    assert said == [("sync handler thread still running after its task ended", "warning"),
                    ("sync handler thread left behind returned", "info")]
