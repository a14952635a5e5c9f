"""SyncClient: the producer API of ``Client`` for plain (non-async) code, such as a Flask or
Django app or a script.

One background thread per process runs an event loop that owns an async ``Client``; each call
hands a coroutine to that loop and blocks until it finishes, re-raising its exception as it is.
Threads may share one SyncClient. After ``fork()`` the child starts its own thread and client
on first use and never touches the parent's (a pre-fork server's workers just work), and open
clients are closed when the interpreter exits.
"""

from __future__ import annotations

import asyncio
import atexit
import concurrent.futures
import os
import threading
import weakref
from collections.abc import Coroutine, Iterable, Sequence
from types import TracebackType
from typing import Any, Self, TypeVar, Unpack

from .._broker import ConnectionOptions
from .._defaults import WORKFLOW_RETENTION
from .._errors import AsyncqError
from .._model._flow import Flow
from .._model._info import TaskInfo
from .._model._options import ApplyOptions, EnqueueOptions
from .._model._task import Task
from .._workflow._info import WorkflowHandle
from ._client import Client

_T = TypeVar("_T")
O = TypeVar("O")  # noqa: E741

#: Every SyncClient alive in this process, for the fork and exit hooks.
_LIVE: weakref.WeakSet[SyncClient] = weakref.WeakSet()


class _Runner:
    """The event loop thread of one process and the async Client it owns."""

    def __init__(self, make_client: Any) -> None:
        self.loop = asyncio.new_event_loop()
        self.ready = threading.Event()
        self.thread = threading.Thread(target=self._run, name="asyncq-sync-client", daemon=True)
        self.thread.start()
        # The Client is created on the loop's thread: its connections belong to that loop.
        try:
            self.client: Client = asyncio.run_coroutine_threadsafe(
                _made(make_client), self.loop).result()
        except BaseException:
            self.loop.call_soon_threadsafe(self.loop.stop)
            self.thread.join()
            self.loop.close()
            raise

    def _run(self) -> None:
        asyncio.set_event_loop(self.loop)
        self.loop.run_forever()

    def stop(self, timeout: float) -> None:
        """End the calls still running (their callers get CancelledError rather than waiting
        for ever), close the client, then stop and close the loop (from any thread but the
        loop's)."""
        try:
            asyncio.run_coroutine_threadsafe(self._shutdown(), self.loop).result(timeout)
        except (concurrent.futures.TimeoutError, AsyncqError, OSError):
            pass  # closing: a connection that cannot be closed politely is dropped below
        finally:
            self.loop.call_soon_threadsafe(self.loop.stop)
            self.thread.join(timeout)
            if not self.thread.is_alive():
                self.loop.close()

    async def _shutdown(self) -> None:
        others = [t for t in asyncio.all_tasks() if t is not asyncio.current_task()]
        for task in others:
            task.cancel()
        await asyncio.gather(*others, return_exceptions=True)
        await self.client.close()


async def _made(make_client: Any) -> Client:
    client: Client = make_client()
    return client


class SyncClient:
    """Enqueue tasks and read their results from synchronous code: ``SyncClient(url)``, then
    ``client.enqueue(...)``, ``client.result(...)``. The methods are those of ``Client``,
    blocking instead of awaited; they raise the same exceptions.

    ``redis`` is a Redis URL (or a list of cluster startup nodes); ``connection`` and
    ``retry_attempts`` are as for ``Client``. A redis.asyncio client or a Broker cannot be
    passed: they belong to an event loop, and this client runs its own.

    One SyncClient may be shared by all threads of a process (create it at import). It opens
    nothing until first used; after ``fork()`` the child opens its own connection on first use
    (the parent's is left alone), so pre-fork servers (gunicorn ``--preload``, uWSGI) need no
    hook. Use as a context manager or call ``close()``; clients still open are closed at exit.

    Async code should use ``Client``: a call from a coroutine works but blocks its event loop
    until Redis answers.
    """

    def __init__(self, redis: str | Sequence[Any], *, connection: ConnectionOptions | None = None,
                 retry_attempts: int = 0, close_timeout: float = 5.0) -> None:
        if not isinstance(redis, str | list | tuple):
            raise TypeError(f"SyncClient takes a Redis URL or a list of cluster startup nodes, "
                            f"got {redis!r} (a redis.asyncio client belongs to another event "
                            "loop; pass its URL)")
        if connection is not None and not isinstance(connection, ConnectionOptions):
            raise TypeError(f"connection must be a ConnectionOptions, got {connection!r}")
        if (not isinstance(retry_attempts, int) or isinstance(retry_attempts, bool)
                or retry_attempts < 0):
            raise ValueError(f"retry_attempts must be an int >= 0, got {retry_attempts!r}")
        if not isinstance(close_timeout, int | float) or close_timeout <= 0:
            raise ValueError(f"close_timeout must be seconds > 0, got {close_timeout!r}")
        self._redis = redis
        self._connection = connection
        self._retry_attempts = retry_attempts
        self._close_timeout = float(close_timeout)
        self._lock = threading.Lock()
        self._runner: _Runner | None = None
        self._closed = False
        # A child's copies of the parent's loop and client: kept (never used, never closed)
        # so that collecting them cannot close or write to the parent's connections.
        self._inherited: list[_Runner] = []
        _LIVE.add(self)

    def __enter__(self) -> Self:
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.close()

    @property
    def closed(self) -> bool:
        """True once ``close()`` was called (further calls raise RuntimeError)."""
        return self._closed

    def close(self) -> None:
        """Close the connection and stop the background thread; calling it again does nothing.
        Calls still waiting in other threads raise CancelledError; a client used after
        ``close()`` raises RuntimeError."""
        with self._lock:
            self._closed = True
            runner, self._runner = self._runner, None
        if runner is not None:
            runner.stop(self._close_timeout)

    def _after_fork_in_child(self) -> None:
        """Forget the parent's thread and client (the child has no such thread)."""
        self._lock = threading.Lock()
        if self._runner is not None:
            self._inherited.append(self._runner)
            self._runner = None

    def _client_and_loop(self) -> tuple[Client, asyncio.AbstractEventLoop]:
        with self._lock:
            if self._closed:
                raise RuntimeError("this SyncClient is closed; create a new one")
            if self._runner is None:
                self._runner = _Runner(self._new_client)
            return self._runner.client, self._runner.loop

    def _new_client(self) -> Client:
        return Client(self._redis, connection=self._connection,
                      retry_attempts=self._retry_attempts)

    def _run(self, call: Any) -> Any:
        """Run ``call(client)`` (a coroutine) on the loop thread and return its value."""
        client, loop = self._client_and_loop()
        if threading.get_ident() == self._loop_thread_id():
            raise RuntimeError("SyncClient called from its own event loop thread (it would "
                               "wait for itself); use an async Client there")
        coro: Coroutine[Any, Any, Any] = call(client)
        future = asyncio.run_coroutine_threadsafe(coro, loop)
        try:
            return future.result()
        except BaseException:
            # KeyboardInterrupt or the like in the calling thread: stop the work too.
            future.cancel()
            raise

    def _loop_thread_id(self) -> int | None:
        runner = self._runner
        return None if runner is None else runner.thread.ident

    # -- the producer API of Client

    def ping(self) -> float:
        """Check that Redis answers: the round trip in seconds; BrokerError when it cannot be
        reached."""
        value: float = self._run(lambda c: c.ping())
        return value

    def enqueue(self, task: Task | str, payload: object = None,
                **options: Unpack[EnqueueOptions]) -> TaskInfo:
        """Store a task (``Client.enqueue``); the same options and errors."""
        info: TaskInfo = self._run(lambda c: c.enqueue(task, payload, **options))
        return info

    def enqueue_many(self, tasks: Iterable[Task]) -> list[TaskInfo | AsyncqError]:
        """Store many tasks in few round trips (``Client.enqueue_many``): a TaskInfo or an
        error per item."""
        items = list(tasks)
        infos: list[TaskInfo | AsyncqError] = self._run(lambda c: c.enqueue_many(items))
        return infos

    def wait(self, task: TaskInfo | WorkflowHandle[Any] | str, *, queue: str | None = None,
             timeout: float | None = None) -> TaskInfo:
        """Block until the task ended and return its final TaskInfo (``Client.wait``);
        WaitTimeoutError after ``timeout`` seconds."""
        info: TaskInfo = self._run(lambda c: c.wait(task, queue=queue, timeout=timeout))
        return info

    def result(self, task: TaskInfo | WorkflowHandle[Any] | str, *, queue: str | None = None,
               timeout: float | None = None) -> Any:
        """Block until the task ended and return its result (``Client.result``);
        TaskFailedError when it failed, WaitTimeoutError after ``timeout`` seconds."""
        return self._run(lambda c: c.result(task, queue=queue, timeout=timeout))

    def apply(self, task: Task | str, payload: object = None, *, timeout: float | None = None,
              **options: Unpack[ApplyOptions]) -> Any:
        """Enqueue a task and block for its result (``Client.apply``)."""
        return self._run(lambda c: c.apply(task, payload, timeout=timeout, **options))

    def enqueue_workflow(self, flow: Flow[Any, O], *, workflow_id: str | None = None,
                         on_error: Flow[Any, Any] | None = None,
                         retention: float = WORKFLOW_RETENTION,
                         after: Sequence[Any] = ()) -> WorkflowHandle[O]:
        """Start a workflow (``Client.enqueue_workflow``); ``result(handle)`` waits for it."""
        handle: WorkflowHandle[O] = self._run(lambda c: c.enqueue_workflow(
            flow, workflow_id=workflow_id, on_error=on_error, retention=retention, after=after))
        return handle

    def cancel(self, task_id: str, *, queue: str | None = None) -> bool:
        """Cancel a running task or a workflow (``Client.cancel``)."""
        cancelled: bool = self._run(lambda c: c.cancel(task_id, queue=queue))
        return cancelled


def _forget_parent_clients() -> None:
    for client in list(_LIVE):
        client._after_fork_in_child()


def _close_all() -> None:
    for client in list(_LIVE):
        client.close()


os.register_at_fork(after_in_child=_forget_parent_clients)
atexit.register(_close_all)
