"""``AsyncqTask``: the framework Task of an asyncq backend (its ``task_class``), so asyncq's
options are given where a task is defined (``@task(retry_on=SMTPException, timeout=60)``: the
framework passes the decorator's extra keywords to the backend's task class) and per call
(``.using(timeout=5)``); each is checked when given, not when the task runs."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from datetime import timedelta
from typing import TYPE_CHECKING, Any

from asyncq._limits import check_limits
from asyncq._model._options import parse_options
from asyncq._model._rules import handler_rules
from asyncq._worker._procpool import ISOLATIONS

from ._compat import Task
from ._compat import task as framework_task_decorator

if TYPE_CHECKING:
    _FrameworkTask = Task[Any, Any]
else:
    _FrameworkTask = Task

RULE_OPTIONS = ("max_retry", "timeout", "retention", "retry_delay", "retry_on", "expires_in")
"""Options of the definition the worker applies to every call, however it was enqueued (by
the framework, a Client, the scheduler, a workflow)."""
RUN_OPTIONS = ("limits", "isolate", "soft_timeout")
"""Options of the definition that say how the worker runs it: rate/concurrency limits and
process isolation (with its soft time limit)."""
DEFINED_ENQUEUE_OPTIONS = ("unique",)
"""Options of the definition the backend sends with each call it enqueues."""
DEFINITION_OPTIONS = RULE_OPTIONS + RUN_OPTIONS + DEFINED_ENQUEUE_OPTIONS

CALL_OPTIONS = ("max_retry", "timeout", "retention", "expires_in", "expires_at", "deadline",
                "unique", "unique_key", "headers")
"""What ``.using(...)`` takes besides the framework's own (priority, queue_name, run_after,
backend): asyncq enqueue options stored with the call, winning over the definition's."""


DEFINED: dict[str, AsyncqTask] = {}
"""Every task defined so far (imported), by dotted path: the first object made for a path is
its definition (a ``using`` copy is made from it)."""


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class AsyncqTask(_FrameworkTask):
    """A ``@task`` function of an asyncq backend, with asyncq's options.

    Where it is defined: ``max_retry``, ``retry_on``, ``retry_delay``, ``timeout``,
    ``retention``, ``expires_in`` (the worker's rules for every call, whatever enqueued it),
    ``limits`` (``asyncq.RateLimit`` / ``ConcurrencyLimit``), ``isolate`` ("process": a child
    process killed at the time limit; "thread") with ``soft_timeout``, and ``unique`` (seconds
    a call is refused while an equal one exists). Per call, ``.using(...)``: see
    ``CALL_OPTIONS``. A bad option raises TypeError/ValueError where it is given.
    """

    max_retry: int | None = None
    timeout: float | timedelta | None = None
    retention: float | timedelta | None = None
    retry_delay: Any = None
    retry_on: Any = None
    expires_in: float | timedelta | None = None
    limits: Any = None
    isolate: str | None = None
    soft_timeout: float | timedelta | None = None
    unique: float | timedelta | None = None
    call_options: Mapping[str, Any] = dataclasses.field(default_factory=dict)
    """The options ``.using(...)`` gave (sent with each call enqueued through this copy)."""

    def __post_init__(self) -> None:
        _FrameworkTask.__post_init__(self)
        what = f"task {self.module_path}"
        handler_rules(**{name: getattr(self, name) for name in RULE_OPTIONS}, what=what)
        check_limits(self.limits, self.module_path)
        check_run_options(self, what)
        if self.unique is not None:
            _checked_call_options({"unique": self.unique}, what)
        _checked_call_options(self.call_options, what)
        DEFINED.setdefault(self.module_path, self)

    def using(self, *, priority: int | None = None, queue_name: str | None = None,
              run_after: Any = None, backend: str | None = None,
              **options: Any) -> AsyncqTask:
        """A copy with other framework defaults (as the framework's ``using``) and asyncq
        options for the calls enqueued through it (``CALL_OPTIONS``), added to those of
        earlier ``using`` calls."""
        copy = _FrameworkTask.using(self, priority=priority, queue_name=queue_name,
                                    run_after=run_after, backend=backend)
        if not options:
            return copy
        _checked_call_options(options, f"task {self.module_path}: using")
        return dataclasses.replace(copy, call_options={**self.call_options, **options})

    def enqueue_options(self) -> dict[str, Any]:
        """The asyncq options the backend sends with a call of this copy: the definition's
        ``unique``, then what ``using`` gave (the worker applies the rest of the
        definition)."""
        if self.unique is None:
            return dict(self.call_options)
        return {"unique": self.unique, **self.call_options}

    def defined(self) -> dict[str, Any]:
        """The definition's options that are set, by name (what ``register`` registers)."""
        return {name: value for name in RULE_OPTIONS + RUN_OPTIONS
                if (value := getattr(self, name)) is not None}


def check_run_options(task: AsyncqTask, what: str) -> None:
    """``isolate`` and ``soft_timeout`` as the worker will take them."""
    if task.isolate is not None and task.isolate not in ISOLATIONS:
        raise ValueError(f"{what}: isolate must be 'thread' or 'process', got {task.isolate!r}")
    if task.isolate == "thread" and _is_async(task):
        raise ValueError(f"{what}: isolate='thread' is for a sync (plain def) task; an async "
                         f"one runs on the worker's event loop")
    if task.soft_timeout is not None and task.isolate != "process":
        raise ValueError(f"{what}: soft_timeout needs isolate='process' (only a child process "
                         f"can be interrupted)")
    if task.soft_timeout is not None:
        soft = (task.soft_timeout.total_seconds() if isinstance(task.soft_timeout, timedelta)
                else task.soft_timeout)
        if not isinstance(soft, int | float) or isinstance(soft, bool) or not soft > 0:
            raise ValueError(f"{what}: soft_timeout must be a positive number of seconds "
                             f"before the hard limit, got {task.soft_timeout!r}")


def _is_async(task: AsyncqTask) -> bool:
    from inspect import iscoroutinefunction

    return iscoroutinefunction(task.func)


def _checked_call_options(options: Mapping[str, Any], what: str) -> None:
    """Per-call options: known names (a definition-only one says where it goes) with values
    asyncq's enqueue accepts."""
    for name in options:
        if name in CALL_OPTIONS:
            continue
        if name in DEFINITION_OPTIONS:
            raise TypeError(f"{what}: {name} is set where the task is defined "
                            f"(@task({name}=...)): the worker applies it to every call")
        if name in ("process_at", "process_in", "queue"):
            raise TypeError(f"{what}: {name} is the framework's own option here: use "
                            f"run_after= or queue_name=")
        raise TypeError(f"{what}: unknown option {name!r}; per call asyncq takes "
                        f"{', '.join(CALL_OPTIONS)}")
    parse_options(options)


FRAMEWORK_OPTIONS = ("priority", "queue_name", "backend", "takes_context")
"""What the framework's ``@task`` takes itself."""


def task(function: Any = None, /, **options: Any) -> Any:
    """The framework's ``@task`` with asyncq's options (``DEFINITION_OPTIONS``) on every Django
    the backend runs on: Django 6.0's ``@task`` passes no extra keyword to the backend, Django
    6.1's and the backport's do. ``@task(queue_name="mail", retry_on=SMTPException)``."""
    framework = {name: options.pop(name) for name in FRAMEWORK_OPTIONS if name in options}

    def define(func: Any) -> Any:
        made = framework_task_decorator(**framework)(func)
        if not options:
            return made
        if not isinstance(made, AsyncqTask):
            raise TypeError(f"asyncq options need a task of an asyncq backend: TASKS"
                            f"[{made.backend!r}] is not asyncq.contrib.django.AsyncqBackend")
        return dataclasses.replace(made, **options)

    return define(function) if function is not None else define
