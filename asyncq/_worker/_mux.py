"""ServeMux: routes a task to its handler by exact type, else by the longest registered prefix."""

from __future__ import annotations

import inspect
from collections.abc import Awaitable, Callable
from typing import Any, cast

from .._errors import HandlerNotFoundError
from .._task import Task
from .._typed import TaskDecorator, TaskDefinition

Handler = Callable[[Task], Awaitable[Any]]
Middleware = Callable[[Handler], Handler]


def check_handler(handler: object, what: str) -> Handler:
    """Refuse, when it is registered, what the worker could not await: a regular (sync)
    function would run its body on the event loop and then fail on every retry."""
    if (isinstance(handler, ServeMux) or inspect.iscoroutinefunction(handler)
            or inspect.iscoroutinefunction(getattr(handler, "__call__", None))):  # noqa: B004
        return cast(Handler, handler)
    if callable(handler):
        name = getattr(handler, "__qualname__", None) or repr(handler)
        raise TypeError(
            f"{what} must be an async function, got the regular function {name}: define it "
            "with `async def handler(task): ...` (run blocking work inside it with "
            "`await asyncio.to_thread(...)`), or pass an object whose __call__ is async")
    raise TypeError(f"{what} must be an async function (async def handler(task): ...) or a "
                    f"ServeMux, got {handler!r}")


class ServeMux:
    """A handler that dispatches to other handlers by task type.

    ``mux.handle("email:deliver", h)`` matches that type exactly; ``mux.handle("image:", h)``
    matches any type starting with ``image:`` unless a longer pattern matches. Middlewares added
    with ``use`` wrap every handler, the first added being the outermost.
    """

    def __init__(self) -> None:
        self._exact: dict[str, Handler] = {}
        self._prefixes: list[tuple[str, Handler]] = []  # longest first
        self._middlewares: list[Middleware] = []
        self._chains: dict[str, Handler] = {}

    def handle(self, pattern: str, handler: Handler) -> None:
        """Register ``handler`` for ``pattern``; a blank or duplicate pattern, or a handler
        that is not an async function (or an object with an async ``__call__``), is an
        error."""
        if not isinstance(pattern, str) or not pattern.strip():
            raise ValueError("handler pattern must be a non-blank string")
        check_handler(handler, f"the handler for {pattern!r}")
        if pattern in self._exact:
            raise ValueError(f"a handler is already registered for {pattern!r}")
        self._exact[pattern] = handler
        self._prefixes.append((pattern, handler))
        self._prefixes.sort(key=lambda item: -len(item[0]))
        self._chains.clear()

    def handler(self, pattern: str) -> Callable[[Handler], Handler]:
        """Decorator form of ``handle``: ``@mux.handler("email:deliver")``."""

        def register(fn: Handler) -> Handler:
            self.handle(pattern, fn)
            return fn

        return register

    def use(self, *middlewares: Middleware) -> None:
        """Wrap every handler; each middleware takes a handler and returns a handler."""
        for mw in middlewares:
            if not callable(mw):
                raise TypeError(f"middleware must be callable, got {mw!r}")
        self._middlewares.extend(middlewares)
        self._chains.clear()

    def match(self, task_type: str) -> Handler | None:
        """The handler registered for ``task_type`` (before middlewares), or None."""
        found = self._exact.get(task_type)
        if found is not None:
            return found
        for pattern, handler in self._prefixes:
            if task_type.startswith(pattern):
                return handler
        return None

    def patterns(self) -> list[str]:
        return sorted(self._exact)

    def _chain(self, task_type: str) -> Handler:
        chain = self._chains.get(task_type)
        if chain is None:
            chain = self.match(task_type) or _not_found
            for mw in reversed(self._middlewares):
                chain = mw(chain)
            if len(self._chains) < 10_000:
                self._chains[task_type] = chain
        return chain

    async def __call__(self, task: Task) -> Any:
        return await self._chain(task.type)(task)

    def task(self, name: str, **options: Any) -> TaskDecorator:
        """Decorator registering a function as the typed task ``name`` with default enqueue
        ``options`` (queue, max_retry, timeout, retention...); returns its TaskDefinition:
        ``await fn.enqueue(client, *args)``, ``await fn.result(client, info)``."""
        def register(definition: TaskDefinition[Any, Any]) -> None:
            self.handle(definition.name, definition.handler())

        return TaskDecorator(name, options, register)


async def _not_found(task: Task) -> Any:
    raise HandlerNotFoundError(f"no handler registered for task type {task.type!r}")
