"""Hostile handlers for worker-process tests: ``asyncq worker tests.apps.hostile:mux`` (handlers
that raise ``SystemExit``/``KeyboardInterrupt``), ``tests.apps.hostile:no_args`` (a target that
cannot be called with a task) and ``tests.apps.hostile:asgi_worker`` (a Worker whose handler is
not a handler at all)."""

from __future__ import annotations

import asyncio
import os
from typing import Any

from asyncq import ServeMux, Task, Worker

mux = ServeMux()


@mux.handler("hostile:exit")
async def exit_process(task: Task) -> None:
    raise SystemExit(3)


@mux.handler("hostile:interrupt")
async def interrupt(task: Task) -> None:
    raise KeyboardInterrupt


@mux.handler("hostile:ok")
async def ok(task: Task) -> str:
    return "ok"


@mux.handler("hostile:block")
async def block(task: Task) -> None:
    """Runs until cancelled: the task stays active while the process lives."""
    await asyncio.Event().wait()


async def no_args() -> None:
    """A worker target that takes no argument."""


class AsgiApp:
    """Something that is callable but not a handler (an ASGI application)."""

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        raise AssertionError("never called with a task")


asgi_app = AsgiApp()


def asgi_worker() -> Worker:
    """A Worker whose handler is the ASGI app: the command refuses the app as TARGET, but a
    Worker built in Python runs any callable, and each call of it fails."""
    return Worker(os.environ["ASYNCQ_REDIS_URL"], asgi_app)
