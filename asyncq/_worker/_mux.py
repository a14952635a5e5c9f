"""ServeMux: routes a task to its handler by exact type, else by the longest registered prefix."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

from .._errors import HandlerNotFoundError
from .._task import Task

Handler = Callable[[Task], Awaitable[Any]]
Middleware = Callable[[Handler], Handler]


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
        """Register ``handler`` for ``pattern``; blank, duplicate or non-callable is an error."""
        if not isinstance(pattern, str) or not pattern.strip():
            raise ValueError("handler pattern must be a non-blank string")
        if not callable(handler):
            raise TypeError(f"handler for {pattern!r} must be callable, got {handler!r}")
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


async def _not_found(task: Task) -> Any:
    raise HandlerNotFoundError(f"no handler registered for task type {task.type!r}")
