"""Owned background tasks: work a synchronous callback starts (a worker's hand-off limit claim
or async ``error_handler``, a client's batched reads) runs in a ``TaskSet`` whose owner closes
it, so nothing is left running, unseen, after its owner stopped.

Long-lived components run in anyio task groups instead (``Worker._serve``); a callback cannot
start work in a task group, hence this set.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Coroutine
from typing import Any

#: Longest ``close`` waits for cancelled tasks to end.
CANCEL_WAIT = 1.0


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
        """Give the running tasks up to ``timeout`` seconds (0: none), then cancel the rest and
        wait for them to end (``CANCEL_WAIT`` s at most: a task may ignore cancellation);
        returns how many were cancelled."""
        if not self._tasks:
            return 0
        left = set(self._tasks)
        if timeout > 0:
            _, left = await asyncio.wait(left, timeout=timeout)
        for task in left:
            task.cancel()
        if left:
            await asyncio.wait(left, timeout=CANCEL_WAIT)
        return len(left)
