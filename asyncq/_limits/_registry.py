"""Which limits apply to which task type: the limits a ServeMux's handlers were registered with.

A limited handler is registered wrapped, so that a task whose limit key could not be computed
fails like a handler that raised (the worker runs it without limits and this wrapper raises the
key's error instead of calling the handler); other handlers are not wrapped and cost nothing.
"""

from __future__ import annotations

import functools
from collections.abc import Awaitable, Callable
from typing import Any

from .._errors import LimitKeyError
from .._model._task import Task
from ._spec import Limit

_Handler = Callable[[Task], Awaitable[Any]]



class HandlerLimits:
    """The limits of a mux's handlers, looked up by task type like the handlers themselves."""

    def __init__(self, match: Callable[[str], _Handler | None]) -> None:
        self._match = match
        self._of: dict[Any, tuple[Limit, ...]] = {}
        self._by_type: dict[str, tuple[tuple[Limit, ...], HandlerLimits]] = {}
        self._nested: list[HandlerLimits] = []
        self.key_errors: dict[str, LimitKeyError] = {}
        """Task id -> why its limit key could not be computed (filled by the worker's gate,
        emptied when the handler wrapper raises it)."""

    def __bool__(self) -> bool:
        """True once any handler was registered with limits (here or in a ServeMux
        registered as a handler here)."""
        return bool(self._of) or any(self._nested)

    def register(self, limits: tuple[Limit, ...], handler: _Handler) -> _Handler:
        """Remember ``limits`` for ``handler``; returns the handler to register instead."""
        errors = self.key_errors

        @functools.wraps(handler)
        async def limited(task: Task) -> Any:
            error = errors.pop(task.id or "", None) if errors else None
            if error is not None:
                raise error
            return await handler(task)

        self._of[limited] = limits
        self._by_type.clear()
        return limited

    def nest(self, inner: HandlerLimits) -> None:
        """A ServeMux was registered as a handler: its handlers' limits count too."""
        self._nested.append(inner)
        self._by_type.clear()

    def for_type(self, task_type: str) -> tuple[Limit, ...]:
        """The limits of the handler that runs ``task_type`` (none: an empty tuple)."""
        return self.resolve(task_type)[0]

    def resolve(self, task_type: str) -> tuple[tuple[Limit, ...], HandlerLimits]:
        """The limits of the handler that runs ``task_type``, and the HandlerLimits that
        registered them (a nested mux's own, whose wrapper raises its key errors)."""
        found = self._by_type.get(task_type)
        if found is None:
            handler = self._match(task_type)
            inner = getattr(handler, "limits", None)
            if handler in self._of:
                found = (self._of[handler], self)
            elif isinstance(inner, HandlerLimits) and inner in self._nested:
                found = inner.resolve(task_type)
            else:
                found = ((), self)
            if len(self._by_type) < 10_000:
                self._by_type[task_type] = found
        return found
