"""Owned background tasks: work a synchronous callback starts (a hand-off's limit claim, an
async ``error_handler``) runs in a ``TaskSet`` whose owner awaits it at shutdown.

The worker's long-lived components run in its anyio task group (``Worker._serve``). A handler
run is an asyncio task owned by the processor (``Running.atask``: it can be cancelled, and
abandoned when it ignores that). Everything else a callback starts goes into a ``TaskSet``, so
nothing is left running, unseen, after the worker stopped.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Coroutine
from typing import Any


class TaskSet:
    """Tasks started with ``spawn``, kept until done; ``close`` waits for them, then cancels
    and awaits the rest. ``on_error`` gets what a task raised (cancellations excepted)."""

    def __init__(self, on_error: Callable[[BaseException], None]) -> None:
        self._tasks: set[asyncio.Task[Any]] = set()
        self._on_error = on_error

    def __len__(self) -> int:
        return len(self._tasks)

    def spawn(self, coro: Coroutine[Any, Any, Any]) -> None:
        """Run ``coro`` in its own task, owned by this set."""
        task = asyncio.get_running_loop().create_task(coro)
        self._tasks.add(task)
        task.add_done_callback(self._done)

    def _done(self, task: asyncio.Task[Any]) -> None:
        self._tasks.discard(task)
        if not task.cancelled():
            exc = task.exception()
            if exc is not None:
                self._on_error(exc)

    async def close(self, timeout: float) -> int:
        """Give the running tasks up to ``timeout`` seconds, then cancel the rest and wait (as
        long again at most: a task may ignore cancellation) for them to end; returns how many
        were cancelled."""
        if not self._tasks:
            return 0
        _, left = await asyncio.wait(set(self._tasks), timeout=timeout)
        for task in left:
            task.cancel()
        if left:
            await asyncio.wait(left, timeout=timeout)
        return len(left)
