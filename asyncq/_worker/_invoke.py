"""Calling user code from the worker: a handler run (traced when tracing is on) or a hook,
so that whatever it raises — even ``SystemExit`` — is that task's failure, never the worker's."""

from __future__ import annotations

import asyncio
import contextvars
import inspect
from collections.abc import Awaitable, Callable
from typing import Any

from structlog.contextvars import bind_contextvars

from .. import _tracing
from .._model._message import TaskMessage
from .._model._task import Task
from ._running import Running
from ._threads import SyncThreads, use_threads


def _task_context_vars() -> tuple[contextvars.ContextVar[Any], ...]:
    """structlog's own context variables for task_id, queue, type and retried (registered
    through ``bind_contextvars`` in a throw-away context), so that binding them per run costs
    four ``ContextVar.set`` calls; ``clear_contextvars``/``unbind_contextvars`` see them."""
    tokens = contextvars.Context().run(bind_contextvars, task_id=None, queue=None, type=None,
                                       retried=None)
    return tuple(token.var for token in tokens.values())


_TASK_ID, _QUEUE, _TYPE, _RETRIED = _task_context_vars()


class HandlerExit(Exception):
    """Carries a ``BaseException`` a handler raised (``SystemExit``, ``KeyboardInterrupt``) out
    of its asyncio task: raised as itself it would stop the event loop and the worker. Whoever
    reads it unwraps ``original``: that is the run's (or the hook's) error."""

    def __init__(self, original: BaseException) -> None:
        super().__init__(original)
        self.original = original


async def contained(awaitable: Awaitable[Any]) -> Any:
    """Await user code so that a ``SystemExit``/``KeyboardInterrupt`` it raises comes out as
    ``HandlerExit``; only a cancellation passes through as itself."""
    try:
        return await awaitable
    except (Exception, asyncio.CancelledError):
        raise
    except BaseException as exc:
        raise HandlerExit(exc) from exc


async def invoke(handler: Callable[[Task], Any], threads: SyncThreads, task: Task,
                 msg: TaskMessage, run: Running) -> Any:
    """Run the handler for ``task`` (inside a CONSUMER span when tracing is on, its ids kept
    on ``run`` for the worker's log lines): what calling it raises (it takes no argument, the
    target is not a handler...) is this task's failure.

    Runs in the handler's own asyncio task, so what it sets in the context is the handler's
    alone: the pool sync handlers run in, and the task's log context — every line logged
    during the run (structlog or stdlib ``logging``, in a sync handler's thread too: the
    thread runs in a copy of this context) carries task_id, queue, type and retried."""
    use_threads(threads)  # in this handler's own context: where sync handlers run
    _TASK_ID.set(msg.id)  # (bind_contextvars, as four plain sets: see _task_context_vars)
    _QUEUE.set(msg.queue)
    _TYPE.set(msg.type)
    _RETRIED.set(task.retried)
    tracer = _tracing.active
    try:
        if tracer is None:
            return await _call(handler, task)
        with tracer.consuming(msg, task):
            run.trace = tracer.log_context()
            bind_contextvars(**run.trace)  # (for an application's own structlog set-up)
            return await _call(handler, task)
    except (Exception, asyncio.CancelledError):
        raise
    except BaseException as exc:  # SystemExit, KeyboardInterrupt, GeneratorExit...
        raise HandlerExit(exc) from exc


async def _call(handler: Callable[[Task], Any], task: Task) -> Any:
    result = handler(task)
    if inspect.isawaitable(result):
        result = await result
    return result
