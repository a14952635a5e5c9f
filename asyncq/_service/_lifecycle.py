"""Running a service (Worker, Scheduler) in the background of the current event loop.

``async with worker:`` and ``async with scheduler:`` share these two steps: start ``run()`` as a
task and return once it reports ready (re-raising why it ended if it ends first, and leaving
nothing behind if the caller is cancelled meanwhile), then on exit ask it to stop and wait.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Coroutine
from typing import Any

import anyio


async def start_background(run: Coroutine[Any, Any, None], ready: asyncio.Event,
                           stop: Callable[[], None]) -> asyncio.Task[None]:
    """Run ``run`` as a task and return it once ``ready`` is set.

    If ``run`` ends before it is ready, its exception is raised (or RuntimeError if it returned).
    If the caller is cancelled while waiting (e.g. Redis unreachable under a timeout), ``stop``
    is called and the task awaited before the cancellation propagates.
    """
    runner = asyncio.create_task(run)
    waiter = asyncio.create_task(ready.wait())
    try:
        await asyncio.wait({runner, waiter}, return_when=asyncio.FIRST_COMPLETED)
    except BaseException:
        waiter.cancel()
        stop()
        with anyio.CancelScope(shield=True):
            await asyncio.wait({runner})
        raise
    if not waiter.done():
        waiter.cancel()
        await runner  # re-raises why it could not start
        raise RuntimeError("the service stopped before it was ready")
    return runner


async def stop_background(runner: asyncio.Task[None] | None, stop: Callable[[], None]) -> None:
    """Ask the service to stop and wait until ``run`` has returned (re-raising its error)."""
    stop()
    if runner is not None:
        await runner
