"""ServeMux: routes a task to its handler by exact type, else by the longest registered prefix."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from typing import Any, TypeVar, cast

from .._errors import HandlerNotFoundError
from .._limits import HandlerLimits, Limit, check_limits
from .._model._task import Task
from .._typed import TaskDecorator, TaskDefinition
from ._config import Lifespan, check_lifespan
from ._threads import is_sync_handler, threaded

Handler = Callable[[Task], Awaitable[Any]]
SyncOrAsyncHandler = Handler | Callable[[Task], Any]
"""What ``ServeMux.handle`` and ``Worker`` take: an async handler, or a sync one (threaded)."""
H = TypeVar("H", bound=SyncOrAsyncHandler)
Middleware = Callable[[Handler], Handler]


def check_handler(handler: object, what: str) -> Handler:
    """The handler the worker awaits for ``handler``: an async function, an object with an
    async ``__call__`` or a ServeMux as it is; a regular (sync) function or callable object
    wrapped to run in a worker thread (see ``_threads``). Anything else is a TypeError."""
    if is_sync_handler(handler):
        return cast(Handler, threaded(cast(Callable[[Task], Any], handler)))
    if callable(handler):
        return cast(Handler, handler)
    raise TypeError(f"{what} must be a function taking the task (async def handler(task): "
                    f"..., or a plain def run in a thread) or a ServeMux, got {handler!r}")


class ServeMux:
    """A handler that dispatches to other handlers by task type.

    ``mux.handle("email:deliver", h)`` matches that type exactly; ``mux.handle("image:", h)``
    matches any type starting with ``image:`` unless a longer pattern matches. Middlewares added
    with ``use`` wrap every handler, the first added being the outermost.
    """

    def __init__(self, *, lifespan: Lifespan | None = None) -> None:
        check_lifespan(lifespan)
        #: What a worker running this mux enters before its first task (its value is every
        #: task's ``state``) unless the Worker is given its own ``lifespan``; so
        #: ``asyncq worker app:mux`` runs the app's lifespan too.
        self.lifespan = lifespan
        self._exact: dict[str, Handler] = {}
        self._prefixes: list[tuple[str, Handler]] = []  # longest first
        self._middlewares: list[Middleware] = []
        self._chains: dict[str, Handler] = {}
        #: The rate and concurrency limits handlers were registered with (see ``handle``).
        self.limits = HandlerLimits(self.match)

    def handle(self, pattern: str, handler: SyncOrAsyncHandler, *,
               limits: Sequence[Limit] | None = None) -> None:
        """Register ``handler`` for ``pattern``; a blank or duplicate pattern, or a handler
        that is not callable, is an error. A sync handler (a plain ``def``) runs in a worker
        thread: it is registered wrapped in an async handler (so ``match`` returns that
        wrapper, whose ``__wrapped__`` is the function) and middlewares wrap it like any.

        ``limits``: ``asyncq.ConcurrencyLimit``/``RateLimit`` objects every worker enforces
        together before starting a task of this handler (a limit without ``name=`` is named
        after ``pattern``)."""
        if not isinstance(pattern, str) or not pattern.strip():
            raise ValueError("handler pattern must be a non-blank string")
        checked = check_limits(limits, pattern)
        wrapped = check_handler(handler, f"the handler for {pattern!r}")
        if pattern in self._exact:
            raise ValueError(f"a handler is already registered for {pattern!r}")
        if checked:
            wrapped = self.limits.register(checked, wrapped)
        if isinstance(handler, ServeMux):
            self.limits.nest(handler.limits)
        self._exact[pattern] = wrapped
        self._prefixes.append((pattern, wrapped))
        self._prefixes.sort(key=lambda item: -len(item[0]))
        self._chains.clear()

    def handler(self, pattern: str, *,
                limits: Sequence[Limit] | None = None) -> Callable[[H], H]:
        """Decorator form of ``handle``: ``@mux.handler("email:deliver")``; the function is
        returned as it is (a sync one stays callable directly)."""

        def register(fn: H) -> H:
            self.handle(pattern, fn, limits=limits)
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
        ``await fn.enqueue(client, *args)``, ``await fn.result(client, info)``.
        ``limits=[...]`` are the handler's limits, as for ``handle``."""
        limits = check_limits(options.pop("limits", None), name)

        def register(definition: TaskDefinition[Any, Any]) -> None:
            self.handle(definition.name, definition.handler(), limits=limits)

        return TaskDecorator(name, options, register)


async def _not_found(task: Task) -> Any:
    raise HandlerNotFoundError(f"no handler registered for task type {task.type!r}")
