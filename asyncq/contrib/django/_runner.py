"""The worker side: one asyncq handler that runs any ``@task`` function by its dotted path,
sync functions in one of the worker's threads and async ones on the loop (``run_isolated``:
either in a child process of the worker's pool), with Django's
database connections closed around each call as Django does around a request, and the
framework's ``task_started`` / ``task_finished`` signals sent around it as its own backends
send them (sender: the backend's class; ``task_result``: the call's TaskResult)."""

from __future__ import annotations

import asyncio
import traceback
from collections.abc import Callable
from datetime import timedelta
from functools import partial
from inspect import iscoroutinefunction
from typing import Any

from asgiref.sync import sync_to_async
from django.db import close_old_connections
from django.dispatch import Signal
from django.utils import timezone

from asyncq._log import get_logger
from asyncq._model._rules import HandlerRules, handler_rules
from asyncq._model._task import Task as AsyncqTask
from asyncq._worker._outcomes import retried
from asyncq._worker._threads import registered_rules, threaded

from ._compat import (
    TaskContext,
    TaskError,
    TaskResult,
    TaskResultStatus,
    normalize_json,
    task_finished,
    task_started,
)
from ._results import KWARGS, bound_task, call_args, framework_task
from ._task import RULE_OPTIONS

#: A run stopped this close to its time limit was stopped by it (the worker's timers run on
#: the loop's clock, the deadline is wall-clock time).
_LIMIT_SLACK = timedelta(milliseconds=50)


class _Call:
    """One run of a framework task: its function, arguments and the TaskResult its signals
    carry (RUNNING when started, SUCCESSFUL or FAILED when finished)."""

    def __init__(self, task: AsyncqTask, rules: HandlerRules | None) -> None:
        found = framework_task(task.type)
        payload = task.json()
        if not isinstance(payload, dict):
            raise TypeError(f"task {task.id}: its payload is not a Django task call")
        self.task = task
        self.rules = rules
        """Its registration's options (``retry_on``): how the worker decides its failure."""
        self.func: Callable[..., Any] = found.func
        self.args: list[Any] = call_args(payload)
        self.kwargs: dict[str, Any] = dict(payload.get(KWARGS, {}))
        bound = bound_task(found, payload, task.queue)
        self.sender = type(bound.get_backend())
        now = timezone.now()
        self.result: TaskResult[Any] = TaskResult(
            task=bound, id=task.id or "", status=TaskResultStatus("RUNNING"),
            enqueued_at=None, started_at=now, finished_at=None, last_attempted_at=now,
            args=self.args, kwargs=self.kwargs, backend=bound.backend, errors=[],
            worker_ids=["asyncq"] * (task.retried + 1))
        if found.takes_context:
            self.args = [TaskContext(task_result=self.result), *self.args]

    def finished(self, value: Any = None, error: BaseException | None = None
                 ) -> TaskResult[Any] | None:
        """The result as ``task_finished`` reports it, or None when the task has not finished:
        it will be retried (``retried``), or the worker interrupted it before its time limit
        (shutdown requeues it; a cancel request archives it). A call that ended after its
        time limit is FAILED with a TimeoutError whatever it did, as the worker records it."""
        deadline = self.task.deadline
        late = deadline is not None and timezone.now() >= deadline - _LIMIT_SLACK
        if error is None and not late:
            object.__setattr__(self.result, "_return_value", value)
            return self._end("SUCCESSFUL")
        if late and (error is None or isinstance(error, asyncio.CancelledError)):
            text = f"TimeoutError: the task ran past its time limit ({deadline})"
            failure = TaskError(exception_class_path="builtins.TimeoutError", traceback=text)
            error = TimeoutError(text)
        elif error is None or isinstance(error, asyncio.CancelledError):
            return None
        else:
            failure = TaskError(
                exception_class_path=f"{type(error).__module__}.{type(error).__qualname__}",
                traceback="".join(traceback.format_exception(error)))
        if retried(self.task, error, self.rules):  # (as the worker decides it)
            return None
        self.result.errors.append(failure)
        return self._end("FAILED")

    def _end(self, status: str) -> TaskResult[Any]:
        object.__setattr__(self.result, "status", TaskResultStatus(status))
        object.__setattr__(self.result, "finished_at", timezone.now())
        return self.result


def _sent(signal: Signal, responses: list[tuple[Any, Any]], result: TaskResult[Any]) -> None:
    """Log what a receiver raised: a receiver never changes a task's outcome."""
    name = "task_started" if signal is task_started else "task_finished"
    for receiver, response in responses:
        if isinstance(response, Exception):
            get_logger("django").error(
                "a Django signal receiver raised", signal=name, receiver=repr(receiver),
                task_id=result.id, error=f"{type(response).__name__}: {response}")


def _send(signal: Signal, call: _Call, result: TaskResult[Any]) -> None:
    _sent(signal, signal.send_robust(call.sender, task_result=result), result)


async def _asend(signal: Signal, call: _Call, result: TaskResult[Any]) -> None:
    _sent(signal, await signal.asend_robust(call.sender, task_result=result), result)


def _call_in_thread(call: _Call, _task: AsyncqTask) -> Any:
    # Connections are per thread: drop this thread's stale or broken ones before and after;
    # the receivers run in the task's thread, as with the framework's own workers.
    close_old_connections()
    try:
        _send(task_started, call, call.result)
        try:
            value = normalize_json(call.func(*call.args, **call.kwargs))
        except BaseException as exc:
            if (ended := call.finished(error=exc)) is not None:
                _send(task_finished, call, ended)  # (in the except block: exc_info is set)
            raise
        if (ended := call.finished(value)) is not None:
            _send(task_finished, call, ended)
        return value
    finally:
        close_old_connections()


async def run_django_task(task: AsyncqTask) -> Any:
    """Run the framework task named by ``task.type`` with the stored arguments; its return
    value (as JSON) is the asyncq result, and an exception it raises fails the task."""
    call = _Call(task, registered_rules(task.type))
    if not iscoroutinefunction(call.func):
        # The worker's own threads: as many as its concurrency, and a thread still running
        # after its task's timeout keeps its slot (as for a plain ``def`` handler).
        return await threaded(partial(_call_in_thread, call))(task)
    return await _call_async(call)


def run_isolated(task: AsyncqTask) -> Any:
    """``run_django_task`` in a child process of the worker's pool (Django set up there: see
    ``_child``): the signals are sent from the child, and
    its failure is decided with the options of its definition, as the worker registered it."""
    from ._rules import rules_of

    found = framework_task(task.type)
    options = rules_of(found)
    rules = handler_rules(**{k: options.get(k) for k in RULE_OPTIONS}, what=task.type)
    call = _Call(task, rules)
    if not iscoroutinefunction(call.func):
        return _call_in_thread(call, task)
    return asyncio.run(_call_async(call))


async def _call_async(call: _Call) -> Any:
    await sync_to_async(close_old_connections)()
    try:
        await _asend(task_started, call, call.result)
        try:
            value = normalize_json(await call.func(*call.args, **call.kwargs))
        except BaseException as exc:
            if (ended := call.finished(error=exc)) is not None:
                await _asend(task_finished, call, ended)
            raise
        if (ended := call.finished(value)) is not None:
            await _asend(task_finished, call, ended)
        return value
    finally:
        await sync_to_async(close_old_connections)()

