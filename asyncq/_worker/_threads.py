"""Sync handlers: a plain ``def handler(task)`` runs in a worker thread, never on the event loop.

A thread cannot be killed. When the task running it is cancelled (timeout, deadline, cancel
request, lost lease, shutdown) the worker stops waiting at once and writes the task's outcome;
the thread runs on to its end, its result is discarded, and it keeps its slot of the worker's
thread limit until it returns, so runaway threads cannot pile up beyond that limit. Such a
thread is said to still run — a warning naming its task when the task ends, the metric
``sync_threads_still_running`` until it returns, and a line when it does — so a slot is
never held silently.

A handler registered with ``isolate="process"`` (or any importable sync handler when the
worker's ``sync_handlers`` is "process") runs in the worker's process pool instead (see
``_procpool``): there it can be killed at its limit.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import inspect
import math
import threading
from collections.abc import Callable
from contextvars import ContextVar
from typing import Any

import anyio
import anyio.to_thread

from .._log import get_logger
from .._model._rules import HandlerRules
from .._model._task import Task
from ._procpool import ProcessPool, ProgressForward, child_meta, handler_ref


class SyncThreads:
    """The threads one worker runs sync handlers in: at most ``size`` at once, counting the
    threads whose task was abandoned but which have not returned yet (``left_behind``)."""

    def __init__(self, size: int, *, procs: ProcessPool | None = None,
                 sync_handlers: str = "thread", observer: object = None) -> None:
        self._left_behind_hook = getattr(observer, "thread_left_behind", None)
        self._returned_hook = getattr(observer, "thread_returned", None)
        self.procs = procs
        """The worker's process pool (None: none configured; see ``_procpool``)."""
        self.sync_handlers = sync_handlers
        """Where a sync handler registered without ``isolate=`` runs: "thread" or "process"."""
        self.limiter = anyio.CapacityLimiter(size)
        # anyio's own limit is replaced by ours (a slot is held until the thread returns,
        # not until the awaiting task is cancelled); this one never makes anything wait.
        self._unbounded = anyio.CapacityLimiter(math.inf)
        self.left_behind = 0
        """Threads still running a handler whose task the worker no longer waits for."""
        self.rules: Callable[[str], HandlerRules | None] | None = None
        """The worker's lookup of a task type's registered options (``registered_rules``)."""

    @property
    def busy(self) -> int:
        """Threads running a handler now (left behind ones included)."""
        return int(self.limiter.borrowed_tokens)

    async def run(self, fn: Callable[[Task], Any], task: Task) -> Any:
        """``fn(task)`` in a thread once a slot is free; cancelling this abandons the thread."""
        token = object()
        await self.limiter.acquire_on_behalf_of(token)
        loop = asyncio.get_running_loop()
        lock = threading.Lock()
        state = {"started": False, "finished": False, "skip": False, "abandoned": False}

        def release() -> None:  # on the loop, once the thread returned
            self.limiter.release_on_behalf_of(token)
            if state["abandoned"]:
                self._returned(task)

        def call() -> Any:
            with lock:
                if state["skip"]:  # cancelled before the thread picked it up
                    return None
                state["started"] = True
            try:
                return fn(task)
            finally:
                with lock:
                    state["finished"] = True
                with contextlib.suppress(RuntimeError):  # a closed loop: nothing to release
                    loop.call_soon_threadsafe(release)

        try:
            return await anyio.to_thread.run_sync(call, abandon_on_cancel=True,
                                                  limiter=self._unbounded)
        except BaseException:
            with lock:
                if not state["started"]:
                    state["skip"] = True
                elif not state["finished"]:
                    state["abandoned"] = True
            if state["skip"]:
                self.limiter.release_on_behalf_of(token)
            elif state["abandoned"]:
                self.left_behind += 1
                get_logger("worker").warning(
                    "sync handler thread still running after its task ended: it keeps its "
                    "slot until it returns (a thread cannot be stopped; isolate='process' "
                    "runs a handler where it can be killed)", task_id=task.id, type=task.type,
                    queue=task.queue, threads_left_behind=self.left_behind)
                if self._left_behind_hook is not None:
                    self._left_behind_hook(task.queue, task.type)
            raise

    def _returned(self, task: Task) -> None:
        """The thread of ``task``, left behind when the task ended, returned at last."""
        self.left_behind -= 1
        get_logger("worker").info(
            "sync handler thread left behind returned: its slot is free", task_id=task.id,
            type=task.type, queue=task.queue, threads_left_behind=self.left_behind)
        if self._returned_hook is not None:
            self._returned_hook(task.queue, task.type)


_CURRENT: ContextVar[SyncThreads | None] = ContextVar("asyncq_sync_threads", default=None)


def use_threads(threads: SyncThreads) -> None:
    """Make ``threads`` the pool of sync handlers called from the current context (set by the
    processor in each handler's own asyncio task)."""
    _CURRENT.set(threads)


def registered_rules(task_type: str) -> HandlerRules | None:
    """The task options the handler of ``task_type`` was registered with in the worker running
    the current task (None: none, or not in a worker): for a handler that must know how its
    failure will be decided (the Django runner: whether it is retried)."""
    threads = _CURRENT.get()
    return None if threads is None or threads.rules is None else threads.rules(task_type)


def is_sync_handler(handler: object) -> bool:
    """A callable that is neither an async function nor an object with an async ``__call__``
    (a ServeMux is async)."""
    if not callable(handler) or inspect.iscoroutinefunction(handler):
        return False
    call = getattr(handler, "__call__", None)  # noqa: B004
    return not inspect.iscoroutinefunction(call)


def threaded(fn: Callable[[Task], Any], *, forced: bool = False) -> Callable[[Task], Any]:
    """The async handler that runs the sync handler ``fn`` in a worker thread (in the process
    pool instead when the worker's ``sync_handlers`` is "process" and ``fn`` is importable,
    unless ``forced``: registered with ``isolate="thread"``). A sync function that returns an
    awaitable (a wrapper of an async handler) has it awaited on the loop."""
    ref: str | None = getattr(fn, "__asyncq_ref__", None)  # (a typed task's definition)
    if ref is None:
        try:
            ref = handler_ref(fn, "handler")
        except (TypeError, ValueError):
            ref = None  # (a child could not import it: it stays in a thread)

    @functools.wraps(fn)
    async def run_in_thread(task: Task) -> Any:
        threads = _CURRENT.get()
        if threads is None:  # called outside a worker (e.g. a unit test awaiting the mux)
            result = await anyio.to_thread.run_sync(fn, task, abandon_on_cancel=True)
        elif (not forced and ref is not None and threads.sync_handlers == "process"
              and threads.procs is not None):
            result = await threads.procs.run(ref, task.payload, child_meta(task, None),
                                             progress_of(task))
        else:
            result = await threads.run(fn, task)
        if inspect.isawaitable(result):
            result = await result
        return result

    return run_in_thread


def isolated(fn: Callable[[Task], Any], ref: str,
             soft_timeout: float | None) -> Callable[[Task], Any]:
    """The async handler that runs ``fn`` (imported by the child as ``ref``) in the worker's
    process pool; outside a worker (a unit test awaiting the mux) it is called in a thread."""

    @functools.wraps(fn)
    async def run_in_process(task: Task) -> Any:
        threads = _CURRENT.get()
        if threads is None or threads.procs is None:
            result = await anyio.to_thread.run_sync(fn, task, abandon_on_cancel=True)
            if inspect.isawaitable(result):
                result = await result
            return result
        return await threads.procs.run(ref, task.payload, child_meta(task, soft_timeout),
                                       progress_of(task))

    return run_in_process


def progress_of(task: Task) -> ProgressForward | None:
    """Where a handler process's progress reports go: the running task's own sink."""
    sink = task._progress
    if sink is None:
        return None
    return lambda value, message, data: sink(task, value, message, data)


def log_left_behind(threads: SyncThreads, server_id: str) -> None:
    """At shutdown: say how many sync handler threads still run (they cannot be stopped)."""
    if threads.busy:
        get_logger("worker", server_id=server_id).warning(
            "sync handler threads still running after shutdown: a thread cannot be stopped, "
            "they run to their end and their results are discarded", count=threads.busy)
