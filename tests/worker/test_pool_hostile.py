"""The process pool holds under hostile handlers (real children, real Redis): a child that
dies leaving a process of its own holding its pipe is noticed at once; what a handler starts
is stopped with it at its time limit and at shutdown; a result too large to store is refused
in the child and a large one is read off the event loop; an error whose text JSON cannot
carry is still reported as itself."""

from __future__ import annotations

import os
import signal
import threading
from multiprocessing.connection import Connection
from pathlib import Path
from typing import Any

import pytest
from redis.asyncio import Redis

from asyncq import Client, ServeMux
from asyncq._worker import _procpool
from asyncq.testing import WorkerFactory, wait_until
from tests.helpers.dataplane import task_hash
from tests.worker import hostile_handlers as h

pytestmark = pytest.mark.anyio


def alive(pid: int) -> bool:
    """Whether process ``pid`` still runs (a zombie waiting to be reaped does not)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except (FileNotFoundError, ProcessLookupError):
        return False
    return stat.rpartition(")")[2].split()[0] not in ("Z", "X")


def pid_in(path: Path) -> int:
    return int(path.read_text())


async def test_a_child_that_dies_is_noticed_though_its_grandchild_holds_the_pipe(
    asyncq_client: Client, asyncq_worker: WorkerFactory, asyncq_queue: str,
    redis_client: Redis, tmp_path: Path,
) -> None:
    """The grandchild would hold the pipe open for ten minutes: the run fails as soon as the
    child exits, the grandchild is stopped, and the next task runs in a fresh child."""
    mux = ServeMux()
    mux.handle("die", h.fork_and_die, isolate="process")
    mux.handle("pid", h.pid, isolate="process")
    pid_file = tmp_path / "grandchild"
    died = await asyncq_client.enqueue("die", str(pid_file), queue=asyncq_queue, max_retry=0)
    async with asyncq_worker(mux, queues={asyncq_queue: 1}, concurrency=1,
                             process_pool_size=1, process_kill_grace=0.2) as w:
        await w.wait_drained(asyncq_queue, timeout=60)
        fields = await task_hash(redis_client, asyncq_queue, died.id)
        assert fields["state"] == b"archived"
        assert fields["error"].startswith(b"ChildProcessDied: ")
        assert b"exited with code 3" in fields["error"]
        await wait_until(lambda: not alive(pid_in(pid_file)), timeout=10)
        after = await asyncq_client.enqueue("pid", queue=asyncq_queue, max_retry=0)
        assert await asyncq_client.result(after.id, queue=asyncq_queue, timeout=30) > 0


async def test_a_child_killed_while_idle_fails_the_next_task_as_died(
    asyncq_client: Client, asyncq_worker: WorkerFactory, asyncq_queue: str,
    redis_client: Redis,
) -> None:
    """Killed between tasks (the OOM killer, an operator): the task sent to it fails with
    ChildProcessDied (retried as any), and the task after it runs in a fresh child."""
    mux = ServeMux()
    mux.handle("pid", h.pid, isolate="process")
    async with asyncq_worker(mux, queues={asyncq_queue: 1}, concurrency=1,
                             process_pool_size=1) as w:
        first = await asyncq_client.enqueue("pid", queue=asyncq_queue, retention=60)
        child = await asyncq_client.result(first.id, queue=asyncq_queue, timeout=30)
        os.kill(child, signal.SIGKILL)
        await wait_until(lambda: not alive(child), timeout=10)
        lost = await asyncq_client.enqueue("pid", queue=asyncq_queue, max_retry=0)
        await w.wait_drained(asyncq_queue, timeout=30)
        fields = await task_hash(redis_client, asyncq_queue, lost.id)
        assert fields["state"] == b"archived"
        assert fields["error"].startswith(b"ChildProcessDied: "), fields["error"]
        after = await asyncq_client.enqueue("pid", queue=asyncq_queue, retention=60)
        assert await asyncq_client.result(after.id, queue=asyncq_queue, timeout=30) != child


async def test_a_grandchild_is_killed_with_its_child_at_the_time_limit(
    asyncq_client: Client, asyncq_worker: WorkerFactory, asyncq_queue: str,
    redis_client: Redis, tmp_path: Path,
) -> None:
    """The grandchild ignores SIGTERM: it is killed (SIGKILL after the grace) with its child
    when the run passes its limit, while the worker keeps running."""
    mux = ServeMux()
    mux.handle("spin", h.fork_and_spin, isolate="process", timeout=1)
    pid_file = tmp_path / "grandchild"
    hung = await asyncq_client.enqueue("spin", str(pid_file), queue=asyncq_queue, max_retry=0)
    async with asyncq_worker(mux, queues={asyncq_queue: 1}, concurrency=1,
                             process_pool_size=1, process_kill_grace=0.2) as w:
        await w.wait_drained(asyncq_queue, timeout=60)
        fields = await task_hash(redis_client, asyncq_queue, hung.id)
        assert fields["state"] == b"archived" and fields["error"].startswith(b"TimeoutError")
        await wait_until(lambda: not alive(pid_in(pid_file)), timeout=10)


async def test_grandchildren_do_not_outlive_the_worker(
    asyncq_client: Client, asyncq_worker: WorkerFactory, asyncq_queue: str, tmp_path: Path,
) -> None:
    """One handler returned leaving a process behind; another still runs, with one of its
    own, when the worker stops: once it has stopped, neither process is left."""
    mux = ServeMux()
    mux.handle("leave", h.fork_and_return, isolate="process")
    mux.handle("spin", h.fork_and_spin, isolate="process")
    left, spinning = tmp_path / "left", tmp_path / "spinning"
    done = await asyncq_client.enqueue("leave", str(left), queue=asyncq_queue, max_retry=0)
    async with asyncq_worker(mux, queues={asyncq_queue: 1}, concurrency=2,
                             process_pool_size=2, process_kill_grace=0.2,
                             shutdown_timeout=0.5):
        assert await asyncq_client.result(done.id, queue=asyncq_queue, timeout=30)
        await asyncq_client.enqueue("spin", str(spinning), queue=asyncq_queue, max_retry=0)
        await wait_until(lambda: spinning.exists() and spinning.read_text() != "",
                         timeout=30)
        assert alive(pid_in(left)) and alive(pid_in(spinning))
    await wait_until(lambda: not alive(pid_in(left)) and not alive(pid_in(spinning)),
                     timeout=10)


async def test_a_result_larger_than_a_result_may_be_is_refused_in_the_child(
    asyncq_client: Client, asyncq_worker: WorkerFactory, asyncq_queue: str,
    redis_client: Redis, monkeypatch: pytest.MonkeyPatch,
) -> None:
    """With the cap lowered to 1 MiB (it is Redis's 512 MiB), a 2 MiB result fails the run
    with the error of a result that cannot be stored; a result under the cap is stored."""
    monkeypatch.setattr(_procpool, "RESULT_MAX_BYTES", 1 << 20, raising=False)
    mux = ServeMux()
    mux.handle("big", h.big, isolate="process")
    mux.handle("pid", h.pid, isolate="process")
    over = await asyncq_client.enqueue("big", 2 << 20, queue=asyncq_queue, max_retry=0)
    under = await asyncq_client.enqueue("big", 1 << 19, queue=asyncq_queue, max_retry=0,
                                        retention=60)
    async with asyncq_worker(mux, queues={asyncq_queue: 1}, concurrency=1,
                             process_pool_size=1) as w:
        await w.wait_drained(asyncq_queue, timeout=60)
        assert w.worker.processor.threads.procs is not None
        assert w.worker.processor.threads.procs.replaced == 0  # (the child was not lost)
    fields = await task_hash(redis_client, asyncq_queue, over.id)
    assert fields["state"] == b"archived"
    assert fields["error"].startswith(b"ResultError: handler result cannot be stored: it is "
                                      b"2097152 bytes")
    assert len(await asyncq_client.result(under.id, queue=asyncq_queue, timeout=5)) == 1 << 19


async def test_a_large_answer_is_read_and_decoded_off_the_event_loop(
    asyncq_client: Client, asyncq_worker: WorkerFactory, asyncq_queue: str,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A 16 MiB JSON result: every read of it from the pipe and its decoding happen outside
    the event loop's thread (which would stand still meanwhile); small messages may not."""
    loop_thread = threading.get_ident()
    big_reads: list[bool] = []
    decodes: list[bool] = []
    recv_bytes, decode = Connection.recv_bytes, _procpool._decode

    def recording_recv(self: Connection, maxlength: int | None = None) -> bytes:
        data = recv_bytes(self, maxlength)
        if len(data) > 1 << 20:
            big_reads.append(threading.get_ident() == loop_thread)
        return data

    def recording_decode(head: dict[str, Any], body: bytes) -> tuple[bool, Any]:
        if len(body) > 1 << 20:
            decodes.append(threading.get_ident() == loop_thread)
        return decode(head, body)

    monkeypatch.setattr(Connection, "recv_bytes", recording_recv)
    monkeypatch.setattr(_procpool, "_decode", recording_decode, raising=False)
    mux = ServeMux()
    mux.handle("big", h.big_json, isolate="process")
    info = await asyncq_client.enqueue("big", 16 << 20, queue=asyncq_queue, max_retry=0,
                                       retention=60)
    async with asyncq_worker(mux, queues={asyncq_queue: 1}, concurrency=1,
                             process_pool_size=1):
        result = await asyncq_client.result(info.id, queue=asyncq_queue, timeout=60)
    assert len(result) == (16 << 20) // 1003 and result[0] == "y" * 1000
    assert big_reads == [False] and decodes == [False]


@pytest.mark.parametrize("handler, text", [
    (h.lone_surrogate, b"LookupError: bad key \\ud800 here"),
    (h.unprintable,
     b"ProcessHandlerError: Unprintable: <the error's text could not be made: RuntimeError>"),
])
async def test_an_error_whose_text_json_cannot_carry_is_reported_as_itself(
    asyncq_client: Client, asyncq_worker: WorkerFactory, asyncq_queue: str,
    redis_client: Redis, handler: Any, text: bytes,
) -> None:
    """Not as ChildProcessDied: the handler's own error type and its text (escaped), from
    the child that ran it, which runs the next task too."""
    mux = ServeMux()
    mux.handle("bad", handler, isolate="process")
    mux.handle("pid", h.pid, isolate="process")
    bad = await asyncq_client.enqueue("bad", queue=asyncq_queue, max_retry=0)
    after = await asyncq_client.enqueue("pid", queue=asyncq_queue, max_retry=0, retention=60)
    async with asyncq_worker(mux, queues={asyncq_queue: 1}, concurrency=1,
                             process_pool_size=1) as w:
        await w.wait_drained(asyncq_queue, timeout=60)
        pool = w.worker.processor.threads.procs
        assert pool is not None and pool.replaced == 0
        assert await asyncq_client.result(after.id, queue=asyncq_queue, timeout=5) in pool.pids
    fields = await task_hash(redis_client, asyncq_queue, bad.id)
    assert fields["state"] == b"archived"
    assert fields["error"].startswith(text), fields["error"]
