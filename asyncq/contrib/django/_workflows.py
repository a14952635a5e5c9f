"""Django tasks as steps of asyncq workflows (chains, groups, chords): ``step(task, *args)``
calls a task with its arguments, ``pipe(task, *args)`` calls it with the value of what ran
before it first (a chord's callback gets the list of its group's results); each step's id
(``step.task.id``) is its result id, which ``get_result`` reads."""

from __future__ import annotations

import uuid
from typing import Any

from asyncq._model._task import Task as AsyncqMessage
from asyncq._workflow._canvas import Step

from ._compat import Task
from ._results import INPUT

#: Enqueue options a workflow step cannot take (``Step.options`` refuses them).
_NOT_IN_STEPS = ("unique", "unique_key", "process_at")


def step(task: Task[Any, Any], /, *args: Any, **kwargs: Any) -> Step[object, Any]:
    """A workflow step running ``task(*args, **kwargs)`` with the options ``task.enqueue``
    would give it (its queue and priority band, ``using`` options); it receives no input."""
    return _step(task, args, kwargs, "")


def pipe(task: Task[Any, Any], /, *args: Any, **kwargs: Any) -> Step[Any, Any]:
    """A workflow step running ``task(value, *args, **kwargs)``, ``value`` being the result of
    what ran before it (a group's: the list of its results, in order)."""
    return _step(task, args, kwargs, INPUT)


def _step(task: Task[Any, Any], args: tuple[Any, ...], kwargs: dict[str, Any],
          mode: str) -> Step[Any, Any]:
    from ._backend import AsyncqBackend

    backend = task.get_backend()
    if not isinstance(backend, AsyncqBackend):
        raise TypeError(f"{task.module_path}: its backend {task.backend!r} is not "
                        f"asyncq.contrib.django.AsyncqBackend")
    if task.run_after is not None:
        raise ValueError(f"{task.module_path}: a workflow step runs when the steps before it "
                         f"are done: drop run_after")
    payload, options = backend.prepare(task, args, kwargs)
    for name in _NOT_IN_STEPS:
        options.pop(name, None)
    options.setdefault("task_id", str(uuid.uuid4()))
    return Step(AsyncqMessage(task.module_path, payload, **options), mode)
