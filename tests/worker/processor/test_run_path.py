"""The worker's run path: one stop reason, owned background work, and a processor the other
components reach only through narrow interfaces."""

from __future__ import annotations

import ast
import asyncio
import pathlib
import time

import pytest

import asyncq._worker
from asyncq import Client, ServeMux, Task
from asyncq._model._message import NO_TIMEOUT, TaskMessage
from asyncq._service._background import TaskSet
from asyncq._worker._running import Stop, limit_of
from asyncq.testing import WorkerFactory, wait_until

pytestmark = pytest.mark.anyio

WORKER_DIR = pathlib.Path(asyncq._worker.__file__).parent


def _worker_imports(module: str) -> set[str]:
    """The ``asyncq._worker`` modules ``module`` imports (relative imports, TYPE_CHECKING too)."""
    tree = ast.parse((WORKER_DIR / f"{module}.py").read_text())
    return {node.module for node in ast.walk(tree)
            if isinstance(node, ast.ImportFrom) and node.level == 1 and node.module}


def test_components_do_not_import_the_processor() -> None:
    # The hand-off receiver, the subscriber, the heartbeat, burst mode, the acker and the
    # outcome module get what they need as a callable or a small protocol: none imports the
    # processor (so no circle can form through it); only the Worker, which wires them, does.
    for module in ("_handoffs", "_subscriber", "_heartbeat", "_burst", "_acker", "_outcomes",
                   "_running", "_invoke", "_leases"):
        assert "_processor" not in _worker_imports(module), module


def test_the_processor_does_not_import_the_components_that_use_it() -> None:
    assert not _worker_imports("_processor") & {"_worker", "_heartbeat", "_burst",
                                                "_subscriber"}


def test_limit_of_names_the_limit_as_a_stop_reason() -> None:
    msg = TaskMessage(id="i", type="t", queue="q", timeout_ms=5_000, deadline_ms=0)
    assert limit_of(1_000, msg) == (6_000, Stop.TIMEOUT)
    msg = TaskMessage(id="i", type="t", queue="q", timeout_ms=5_000, deadline_ms=2_000)
    assert limit_of(1_000, msg) == (2_000, Stop.DEADLINE)
    msg = TaskMessage(id="i", type="t", queue="q", timeout_ms=NO_TIMEOUT, deadline_ms=0)
    assert limit_of(1_000, msg) == (0, None)


def test_a_stop_reason_is_its_string_value() -> None:
    # Callers that name a reason by its value (a pub/sub message: "cancel") get the member.
    assert Stop("cancel") is Stop.CANCEL
    assert Stop.LEASE_LOST == "lease"


async def test_taskset_close_waits_then_cancels_what_is_left() -> None:
    errors: list[BaseException] = []
    tasks = TaskSet(errors.append)
    done: list[str] = []
    cancelled: list[str] = []

    async def quick() -> None:
        await asyncio.sleep(0)
        done.append("quick")

    async def stuck() -> None:
        try:
            await asyncio.Event().wait()
        except asyncio.CancelledError:
            cancelled.append("stuck")
            raise

    async def broken() -> None:
        raise ValueError("boom")

    tasks.spawn(quick())
    tasks.spawn(stuck())
    tasks.spawn(broken())
    assert len(tasks) == 3
    began = time.monotonic()
    assert await tasks.close(0.2) == 1
    assert time.monotonic() - began < 30  # the stuck task alone would never end
    assert done == ["quick"] and cancelled == ["stuck"]
    assert [str(e) for e in errors] == ["boom"]  # a cancellation is not an error
    await wait_until(lambda: len(tasks) == 0, timeout=10, message="done callbacks ran")
    assert len(tasks) == 0
    assert await tasks.close(0.2) == 0


async def test_an_async_error_handler_still_running_at_shutdown_is_ended_by_the_worker(
    asyncq_client: Client, asyncq_worker: WorkerFactory, asyncq_queue: str,
) -> None:
    # The hook is owned by the worker: shutdown gives it a short grace, then cancels it, so
    # nothing the worker started outlives it.
    mux = ServeMux()

    @mux.handler("fail")
    async def fail(task: Task) -> None:
        raise ValueError("boom")

    entered = asyncio.Event()
    hook_cancelled = asyncio.Event()

    async def hook(task: Task, exc: BaseException) -> None:
        entered.set()
        try:
            await asyncio.Event().wait()
        except asyncio.CancelledError:
            hook_cancelled.set()
            raise

    async with asyncq_worker(mux, queues={asyncq_queue: 1}, error_handler=hook,
                             shutdown_timeout=0.1) as w:
        await asyncq_client.enqueue("fail", queue=asyncq_queue, max_retry=0)
        await asyncio.wait_for(entered.wait(), timeout=30)
        assert len(w.worker.processor.endings.hooks) == 1
        began = time.monotonic()
    assert hook_cancelled.is_set()
    assert time.monotonic() - began < 30  # the hook alone would never end
    await wait_until(lambda: len(w.worker.processor.endings.hooks) == 0, timeout=10)
