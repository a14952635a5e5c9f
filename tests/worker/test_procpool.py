"""CPU-bound handlers in child processes (``isolate="process"``): real children, real Redis.
They run in parallel, the event loop keeps serving other tasks meanwhile, a run past its limit
is killed and its slot given back, a soft limit raises inside the handler, and children are
recycled after ``max_tasks_per_child`` runs or once over ``max_memory_per_child``."""

from __future__ import annotations

import asyncio
import hashlib
import os
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
from tests.worker import procpool_handlers as h

pytestmark = pytest.mark.anyio


async def test_two_cpu_tasks_run_at_once_in_two_child_processes(
    asyncq_client: Client, asyncq_worker: WorkerFactory, asyncq_queue: str, tmp_path: Path,
) -> None:
    """Each run waits until the other has started (it fails after 20 s otherwise): both return
    only if they ran at the same time, each in its own child, neither in the worker."""
    mux = ServeMux()
    mux.handle("meet", h.meet, isolate="process")
    infos = [await asyncq_client.enqueue("meet", {"dir": str(tmp_path), "count": 2},
                                         queue=asyncq_queue, max_retry=0, timeout=30)
             for _ in range(2)]
    async with asyncq_worker(mux, queues={asyncq_queue: 1}, concurrency=4,
                             process_pool_size=2):
        runs = [await asyncq_client.result(i.id, queue=asyncq_queue, timeout=60)
                for i in infos]
    pids = {run["pid"] for run in runs}
    assert len(pids) == 2 and os.getpid() not in pids
    first, second = sorted(runs, key=lambda run: run["start"])
    assert second["start"] < first["end"]  # the intervals overlap


async def test_an_io_task_completes_while_cpu_tasks_hold_every_child(
    asyncq_client: Client, asyncq_worker: WorkerFactory, asyncq_queue: str, tmp_path: Path,
) -> None:
    """Both children spin until a third run joins them, which never happens while the async
    task is served: it completes on the worker's event loop with the children busy."""
    done = asyncio.Event()
    mux = ServeMux()
    mux.handle("meet", h.meet, isolate="process")

    @mux.handler("io")
    async def io(task: Task) -> str:
        done.set()
        return "served"

    spec = {"dir": str(tmp_path), "count": 3}
    cpu = [await asyncq_client.enqueue("meet", spec, queue=asyncq_queue, max_retry=0,
                                       timeout=30) for _ in range(2)]
    async with asyncq_worker(mux, queues={asyncq_queue: 1}, concurrency=4,
                             process_pool_size=2):
        await wait_until(lambda: _entries(tmp_path) == 2,
                         message="both CPU tasks running in children")
        io_task = await asyncq_client.enqueue("io", queue=asyncq_queue)
        assert await asyncq_client.result(io_task.id, queue=asyncq_queue, timeout=10) == "served"
        assert _entries(tmp_path) == 2  # the CPU tasks still run
        _add(tmp_path / "release")  # the third entry: they return
        for info in cpu:
            assert (await asyncq_client.result(info.id, queue=asyncq_queue, timeout=30))["pid"]


async def test_a_hung_cpu_task_is_killed_at_its_timeout_and_its_slot_comes_back(
    asyncq_client: Client, asyncq_worker: WorkerFactory, asyncq_queue: str,
    redis_client: Redis,
) -> None:
    """``while True: pass`` in the only child: at its timeout the child is killed, the task is
    archived with a timeout error, and a fresh child runs the next task."""
    mux = ServeMux()
    mux.handle("hang", h.spin_forever, isolate="process", timeout=0.5)
    mux.handle("pid", h.pid, isolate="process")
    hung = await asyncq_client.enqueue("hang", queue=asyncq_queue, max_retry=0)
    async with asyncq_worker(mux, queues={asyncq_queue: 1}, concurrency=2,
                             process_pool_size=1, process_kill_grace=0.2) as w:
        pool = w.worker.processor.threads.procs
        assert pool is not None
        await wait_until(lambda: pool.pids != [], message="the child started")
        hung_pid = pool.pids[0]
        await wait_until(lambda: pool.replaced == 1, timeout=10, message="child replaced")
        fields = await task_hash(redis_client, asyncq_queue, hung.id)
        assert fields["state"] == b"archived"
        assert fields["error"].startswith(b"TimeoutError")
        with pytest.raises(ProcessLookupError):
            os.kill(hung_pid, 0)  # the hung child is gone
        nxt = await asyncq_client.enqueue("pid", queue=asyncq_queue, retention=60)
        new_pid = await asyncq_client.result(nxt.id, queue=asyncq_queue, timeout=20)
    assert new_pid != hung_pid


async def test_a_child_that_dies_fails_its_task_and_is_replaced(
    asyncq_client: Client, asyncq_worker: WorkerFactory, asyncq_queue: str,
    redis_client: Redis,
) -> None:
    mux = ServeMux()
    mux.handle("crash", h.crash, isolate="process")
    mux.handle("pid", h.pid, isolate="process")
    crashed = await asyncq_client.enqueue("crash", queue=asyncq_queue, max_retry=0)
    async with asyncq_worker(mux, queues={asyncq_queue: 1}, process_pool_size=1) as w:
        await w.wait_drained(asyncq_queue)
        fields = await task_hash(redis_client, asyncq_queue, crashed.id)
        assert fields["state"] == b"archived"
        assert b"exited with code 3" in fields["error"]
        nxt = await asyncq_client.enqueue("pid", queue=asyncq_queue, retention=60)
        assert await asyncq_client.result(nxt.id, queue=asyncq_queue, timeout=20) > 0


async def test_the_soft_limit_raises_inside_the_handler_before_the_hard_one(
    asyncq_client: Client, asyncq_worker: WorkerFactory, asyncq_queue: str,
) -> None:
    mux = ServeMux()
    mux.handle("soft", h.catch_soft_limit, isolate="process", timeout=5, soft_timeout=4.7)
    info = await asyncq_client.enqueue("soft", queue=asyncq_queue, max_retry=0)
    async with asyncq_worker(mux, queues={asyncq_queue: 1}, process_pool_size=1):
        result = await asyncq_client.result(info.id, queue=asyncq_queue, timeout=20)
    assert result.startswith("soft limit reached in ")


async def test_a_child_is_replaced_after_max_tasks_per_child_runs(
    asyncq_client: Client, asyncq_worker: WorkerFactory, asyncq_queue: str,
) -> None:
    mux = ServeMux()
    mux.handle("pid", h.pid, isolate="process")
    pids = []
    async with asyncq_worker(mux, queues={asyncq_queue: 1}, process_pool_size=1,
                             max_tasks_per_child=2):
        for _ in range(4):
            info = await asyncq_client.enqueue("pid", queue=asyncq_queue, retention=60)
            pids.append(await asyncq_client.result(info.id, queue=asyncq_queue, timeout=20))
    assert pids[0] == pids[1] != pids[2] == pids[3]


async def test_a_child_over_max_memory_per_child_is_replaced_after_its_task(
    asyncq_client: Client, asyncq_worker: WorkerFactory, asyncq_queue: str,
) -> None:
    """A handler that leaks past the cap still succeeds (the check is after the task, not
    during it); the next task runs in a fresh child. A child under the cap is kept."""
    cap = 160 * 1024  # KiB
    mux = ServeMux()
    mux.handle("memory", h.memory, isolate="process")
    mux.handle("grow", h.grow, isolate="process")

    async def run(task_type: str, payload: object = None) -> dict[str, int]:
        info = await asyncq_client.enqueue(task_type, payload, queue=asyncq_queue,
                                           retention=60, max_retry=0)
        result: dict[str, int] = await asyncq_client.result(info.id, queue=asyncq_queue,
                                                            timeout=30)
        return result

    registry = CollectorRegistry()
    with structlog.testing.capture_logs() as logs:
        async with asyncq_worker(mux, queues={asyncq_queue: 1}, process_pool_size=1,
                                 max_memory_per_child=cap, metrics=WorkerMetrics(registry)) as w:
            pool = w.worker.processor.threads.procs
            assert pool is not None
            first = await run("memory")
            assert first["rss_kib"] < cap  # (else the test proves nothing)
            second = await run("memory")
            grown = await run("grow", {"to_kib": cap + 20 * 1024})
            after = await run("memory")
    assert second["pid"] == first["pid"]  # under the cap: the same child
    assert grown["pid"] == first["pid"] and grown["rss_kib"] > cap
    assert after["pid"] != grown["pid"] and after["rss_kib"] < cap
    assert pool.over_memory == 1 and pool.replaced == 0
    [line] = [e for e in logs if e["event"].startswith("handler process over max_memory")]
    assert (line["pid"], line["type"], line["max_memory_per_child"]) == (
        grown["pid"], "grow", cap)
    assert line["rss_kib"] > cap
    assert registry.get_sample_value("asyncq_worker_process_memory_recycles_total",
                                     {"queue": asyncq_queue, "type": "grow"}) == 1


async def test_an_error_in_the_child_is_the_task_error_and_retry_on_sees_its_type(
    asyncq_client: Client, asyncq_worker: WorkerFactory, asyncq_queue: str,
    redis_client: Redis,
) -> None:
    mux = ServeMux()
    mux.handle("fail", h.fail, isolate="process", retry_on=KeyError, max_retry=5)
    info = await asyncq_client.enqueue("fail", "x", queue=asyncq_queue)
    async with asyncq_worker(mux, queues={asyncq_queue: 1}, process_pool_size=1) as w:
        await w.wait_drained(asyncq_queue)
    fields = await task_hash(redis_client, asyncq_queue, info.id)
    assert fields["state"] == b"archived"  # LookupError is no KeyError: archived at once
    assert b"no such thing: x" in fields["error"]


async def test_sync_handlers_process_runs_plain_defs_in_children_unless_isolate_thread(
    asyncq_client: Client, asyncq_worker: WorkerFactory, asyncq_queue: str,
) -> None:
    mux = ServeMux()
    mux.handle("pid", h.pid)
    mux.handle("pid:thread", h.pid, isolate="thread")
    async with asyncq_worker(mux, queues={asyncq_queue: 1}, sync_handlers="process",
                             process_pool_size=1):
        a = await asyncq_client.enqueue("pid", queue=asyncq_queue, retention=60)
        b = await asyncq_client.enqueue("pid:thread", queue=asyncq_queue, retention=60)
        in_child = await asyncq_client.result(a.id, queue=asyncq_queue, timeout=20)
        in_thread = await asyncq_client.result(b.id, queue=asyncq_queue, timeout=20)
    assert in_child != os.getpid() and in_thread == os.getpid()


def test_a_handler_a_child_cannot_import_is_refused_at_registration() -> None:
    mux = ServeMux()

    def local(task: Task) -> None: ...

    with pytest.raises(ValueError, match="module level"):
        mux.handle("local", local, isolate="process")
    with pytest.raises(ValueError, match="module level"):
        mux.handler("local2", isolate="process")(local)
    with pytest.raises(ValueError, match="isolate must be"):
        mux.handle("x", h.pid, isolate="fork")
    with pytest.raises(ValueError, match="soft_timeout needs isolate='process'"):
        mux.handle("y", h.pid, soft_timeout=1)
    with pytest.raises(ValueError, match="less than timeout"):
        mux.handle("z", h.pid, isolate="process", timeout=1, soft_timeout=2)


async def test_a_typed_task_runs_in_a_child_that_imports_its_definition(
    asyncq_client: Client, asyncq_worker: WorkerFactory, asyncq_queue: str,
) -> None:
    async with asyncq_worker(h.typed, queues={asyncq_queue: 1}, process_pool_size=1):
        info = await h.square.options(queue=asyncq_queue, retention=60).enqueue(
            asyncq_client, 7)
        result = await asyncq_client.result(info.id, queue=asyncq_queue, timeout=20)
    assert result["square"] == 49 and result["pid"] != os.getpid()


async def test_sync_handlers_process_runs_a_typed_sync_task_in_a_child(
    asyncq_client: Client, asyncq_worker: WorkerFactory, asyncq_queue: str,
) -> None:
    async with asyncq_worker(h.typed, queues={asyncq_queue: 1}, process_pool_size=1,
                             sync_handlers="process"):
        info = await h.cube.options(queue=asyncq_queue, retention=60).enqueue(asyncq_client, 3)
        result = await asyncq_client.result(info.id, queue=asyncq_queue, timeout=20)
    assert result["cube"] == 27 and result["pid"] != os.getpid()


async def test_a_large_payload_reaches_the_child_whole(
    asyncq_client: Client, asyncq_worker: WorkerFactory, asyncq_queue: str,
) -> None:
    mux = ServeMux()
    mux.handle("digest", h.digest, isolate="process")
    data = os.urandom(3 * 1024 * 1024)
    info = await asyncq_client.enqueue("digest", data, queue=asyncq_queue, retention=60)
    async with asyncq_worker(mux, queues={asyncq_queue: 1}, process_pool_size=1):
        result = await asyncq_client.result(info.id, queue=asyncq_queue, timeout=20)
    assert result == hashlib.sha256(data).hexdigest()


async def test_a_thread_still_running_after_its_task_timed_out_is_logged_and_counted(
    asyncq_client: Client, asyncq_worker: WorkerFactory, asyncq_queue: str,
) -> None:
    """A thread cannot be killed: it is reported (a warning, a metric) when its task ends,
    not silently kept."""
    registry = CollectorRegistry()
    gate = threading.Event()

    def slow(task: Task) -> None:
        gate.wait(timeout=10)

    mux = ServeMux()
    mux.handle("slow", slow, timeout=0.2, max_retry=0)
    info = await asyncq_client.enqueue("slow", queue=asyncq_queue)
    try:
        with structlog.testing.capture_logs() as logs:
            async with asyncq_worker(mux, queues={asyncq_queue: 1},
                                     metrics=WorkerMetrics(registry)) as w:
                await wait_until(lambda: w.worker.processor.threads.left_behind == 1,
                                 message="thread left behind")
    finally:
        gate.set()
    [line] = [e for e in logs if e["event"].startswith("sync handler thread still running")]
    assert (line["task_id"], line["type"], line["log_level"]) == (info.id, "slow", "warning")
    assert registry.get_sample_value("asyncq_worker_sync_threads_left_behind_total",
                                     {"queue": asyncq_queue, "type": "slow"}) == 1


def _entries(folder: Path) -> int:
    return len(list(folder.iterdir()))


def _add(path: Path) -> None:
    path.write_text("")
