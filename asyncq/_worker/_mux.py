"""ServeMux: routes a task to its handler by exact type, else by the longest registered prefix."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from datetime import timedelta
from typing import Any, TypeVar, cast

from .._errors import HandlerNotFoundError
from .._limits import HandlerLimits, Limit, check_limits
from .._model._rules import HandlerRules, handler_rules
from .._model._task import Task
from .._typed import TaskDecorator, TaskDefinition
from ._config import Lifespan, check_lifespan
from ._procpool import ISOLATIONS, handler_ref, typed_ref
from ._threads import is_sync_handler, isolated, threaded

Handler = Callable[[Task], Awaitable[Any]]
RetryDelay = float | timedelta | Callable[[int, BaseException, Task], float | timedelta]
"""A handler's ``retry_delay``: seconds, a timedelta, or ``(retried, error, task) -> delay``."""
HANDLER_OPTIONS = ("max_retry", "timeout", "retention", "retry_delay", "retry_on", "expires_in")
"""The task options a handler registration sets (``handle``, ``handler``, ``task``)."""
ISOLATE_OPTIONS = ("isolate", "soft_timeout")
"""Where a handler runs (``isolate``: "thread" or "process") and its soft time limit."""
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


def check_isolation(handler: object, isolate: object, soft_timeout: object, timeout: object,
                    what: str) -> Handler | None:
    """The handler the worker awaits for a registration with ``isolate=`` (None: not set):
    "process" runs it in the worker's process pool (it must be importable by name: see
    ``handler_ref``), "thread" a sync handler in a thread whatever the worker's
    ``sync_handlers``. ``soft_timeout`` (process only) must be below ``timeout``."""
    if isolate is None:
        if soft_timeout is not None:
            raise ValueError(f"{what}: soft_timeout needs isolate='process' (only a child "
                             f"process can be interrupted)")
        return None
    if isolate not in ISOLATIONS:
        raise ValueError(f"{what}: isolate must be 'thread' or 'process', got {isolate!r}")
    if isolate == "thread":
        if soft_timeout is not None:
            raise ValueError(f"{what}: soft_timeout needs isolate='process' (a thread cannot "
                             f"be interrupted)")
        if not is_sync_handler(handler) or isinstance(handler, ServeMux):
            raise ValueError(f"{what}: isolate='thread' is for sync (plain def) handlers; an "
                             f"async handler runs on the event loop")
        return cast(Handler, threaded(cast(Callable[[Task], Any], handler), forced=True))
    soft: float | None = None
    if soft_timeout is not None:
        if isinstance(soft_timeout, timedelta):
            soft = soft_timeout.total_seconds()
        elif isinstance(soft_timeout, int | float) and not isinstance(soft_timeout, bool):
            soft = float(soft_timeout)
        if soft is None or not soft > 0:
            raise ValueError(f"{what}: soft_timeout must be a positive number of seconds "
                             f"before the hard limit, got {soft_timeout!r}")
        limit = timeout.total_seconds() if isinstance(timeout, timedelta) else timeout
        if isinstance(limit, int | float) and 0 < limit <= soft:
            raise ValueError(f"{what}: soft_timeout ({soft}s before the hard limit) must be "
                             f"less than timeout ({limit}s)")
    if isinstance(handler, ServeMux):
        raise ValueError(f"{what}: isolate='process' is for a handler function, not a mux")
    ref = getattr(handler, "__asyncq_ref__", None) or handler_ref(handler, what)
    return cast(Handler, isolated(cast(Callable[[Task], Any], handler), ref, soft))


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
        self._rules: dict[str, HandlerRules] = {}  # pattern -> its registered task options
        self._nested: dict[str, ServeMux] = {}  # pattern -> a mux registered as its handler
        #: The rate and concurrency limits handlers were registered with (see ``handle``).
        self.limits = HandlerLimits(self.match)

    def handle(self, pattern: str, handler: SyncOrAsyncHandler, *,
               limits: Sequence[Limit] | None = None, max_retry: int | None = None,
               timeout: float | timedelta | None = None,
               retention: float | timedelta | None = None,
               retry_delay: RetryDelay | None = None,
               retry_on: type[BaseException] | tuple[type[BaseException], ...] | None = None,
               isolate: str | None = None, soft_timeout: float | timedelta | None = None,
               expires_in: float | timedelta | None = None,
               ) -> None:
        """Register ``handler`` for ``pattern``; a blank or duplicate pattern, or a handler
        that is not callable, is an error. A sync handler (a plain ``def``) runs in a worker
        thread: it is registered wrapped in an async handler (so ``match`` returns that
        wrapper, whose ``__wrapped__`` is the function) and middlewares wrap it like any.

        ``limits``: ``asyncq.ConcurrencyLimit``/``RateLimit`` objects every worker enforces
        together before starting a task of this handler (a limit without ``name=`` is named
        after ``pattern``).

        Task options — the defaults of every task this handler runs, however it was
        enqueued; an option its producer set wins: ``max_retry``, ``timeout`` (0: none),
        ``retention`` (how long it is kept once completed), ``retry_delay`` (seconds, a
        timedelta, or ``(retried, error, task) -> seconds``; instead of the worker's) and
        ``retry_on`` (the exception types that are retried: any other error archives the
        task at once; ``Retry`` always retries) and ``expires_in`` (seconds or a timedelta: a
        task not started this long after it was enqueued is archived unrun as expired; the
        worker checks it as it starts the task, see ``_rules.expiry_of``).

        ``isolate="process"``: run it in the worker's pool of child processes (CPU-bound work;
        killed at its time limit; it must be a module-level function, imported by the child by
        name), ``soft_timeout`` seconds before the limit it gets ``SoftTimeLimitExceeded``;
        ``isolate="thread"``: a sync handler runs in a thread whatever ``sync_handlers``."""
        if not isinstance(pattern, str) or not pattern.strip():
            raise ValueError("handler pattern must be a non-blank string")
        checked = check_limits(limits, pattern)
        rules = handler_rules(max_retry=max_retry, timeout=timeout, retention=retention,
                              retry_delay=retry_delay, retry_on=retry_on, expires_in=expires_in,
                              what=f"handler {pattern!r}")
        wrapped = (check_isolation(handler, isolate, soft_timeout, timeout,
                                   f"handler {pattern!r}")
                   or check_handler(handler, f"the handler for {pattern!r}"))
        if pattern in self._exact:
            raise ValueError(f"a handler is already registered for {pattern!r}")
        if checked:
            wrapped = self.limits.register(checked, wrapped)
        if isinstance(handler, ServeMux):
            self.limits.nest(handler.limits)
            self._nested[pattern] = handler
        if rules is not None:
            self._rules[pattern] = rules
        self._exact[pattern] = wrapped
        self._prefixes.append((pattern, wrapped))
        self._prefixes.sort(key=lambda item: -len(item[0]))
        self._chains.clear()

    def handler(self, pattern: str, *, limits: Sequence[Limit] | None = None,
                max_retry: int | None = None, timeout: float | timedelta | None = None,
                retention: float | timedelta | None = None,
                retry_delay: RetryDelay | None = None,
                retry_on: type[BaseException] | tuple[type[BaseException], ...] | None = None,
                isolate: str | None = None, soft_timeout: float | timedelta | None = None,
                expires_in: float | timedelta | None = None,
                ) -> Callable[[H], H]:
        """Decorator form of ``handle`` (the same options): ``@mux.handler("email:deliver",
        max_retry=3)``; the function is returned as it is (a sync one stays callable)."""
        options: dict[str, Any] = dict(
            limits=limits, max_retry=max_retry, timeout=timeout, retention=retention,
            retry_delay=retry_delay, retry_on=retry_on, expires_in=expires_in)
        handler_rules(**{k: v for k, v in options.items() if k != "limits"},
                      what=f"handler {pattern!r}")  # (a bad option fails here, not later)
        if isolate is not None or soft_timeout is not None:
            options.update(isolate=isolate, soft_timeout=soft_timeout)

        def register(fn: H) -> H:
            self.handle(pattern, fn, **options)
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

    def _pattern(self, task_type: str) -> str | None:
        if task_type in self._exact:
            return task_type
        for pattern, _ in self._prefixes:
            if task_type.startswith(pattern):
                return pattern
        return None

    def rules_for(self, task_type: str) -> HandlerRules | None:
        """The task options the handler of ``task_type`` was registered with (through a
        nested mux: its registration, completed by the enclosing one), or None."""
        pattern = self._pattern(task_type)
        if pattern is None:
            return None
        own = self._rules.get(pattern)
        inner = self._nested.get(pattern)
        inner_rules = None if inner is None else inner.rules_for(task_type)
        return own if inner_rules is None else inner_rules.over(own)

    def published_rules(self) -> dict[str, dict[str, Any]]:
        """``{pattern: options}`` for every pattern (``{}``: none set) when some registration
        has task options a process without handlers (the Inspector) can apply, else ``{}``:
        what a worker publishes in its state. Every pattern is listed so a type matched
        exactly is never given the options of a shorter prefix."""
        out: dict[str, dict[str, Any]] = {}
        for pattern in self._exact:
            inner = self._nested.get(pattern)
            for inner_pattern in () if inner is None else inner.published_rules():
                if inner_pattern.startswith(pattern):
                    rules = self.rules_for(inner_pattern)
                    out[inner_pattern] = {} if rules is None else rules.published()
            own = self._rules.get(pattern)
            out[pattern] = {} if own is None else own.published()
        return out if any(out.values()) else {}

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
        """Decorator registering a function as the typed task ``name``; returns its
        TaskDefinition: ``await fn.enqueue(client, *args)``, ``await fn.result(client, info)``.

        ``limits``, ``max_retry``, ``timeout``, ``retention``, ``retry_delay``, ``retry_on``
        and ``expires_in`` are the handler's, as for ``handle``: they apply however the task is
        enqueued; so are ``isolate`` and ``soft_timeout``. The other options (queue,
        process_in, unique, headers...) are what ``fn.enqueue`` uses unless
        ``fn.options(...)`` says otherwise."""
        limits = check_limits(options.pop("limits", None), name)
        handler_options = {k: options.pop(k) for k in HANDLER_OPTIONS if k in options}
        rules = handler_rules(**handler_options, what=f"task {name!r}")  # (fails here)
        isolation = {k: options.pop(k) for k in ISOLATE_OPTIONS if k in options}

        def register(definition: TaskDefinition[Any, Any]) -> None:
            handler = definition.handler()
            try:  # a child imports the function (isolate or sync_handlers "process") and runs
                # it as this typed task, decorated or not in its module (the call form)
                handler.__asyncq_ref__ = typed_ref(  # type: ignore[attr-defined]
                    definition.fn, f"task {name!r}")
            except (TypeError, ValueError):
                if isolation.get("isolate") == "process":
                    raise
            self.handle(definition.name, handler, limits=limits, **handler_options,
                        **isolation)

        return TaskDecorator(name, options, register, rules)


async def _not_found(task: Task) -> Any:
    raise HandlerNotFoundError(f"no handler registered for task type {task.type!r}")


class RulesCache:
    """A worker's lookup of the task options registered for each task type (see
    ``ServeMux.rules_for``), each type looked up once; nothing for a plain handler."""

    def __init__(self, handler: object) -> None:
        self._mux = handler if isinstance(handler, ServeMux) else None
        self._cache: dict[str, HandlerRules | None] = {}

    def __call__(self, task_type: str) -> HandlerRules | None:
        if self._mux is None:
            return None
        try:
            return self._cache[task_type]
        except KeyError:
            found = self._mux.rules_for(task_type)
            if len(self._cache) < 10_000:
                self._cache[task_type] = found
            return found

    def published(self) -> dict[str, dict[str, Any]]:
        """What the worker's state tells the Inspector (``ServeMux.published_rules``)."""
        return {} if self._mux is None else self._mux.published_rules()
