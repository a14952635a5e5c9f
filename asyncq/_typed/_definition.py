"""Typed task definitions: a function registered once on a ServeMux, enqueued with checked
arguments and awaited for a typed result.

``@mux.task("email:send", queue="mail")`` over ``async def send_email(to: str) -> Receipt``
gives a ``TaskDefinition[[str], Receipt]``: ``await send_email.enqueue(client, "a@b.c")``
binds and stores the arguments as a JSON object, the worker decodes them back to their
annotated types, and ``await send_email.result(client, info)`` returns a ``Receipt``.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import inspect
from collections.abc import Callable, Coroutine
from typing import (
    TYPE_CHECKING,
    Any,
    Concatenate,
    Generic,
    ParamSpec,
    Self,
    TypeVar,
    Unpack,
    overload,
)

import orjson

from .._defaults import DEFAULT_QUEUE
from .._model._info import TaskInfo
from .._model._message import NO_TIMEOUT, TaskMessage
from .._model._options import UNSET, TaskOptions
from .._model._rules import RESULT_RETENTION_MS, HandlerRules, effective
from .._model._task import Task
from .._workflow._canvas import Step
from ._signature import TaskSignature

if TYPE_CHECKING:
    from .._client._client import Client
    from .._client._sync import SyncClient

P = ParamSpec("P")
R = TypeVar("R")
P2 = ParamSpec("P2")
R2 = TypeVar("R2")


@dataclasses.dataclass(frozen=True, eq=False)
class TaskDefinition(Generic[P, R]):
    """A task function registered on a ServeMux under ``name`` with default enqueue
    options (``defaults``: queue, process_in...; the handler's task options, max_retry and
    the like, are its registration's). Call it to run the function directly (unit tests)."""

    name: str
    fn: Callable[..., Any]
    signature: TaskSignature = dataclasses.field(repr=False)
    defaults: dict[str, Any] = dataclasses.field(default_factory=dict)
    rules: HandlerRules | None = None
    """The task options its handler was registered with (max_retry, timeout, retention,
    retry policy): they apply however its tasks are enqueued."""

    def options(self, **options: Unpack[TaskOptions]) -> Self:
        """The same task with some enqueue options changed (``process_in=60``,
        ``queue="urgent"``, ``task_id=...``); bad options raise ValueError/TypeError here."""
        merged = {**self.defaults, **options}
        for given, replaced in (("expires_in", "expires_at"), ("expires_at", "expires_in")):
            if options.get(given) is not None:  # (one expiry: the later one)
                merged.pop(replaced, None)
        Task(self.name, **merged)  # validates
        return dataclasses.replace(self, defaults=merged)

    def task(self, *args: P.args, **kwargs: P.kwargs) -> Task:
        """The Task a call would enqueue (for ``client.enqueue_many`` or a Task of your own);
        a call the function would refuse raises TypeError."""
        raw = self.signature.payload(args, kwargs)
        return Task(self.name, orjson.Fragment(raw), **self.defaults)

    def s(self, *args: P.args, **kwargs: P.kwargs) -> Step[object, R]:
        """A workflow step calling this task with these arguments; it receives no input
        (in a chain it just waits for the step before it). A wrong call raises TypeError."""
        raw = self.signature.payload(args, kwargs)
        return Step(Task(self.name, orjson.Fragment(raw), **self.defaults), "",
                    self.signature.returns)

    def pipe(self: TaskDefinition[Concatenate[Any, P2], R2], *args: P2.args,
             **kwargs: P2.kwargs) -> Step[Any, R2]:
        """A workflow step whose first argument is the value of what ran before it (the
        previous step's result, a group's list of results); the other arguments are given
        here. ``chain(add.s(1, 2), mul.pipe(10))`` runs ``mul(add(1, 2), 10)``. The other
        arguments are type-checked here; the value it receives is decoded to the first
        parameter's annotation when it runs (mypy cannot relate the two statically)."""
        name, raw = self.signature.piped_payload(args, kwargs)
        return Step(Task(self.name, orjson.Fragment(raw), **self.defaults), name,
                    self.signature.returns)

    @overload
    def enqueue(self, client: SyncClient, /, *args: P.args, **kwargs: P.kwargs) -> TaskInfo: ...
    @overload
    def enqueue(self, client: Client, /, *args: P.args,
                **kwargs: P.kwargs) -> Coroutine[Any, Any, TaskInfo]: ...

    def enqueue(self, client: Client | SyncClient, /, *args: P.args,
                **kwargs: P.kwargs) -> TaskInfo | Coroutine[Any, Any, TaskInfo]:
        """Store a call of this task (``await`` it with a Client; a SyncClient returns the
        TaskInfo at once); a wrong or missing argument raises TypeError before anything is
        written."""
        from .._client._sync import SyncClient

        if isinstance(client, SyncClient):
            task = self.task(*args, **kwargs)
            return self._stored(client.enqueue(task), task)
        return self._enqueue(client, args, kwargs)

    async def _enqueue(self, client: Client, args: Any, kwargs: Any) -> TaskInfo:
        task = self.task(*args, **kwargs)
        return self._stored(await client.enqueue(task), task)

    def _stored(self, info: TaskInfo, task: Task) -> TaskInfo:
        return info if self.rules is None else _with_rules(info, task, self.rules)

    @property
    def queue(self) -> str:
        """The queue this task is enqueued to unless ``options(queue=...)`` says otherwise."""
        queue: str = self.defaults.get("queue", DEFAULT_QUEUE)
        return queue

    @overload
    def result(self, client: SyncClient, task: TaskInfo | str, *,
               timeout: float | None = None) -> R: ...
    @overload
    def result(self, client: Client, task: TaskInfo | str, *,
               timeout: float | None = None) -> Coroutine[Any, Any, R]: ...

    def result(self, client: Client | SyncClient, task: TaskInfo | str, *,
               timeout: float | None = None) -> R | Coroutine[Any, Any, R]:
        """Wait for a run of this task (what ``enqueue`` returned, or its id in this task's
        queue) and return its result decoded to the function's return type (``await`` it
        with a Client). Raises TaskFailedError when it failed for good, TimeoutError after
        ``timeout`` seconds."""
        from .._client._sync import SyncClient

        if isinstance(client, SyncClient):
            decoded: R = self.signature.returns(
                client.result(task, queue=self.queue, timeout=timeout))
            return decoded
        return self._result(client, task, timeout)

    async def _result(self, client: Client, task: TaskInfo | str, timeout: float | None) -> R:
        value = await client.result(task, queue=self.queue, timeout=timeout)
        decoded: R = self.signature.returns(value)
        return decoded

    def handler(self) -> Callable[[Task], Any]:
        """The handler the mux runs for this task."""
        raise NotImplementedError

    def _direct_args(self, args: tuple[Any, ...]) -> tuple[Any, ...]:
        return (Task(self.name, **self.defaults), *args) if self.signature.takes_task else args


class AsyncTaskDefinition(TaskDefinition[P, R]):
    """A typed task whose function is a coroutine function."""

    def __call__(self, *args: P.args, **kwargs: P.kwargs) -> Coroutine[Any, Any, R]:
        coro: Coroutine[Any, Any, R] = self.fn(*self._direct_args(args), **kwargs)
        return coro

    def handler(self) -> Callable[[Task], Coroutine[Any, Any, Any]]:
        """The handler the mux runs: decode the arguments, await the function, return its
        value as JSON data."""
        sig, fn = self.signature, self.fn
        takes_task = sig.takes_task

        async def run_task(task: Task) -> Any:
            args, kwargs = sig.call_args(task.json())
            if takes_task:
                args = (task, *args)
            return sig.result_value(await fn(*args, **kwargs))

        run_task.__qualname__ = getattr(fn, "__qualname__", run_task.__qualname__)
        return run_task


class SyncTaskDefinition(TaskDefinition[P, R]):
    """A typed task whose function is a plain function (run in a worker thread)."""

    def __call__(self, *args: P.args, **kwargs: P.kwargs) -> R:
        value: R = self.fn(*self._direct_args(args), **kwargs)
        return value

    def handler(self) -> Callable[[Task], Any]:
        """The (sync) handler the mux runs in a worker thread."""
        sig, fn = self.signature, self.fn
        takes_task = sig.takes_task

        def run_task(task: Task) -> Any:
            args, kwargs = sig.call_args(task.json())
            if takes_task:
                args = (task, *args)
            return sig.result_value(fn(*args, **kwargs))

        run_task.__qualname__ = getattr(fn, "__qualname__", run_task.__qualname__)
        return run_task


def _with_rules(info: TaskInfo, task: Task, rules: HandlerRules) -> TaskInfo:
    """``info`` of a task just enqueued, showing the values its handler's registration
    applies where the enqueue set none (the client alone knows only the defaults)."""
    msg = TaskMessage(id=info.id, type=info.type, queue=info.queue,
                      deadline_ms=0 if info.deadline is None else 1)
    opts = task.options
    if opts.max_retry is not UNSET:
        msg.max_retry = opts.max_retry
    if opts.timeout_ms is not UNSET:
        msg.timeout_ms = opts.timeout_ms or NO_TIMEOUT
    if opts.retention_ms is not UNSET:
        msg.retention_ms = opts.retention_ms
    max_retry, timeout, retention = effective(msg, rules)
    limit = None if timeout <= 0 else dt.timedelta(milliseconds=timeout)
    kept = dt.timedelta(milliseconds=RESULT_RETENTION_MS if retention is None else retention)
    expires_at = info.expires_at
    if expires_at is None and rules.expires_ms is not None and info.enqueued_at is not None:
        expires_at = info.enqueued_at + dt.timedelta(milliseconds=rules.expires_ms)
    return dataclasses.replace(info, max_retry=max_retry, timeout=limit, retention=kept,
                               expires_at=expires_at)


def define(name: str, fn: Callable[..., Any], options: dict[str, Any],
           rules: HandlerRules | None = None,
           ) -> AsyncTaskDefinition[Any, Any] | SyncTaskDefinition[Any, Any]:
    """A definition of ``fn`` as the task ``name``; bad options or annotations that cannot
    be resolved raise ValueError/TypeError here, when it is registered."""
    if not callable(fn) or isinstance(fn, TaskDefinition):
        raise TypeError(f"@mux.task({name!r}) decorates a function, got {fn!r}")
    signature = TaskSignature(name, fn)
    Task(name, **options)  # validates the name and the options
    if inspect.iscoroutinefunction(fn):
        return AsyncTaskDefinition(name, fn, signature, dict(options), rules)
    if inspect.isasyncgenfunction(fn) or inspect.isgeneratorfunction(fn):
        raise TypeError(f"task {name!r}: a generator function cannot be a task; return the "
                        "values as a list instead")
    return SyncTaskDefinition(name, fn, signature, dict(options), rules)
