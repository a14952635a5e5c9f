"""A call of a Django task as an asyncq Task, for the doors other than ``enqueue``:
``call(task, *args)`` for the scheduler (periodic calls) or a Client; ``step(task, *args)`` and
``pipe(task, *args)`` as steps of workflows (chains, groups, chords), ``pipe`` giving the
value of what ran before it as the first argument (a chord's callback gets the list of its
group's results); a step's id (``step.task.id``) is its result id, which ``get_result``
reads."""

from __future__ import annotations

import uuid
from typing import Any

from asyncq._model._task import Task as AsyncqMessage
from asyncq._workflow._canvas import Step

from ._compat import Task
from ._results import INPUT

#: Enqueue options a workflow step cannot take (``Step.options`` refuses them).
_NOT_IN_STEPS = ("unique", "unique_key", "process_at")


def call(task: Task[Any, Any], /, *args: Any, **kwargs: Any) -> AsyncqMessage:
    """``task(*args, **kwargs)`` as the asyncq Task ``task.enqueue`` would store (its queue
    and priority band, ``using`` options, ``run_after``): for ``Scheduler.register``, a
    Client's ``enqueue``. The worker applies the task's definition to it as to any call."""
    payload, options = _prepared(task, args, kwargs)
    return AsyncqMessage(task.module_path, payload, **options)


def step(task: Task[Any, Any], /, *args: Any, **kwargs: Any) -> Step[object, Any]:
    """A workflow step running ``task(*args, **kwargs)`` with the options ``task.enqueue``
    would give it (its queue and priority band, ``using`` options); it receives no input."""
    return _step(task, args, kwargs, "")


def pipe(task: Task[Any, Any], /, *args: Any, **kwargs: Any) -> Step[Any, Any]:
    """A workflow step running ``task(value, *args, **kwargs)``, ``value`` being the result of
    what ran before it (a group's: the list of its results, in order)."""
    return _step(task, args, kwargs, INPUT)


def _prepared(task: Task[Any, Any], args: tuple[Any, ...], kwargs: dict[str, Any]
              ) -> tuple[dict[str, Any], dict[str, Any]]:
    from ._backend import AsyncqBackend

    backend = task.get_backend()
    if not isinstance(backend, AsyncqBackend):
        raise TypeError(f"{task.module_path}: its backend {task.backend!r} is not "
                        f"asyncq.contrib.django.AsyncqBackend")
    return backend.prepare(task, args, kwargs)


def _step(task: Task[Any, Any], args: tuple[Any, ...], kwargs: dict[str, Any],
          mode: str) -> Step[Any, Any]:
    if task.run_after is not None:
        raise ValueError(f"{task.module_path}: a workflow step runs when the steps before it "
                         f"are done: drop run_after")
    payload, options = _prepared(task, args, kwargs)
    for name in _NOT_IN_STEPS:
        options.pop(name, None)
    options.setdefault("task_id", str(uuid.uuid4()))
    return Step(AsyncqMessage(task.module_path, payload, **options), mode)
