"""SyncClient against a real Redis and worker: the producer API from plain code, shared by
threads, after fork(), closed at exit. The worker runs in the test's event loop; the blocking
calls run in threads (``anyio.to_thread``), as a web app's request threads would."""

from __future__ import annotations

import asyncio
import os
import re
import signal
import subprocess
import sys
import threading
from collections.abc import Iterator
from concurrent.futures import CancelledError, ThreadPoolExecutor
from pathlib import Path
from typing import Any

import anyio
import pytest
from anyio import to_thread

import asyncq
from asyncq import (
    Inspector,
    ServeMux,
    SyncClient,
    Task,
    TaskFailedError,
    TaskInfo,
    TaskNotFoundError,
    TaskState,
    WaitTimeoutError,
    chain,
)
from asyncq.testing import WorkerFactory


@pytest.fixture
def sync_client(asyncq_redis_url: str) -> Iterator[SyncClient]:
    with SyncClient(asyncq_redis_url) as client:
        yield client


def make_mux(queue: str) -> tuple[ServeMux, Any, Any]:
    mux = ServeMux()

    @mux.task("sync:add", queue=queue)
    async def add(a: int, b: int) -> int:
        return a + b

    @mux.task("sync:shout", queue=queue)
    def shout(text: str) -> str:
        return text.upper()

    async def fail(task: Task) -> None:
        raise ValueError("no such partner")

    async def hang(task: Task) -> None:
        await anyio.sleep_forever()

    mux.handle("sync:fail", fail, max_retry=0)
    mux.handle("sync:hang", hang)
    return mux, add, shout


@pytest.mark.anyio
async def test_enqueue_result_wait_and_apply_block_and_return_what_the_async_client_would(
    sync_client: SyncClient, asyncq_queue: str, asyncq_worker: WorkerFactory,
) -> None:
    mux, add, _ = make_mux(asyncq_queue)

    def produce() -> tuple[Any, ...]:
        info = sync_client.enqueue("sync:add", {"a": 2, "b": 3}, queue=asyncq_queue)
        value = sync_client.result(info, timeout=30)
        final = sync_client.wait(info.id, queue=asyncq_queue, timeout=30)
        applied = sync_client.apply(Task("sync:shout", {"text": "hi"}, queue=asyncq_queue),
                                    timeout=10)
        many = sync_client.enqueue_many([add.task(1, 1), add.task(2, 2)])
        sums = [sync_client.result(m, timeout=30) for m in many if isinstance(m, TaskInfo)]
        return info, value, final, applied, sums

    async with asyncq_worker(mux, queues={asyncq_queue: 1}):
        info, value, final, applied, sums = await to_thread.run_sync(produce)
    assert isinstance(info, TaskInfo) and info.queue == asyncq_queue
    assert value == 5
    assert final.state is TaskState.COMPLETED
    assert applied == "HI"
    assert sums == [2, 4]


@pytest.mark.anyio
async def test_typed_tasks_enqueue_and_read_typed_results_through_the_sync_client(
    sync_client: SyncClient, asyncq_queue: str, asyncq_worker: WorkerFactory,
) -> None:
    mux, add, shout = make_mux(asyncq_queue)

    def produce() -> tuple[int, str]:
        info = add.enqueue(sync_client, 20, 22)
        assert isinstance(info, TaskInfo) and info.type == "sync:add"
        return add.result(sync_client, info, timeout=30), shout.result(
            sync_client, shout.enqueue(sync_client, "x"), timeout=10)

    async with asyncq_worker(mux, queues={asyncq_queue: 1}):
        assert await to_thread.run_sync(produce) == (42, "X")
    with pytest.raises(TypeError):  # a wrong call is refused before anything is sent
        add.enqueue(sync_client, "one", 2)


@pytest.mark.anyio
async def test_errors_are_raised_as_the_async_client_raises_them_and_timeouts_apply(
    sync_client: SyncClient, asyncq_queue: str, asyncq_worker: WorkerFactory,
) -> None:
    mux, _, _ = make_mux(asyncq_queue)

    def produce() -> None:
        with pytest.raises(TaskFailedError, match="no such partner"):
            sync_client.apply("sync:fail", queue=asyncq_queue, timeout=10)
        hung = sync_client.enqueue("sync:hang", queue=asyncq_queue)
        with pytest.raises(WaitTimeoutError):
            sync_client.result(hung, timeout=0.2)
        with pytest.raises(TaskNotFoundError):
            sync_client.wait("no-such-id", queue=asyncq_queue, timeout=1)
        with pytest.raises(TypeError, match="max_rety"):
            sync_client.enqueue("sync:add", max_rety=3)  # type: ignore[call-arg]
        # A running task can be cancelled: wait until it is active, then cancel it.
        active = sync_client.enqueue("sync:hang", queue=asyncq_queue)
        while True:
            with pytest.raises(WaitTimeoutError) as waited:
                sync_client.wait(active, timeout=0.05)
            if waited.value.info is not None and waited.value.info.state is TaskState.ACTIVE:
                break
        assert sync_client.cancel(active.id, queue=asyncq_queue) == "requested"
        assert sync_client.wait(active, timeout=10).state is TaskState.ARCHIVED

    async with asyncq_worker(mux, queues={asyncq_queue: 2}, shutdown_timeout=1):
        await to_thread.run_sync(produce)


@pytest.mark.anyio
async def test_a_workflow_started_from_sync_code_returns_its_value(
    sync_client: SyncClient, asyncq_queue: str, asyncq_worker: WorkerFactory,
) -> None:
    mux, add, _ = make_mux(asyncq_queue)
    async with asyncq_worker(mux, queues={asyncq_queue: 1}):
        value = await to_thread.run_sync(lambda: sync_client.result(
            sync_client.enqueue_workflow(chain(add.s(1, 2), add.pipe(10))), timeout=10))
    assert value == 13


@pytest.mark.anyio
async def test_a_call_from_inside_a_running_event_loop_works(
    sync_client: SyncClient, asyncq_queue: str, asyncq_inspector: Inspector,
) -> None:
    info = sync_client.enqueue("sync:add", queue=asyncq_queue)  # blocks this loop briefly
    stored = await asyncq_inspector.task_info(asyncq_queue, info.id)
    assert (stored.type, stored.state) == ("sync:add", TaskState.PENDING)


@pytest.mark.anyio
async def test_sixteen_threads_share_one_client_and_every_task_is_stored(
    sync_client: SyncClient, asyncq_queue: str, asyncq_inspector: Inspector,
) -> None:
    ids: list[str] = []
    lock = threading.Lock()
    start = threading.Barrier(16)

    def enqueue_some() -> None:
        start.wait(10)
        for i in range(50):
            info = sync_client.enqueue("sync:add", {"i": i}, queue=asyncq_queue)
            with lock:
                ids.append(info.id)

    with ThreadPoolExecutor(16) as pool:
        for done in [pool.submit(enqueue_some) for _ in range(16)]:
            done.result(60)  # re-raises what a thread raised
    assert len(set(ids)) == 16 * 50
    assert (await asyncq_inspector.queue_info(asyncq_queue)).pending == 16 * 50


def test_bad_arguments_are_refused_when_the_client_is_made() -> None:
    with pytest.raises(TypeError, match="Redis URL"):
        SyncClient(object())  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="retry_attempts"):
        SyncClient("redis://localhost", retry_attempts=-1)


def test_a_closed_client_says_so_and_close_is_idempotent(asyncq_redis_url: str) -> None:
    client = SyncClient(asyncq_redis_url)
    assert client.ping() >= 0
    client.close()
    client.close()
    assert client.closed
    with pytest.raises(RuntimeError, match="closed"):
        client.enqueue("t")


def _subprocess_env() -> dict[str, str]:
    """The environment of a child Python: it imports the asyncq under test (this checkout)."""
    root = str(Path(asyncq.__file__).parent.parent)
    return {**os.environ, "PYTHONPATH": os.pathsep.join(
        [root, *filter(None, [os.environ.get("PYTHONPATH")])])}


@pytest.mark.anyio
@pytest.mark.timeout(60)
async def test_a_forked_child_enqueues_on_its_own_connection_and_the_parent_keeps_working(
    sync_client: SyncClient, asyncq_queue: str, asyncq_inspector: Inspector,
) -> None:
    before = sync_client.enqueue("sync:add", queue=asyncq_queue)  # the parent's loop is running
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: no loop thread was inherited; one starts on first use
        code = 1
        signal.alarm(20)  # a child that hangs (no loop thread of its own) dies, failing the test
        try:
            info = sync_client.enqueue("sync:add", queue=asyncq_queue)
            os.write(write, info.id.encode())
            sync_client.close()
            code = 0
        finally:
            os._exit(code)
    os.close(write)
    with os.fdopen(read) as pipe:
        child_id = await to_thread.run_sync(pipe.read)
    _, status = await to_thread.run_sync(os.waitpid, pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0
    after = sync_client.enqueue("sync:add", queue=asyncq_queue)  # the parent's client still works
    for task_id in (before.id, child_id, after.id):
        assert (await asyncq_inspector.task_info(asyncq_queue, task_id)).state is TaskState.PENDING


EXIT_SCRIPT = """
import atexit, sys

def check():  # registered before asyncq's own hook, so it runs after it
    print("closed at exit:", client.closed, flush=True)

atexit.register(check)
import asyncq
client = asyncq.SyncClient(sys.argv[1])
client.enqueue("t", queue=sys.argv[2])
"""


#: What asyncio's debug mode logs for a callback that took longer than 0.1 s.
SLOW_CALLBACK = re.compile(r"Executing <.*> took \d+\.\d+ seconds")


def test_a_client_left_open_is_closed_when_the_interpreter_exits(
    asyncq_redis_url: str, asyncq_queue: str, tmp_path: Path,
) -> None:
    script = tmp_path / "exit_open.py"
    script.write_text(EXIT_SCRIPT)
    out = subprocess.run([sys.executable, "-X", "dev", str(script), asyncq_redis_url,
                          asyncq_queue], capture_output=True, text=True, timeout=60,
                         env=_subprocess_env(), check=False)
    # (-X dev turns on asyncio's debug mode, which on a loaded machine also says which
    # callbacks were slow: timing, not a warning about the client)
    said = [line for line in out.stderr.splitlines() if not SLOW_CALLBACK.fullmatch(line)]
    assert (out.returncode, out.stdout, said) == (0, "closed at exit: True\n", [])


def test_closing_ends_a_call_another_thread_is_waiting_in(
    asyncq_redis_url: str, asyncq_queue: str,
) -> None:
    client = SyncClient(asyncq_redis_url)
    info = client.enqueue("sync:add", queue=asyncq_queue)  # no worker: it never ends
    raised: list[BaseException] = []
    waiting = threading.Event()

    def wait_for_ever() -> None:
        waiting.set()
        try:
            client.result(info)
        except BaseException as exc:  # the assertion below says which
            raised.append(exc)

    thread = threading.Thread(target=wait_for_ever)
    thread.start()
    waiting.wait(10)
    client.close()
    thread.join(10)
    assert not thread.is_alive()
    # Cancelled in flight, or refused as closed if close() won the race to the loop.
    assert len(raised) == 1
    assert isinstance(raised[0], CancelledError | RuntimeError), raised


def test_a_call_from_the_clients_own_loop_thread_is_refused_instead_of_hanging(
    sync_client: SyncClient, asyncq_queue: str,
) -> None:
    # Only code the client's loop runs (a hook called from inside a call) can get here.
    sync_client.ping()
    loop = sync_client._client_and_loop()[1]

    async def call_back() -> None:
        sync_client.enqueue("sync:add", queue=asyncq_queue)

    with pytest.raises(RuntimeError, match="own event loop thread"):
        asyncio.run_coroutine_threadsafe(call_back(), loop).result(10)
