"""A ServeMux for health tests: a handler that blocks its worker's event loop, as a
``time.sleep`` inside ``async def`` does, and one that waits without blocking it."""

from __future__ import annotations

import asyncio
import time

from asyncq import ServeMux, Task

mux = ServeMux()


@mux.handler("blocking:sleep")
async def sleep(task: Task) -> None:
    """Blocks the event loop for ``payload["s"]`` seconds (the mistake being tested)."""
    time.sleep(float(task.json().get("s", 0)))  # noqa: ASYNC251 (on purpose)


@mux.handler("blocking:nap")
async def nap(task: Task) -> None:
    """Awaits ``payload["s"]`` seconds (the right way to wait): a run to count."""
    await asyncio.sleep(float(task.json().get("s", 0)))
