"""The worker side: one asyncq handler that runs any ``@task`` function by its dotted path,
sync functions in one of the worker's threads and async ones on the loop, with Django's
database connections closed around each call as Django does around a request."""

from __future__ import annotations

from collections.abc import Callable
from functools import partial
from inspect import iscoroutinefunction
from typing import Any

from asgiref.sync import sync_to_async
from django.db import close_old_connections
from django.utils import timezone

from asyncq._model._task import Task as AsyncqTask
from asyncq._worker._threads import threaded

from ._compat import TaskContext, TaskResult, TaskResultStatus, normalize_json
from ._results import ARGS, KWARGS, bound_task, framework_task


def _call_in_thread(func: Callable[..., Any], args: list[Any], kwargs: dict[str, Any],
                    _task: AsyncqTask) -> Any:
    # Connections are per thread: drop this thread's stale or broken ones before and after.
    close_old_connections()
    try:
        return func(*args, **kwargs)
    finally:
        close_old_connections()


async def run_django_task(task: AsyncqTask) -> Any:
    """Run the framework task named by ``task.type`` with the stored arguments; its return
    value (as JSON) is the asyncq result, and an exception it raises fails the task."""
    found = framework_task(task.type)
    payload = task.json()
    if not isinstance(payload, dict):
        raise TypeError(f"task {task.id}: its payload is not a Django task call")
    args: list[Any] = list(payload.get(ARGS, []))
    kwargs: dict[str, Any] = dict(payload.get(KWARGS, {}))
    if found.takes_context:
        now = timezone.now()
        running: TaskResult[Any] = TaskResult(
            task=bound_task(found, payload, task.queue), id=task.id or "",
            status=TaskResultStatus("RUNNING"), enqueued_at=None, started_at=now,
            finished_at=None, last_attempted_at=now, args=args, kwargs=kwargs,
            backend=found.backend, errors=[], worker_ids=["asyncq"] * (task.retried + 1))
        args = [TaskContext(task_result=running), *args]
    if iscoroutinefunction(found.func):
        await sync_to_async(close_old_connections)()
        try:
            value = await found.func(*args, **kwargs)
        finally:
            await sync_to_async(close_old_connections)()
    else:
        # The worker's own threads: as many as its concurrency, and a thread still running
        # after its task's timeout keeps its slot (as for a plain ``def`` handler).
        value = await threaded(partial(_call_in_thread, found.func, args, kwargs))(task)
    return normalize_json(value)
