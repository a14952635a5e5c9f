"""``mux.task(name, **options)``: the decorator, typed so a wrong call is a type error."""

from __future__ import annotations

from collections.abc import Callable, Coroutine
from typing import Any, Concatenate, ParamSpec, TypeVar, overload

from .._model._rules import HandlerRules
from .._model._task import Task
from ._definition import AsyncTaskDefinition, SyncTaskDefinition, TaskDefinition, define

P = ParamSpec("P")
R = TypeVar("R")


class TaskDecorator:
    """Registers the function it decorates as a typed task and returns its definition. A
    leading parameter annotated ``Task`` receives the running task (``task.state``,
    ``task.retried``...) and is not one of the task's arguments."""

    def __init__(self, name: str, options: dict[str, Any],
                 register: Callable[[TaskDefinition[Any, Any]], None],
                 rules: HandlerRules | None = None) -> None:
        self._name = name
        self._options = options
        self._register = register
        self._rules = rules

    # Overloads overlap for functions whose first parameter accepts a Task: the first match,
    # the one that treats it as the running task, is the one meant.
    @overload
    def __call__(  # type: ignore[overload-overlap]
        self, fn: Callable[Concatenate[Task, P], Coroutine[Any, Any, R]]
    ) -> AsyncTaskDefinition[P, R]: ...
    @overload
    def __call__(  # type: ignore[overload-overlap]
        self, fn: Callable[P, Coroutine[Any, Any, R]]
    ) -> AsyncTaskDefinition[P, R]: ...
    @overload
    def __call__(
        self, fn: Callable[Concatenate[Task, P], R]
    ) -> SyncTaskDefinition[P, R]: ...
    @overload
    def __call__(self, fn: Callable[P, R]) -> SyncTaskDefinition[P, R]: ...

    def __call__(self, fn: Callable[..., Any]) -> TaskDefinition[Any, Any]:
        definition = define(self._name, fn, self._options, self._rules)
        self._register(definition)
        return definition
