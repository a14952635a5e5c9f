"""How an asyncq task reads as a Tasks-framework ``TaskResult``: its payload, state, times,
return value and error, and the framework Task it was enqueued from."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from django.utils.module_loading import import_string

from asyncq._model._info import TaskInfo, TaskState

from ._compat import Task, TaskError, TaskResult, TaskResultStatus

#: asyncq states as the framework names them: waiting to run (again) is READY.
_STATUS = {
    TaskState.ACTIVE: TaskResultStatus("RUNNING"),
    TaskState.COMPLETED: TaskResultStatus("SUCCESSFUL"),
    TaskState.ARCHIVED: TaskResultStatus("FAILED"),
}

#: The payload's keys: the call's arguments and the task's options at enqueue (``queue``: the
#: Django queue name, which a priority band's asyncq queue is not; ``backend``: the alias it
#: was enqueued through, which ``using(backend=...)`` may have changed).
ARGS, KWARGS, PRIORITY, RUN_AFTER, QUEUE, BACKEND = (
    "args", "kwargs", "priority", "run_after", "queue", "backend")
#: The key a piped workflow step's input is stored under (the value of what ran before it):
#: the call's first argument.
INPUT = "input"


def framework_task(module_path: str) -> Task[Any, Any]:
    """The ``@task`` object at ``module_path`` (what a worker runs and a result names);
    TypeError when that name is not a task, as for a function without the decorator."""
    found = import_string(module_path)
    if not isinstance(found, Task):
        raise TypeError(f"{module_path} is not a Django task: decorate it with @task")
    return found


def task_payload(args: Any, kwargs: Any, priority: int, run_after: datetime | None,
                 queue: str, backend: str) -> dict[str, Any]:
    """What is stored for a call: its arguments and the options it was enqueued with."""
    return {ARGS: list(args), KWARGS: dict(kwargs), PRIORITY: priority,
            RUN_AFTER: run_after.isoformat() if run_after is not None else None, QUEUE: queue,
            BACKEND: backend}


def call_args(payload: dict[str, Any]) -> list[Any]:
    """The call's positional arguments: those stored, after the input of a piped workflow
    step (``INPUT``) when it has one."""
    args = list(payload.get(ARGS, []))
    return [payload[INPUT], *args] if INPUT in payload else args


def bound_task(task: Task[Any, Any], payload: dict[str, Any], queue: str) -> Task[Any, Any]:
    """``task`` with the queue, priority and run_after its call was enqueued with (``queue``,
    the asyncq queue, for a call stored without its Django queue name)."""
    run_after = payload.get(RUN_AFTER)
    return task.using(queue_name=payload.get(QUEUE) or queue, backend=payload.get(BACKEND),
                      priority=payload.get(PRIORITY, task.priority),
                      run_after=datetime.fromisoformat(run_after) if run_after else None)


def error_of(info: TaskInfo) -> TaskError:
    """The failure as the framework reports it: the exception's dotted class path (read from
    the stored traceback's last line, which Python writes qualified) and the traceback."""
    tb = info.last_traceback or ""
    last = tb.rstrip().rpartition("\n")[2] if tb else (info.last_error or "")
    name = last.partition(":")[0].strip() or "Exception"
    if "." not in name:
        name = f"builtins.{name}"
    return TaskError(exception_class_path=name, traceback=tb or (info.last_error or ""))


def result_of(info: TaskInfo, backend: str, *, task: Task[Any, Any] | None = None
              ) -> TaskResult[Any]:
    """``info`` as a TaskResult: READY while it waits (pending, scheduled, retrying), RUNNING,
    SUCCESSFUL with its return value, or FAILED with its error. ``task`` is the framework task
    when the caller has it (at enqueue), else it is imported from the task's type."""
    payload = info.json() or {}
    if task is None:
        task = bound_task(framework_task(info.type), payload, info.queue)
    status = _STATUS.get(info.state, TaskResultStatus("READY"))
    errors = [error_of(info)] if info.last_error else []
    finished = info.completed_at
    if status == TaskResultStatus("FAILED"):
        finished = finished or info.last_failed_at
    attempts = info.retried + (status != TaskResultStatus("READY"))
    result: TaskResult[Any] = TaskResult(
        task=task, id=info.id, status=status, enqueued_at=info.enqueued_at,
        started_at=info.started_at, finished_at=finished,
        last_attempted_at=info.started_at or info.last_failed_at,
        args=call_args(payload), kwargs=payload.get(KWARGS, {}), backend=backend,
        errors=errors, worker_ids=["asyncq"] * attempts)
    if status == TaskResultStatus("SUCCESSFUL"):
        object.__setattr__(result, "_return_value", info.result_json())
    return result
