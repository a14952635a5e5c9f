"""Worker(on_state_change=...): told of the transitions the worker makes; a callback that
raises or blocks never stops the worker."""

from __future__ import annotations

import asyncio
import threading

import pytest

from asyncq import Client, RevokeTask, ServeMux, Task, TaskEvent, TaskState
from asyncq.testing import WorkerFactory, wait_until

pytestmark = pytest.mark.anyio

S = TaskState


def mux() -> ServeMux:
    m = ServeMux()

    @m.handler("ok")
    async def ok(task: Task) -> int:
        return int(task.json()) * 2

    @m.handler("revoke")
    async def revoke(task: Task) -> None:
        raise RevokeTask("not wanted")

    @m.handler("fail")
    async def fail(task: Task) -> None:
        raise ValueError("bad")

    return m


async def test_the_callback_hears_each_start_and_outcome_in_order(
    asyncq_client: Client, asyncq_worker: WorkerFactory, asyncq_queue: str,
) -> None:
    heard: list[TaskEvent] = []

    async def on_change(event: TaskEvent) -> None:
        heard.append(event)

    async with asyncq_worker(mux(), queues={asyncq_queue: 1}, on_state_change=on_change) as w:
        ok = await asyncq_client.enqueue("ok", 21, queue=asyncq_queue)
        revoked = await asyncq_client.enqueue("revoke", queue=asyncq_queue)
        failed = await asyncq_client.enqueue("fail", queue=asyncq_queue, max_retry=0)
        await w.wait_drained(asyncq_queue)
        await wait_until(lambda: len(heard) == 6, timeout=30)
    by_task = {t.id: [(e.previous, e.state) for e in heard if e.id == t.id]
               for t in (ok, revoked, failed)}
    assert by_task == {
        ok.id: [(S.PENDING, S.ACTIVE), (S.ACTIVE, S.COMPLETED)],
        revoked.id: [(S.PENDING, S.ACTIVE), (S.ACTIVE, S.DELETED)],
        failed.id: [(S.PENDING, S.ACTIVE), (S.ACTIVE, S.ARCHIVED)],
    }
    done = next(e for e in heard if e.id == ok.id and e.final)
    assert done.result_json() == 42 and done.type == "ok"
    gone = next(e for e in heard if e.id == revoked.id and e.final)
    assert gone.reason == "revoked" and "not wanted" in (gone.last_error or "")
    archived = next(e for e in heard if e.id == failed.id and e.final)
    assert archived.last_error == "ValueError: bad"


async def test_a_callback_that_raises_or_blocks_does_not_stop_processing(
    asyncq_client: Client, asyncq_worker: WorkerFactory, asyncq_queue: str,
) -> None:
    release = threading.Event()
    calls = 0

    def blocking(event: TaskEvent) -> None:  # sync: runs in a worker thread
        nonlocal calls
        calls += 1
        if calls == 1:
            release.wait(10)
        raise RuntimeError("callback bug")

    try:
        async with asyncq_worker(mux(), queues={asyncq_queue: 1}, concurrency=20,
                                 on_state_change=blocking) as w:
            await asyncq_client.enqueue_many([Task("ok", i, queue=asyncq_queue)
                                              for i in range(200)])
            await w.wait_drained(asyncq_queue)  # all ran while the callback was stuck
            assert w.worker.processor.processed == 200
            assert calls == 1
            release.set()
            notifier = w.worker.notifier
            assert notifier is not None
            await wait_until(lambda: calls == 400, timeout=10)
    finally:
        release.set()


async def test_an_async_callback_that_hangs_is_timed_out(
    asyncq_client: Client, asyncq_worker: WorkerFactory, asyncq_queue: str,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from asyncq._worker import _notifier
    monkeypatch.setattr(_notifier, "CALLBACK_TIMEOUT", 0.1)
    seen: list[str] = []

    async def hangs(event: TaskEvent) -> None:
        seen.append(event.id)
        if len(seen) == 1:
            await asyncio.Event().wait()

    async with asyncq_worker(mux(), queues={asyncq_queue: 1}, on_state_change=hangs) as w:
        await asyncq_client.enqueue("ok", 1, queue=asyncq_queue)
        await w.wait_drained(asyncq_queue)
        await wait_until(lambda: len(seen) == 2, timeout=30)  # the second was delivered
