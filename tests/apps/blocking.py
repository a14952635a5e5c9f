"""A ServeMux for health tests: a handler that blocks its worker's event loop, as a
``time.sleep`` inside ``async def`` does, and one that does nothing."""

from __future__ import annotations

import time

from asyncq import ServeMux, Task

mux = ServeMux()


@mux.handler("blocking:sleep")
async def sleep(task: Task) -> None:
    """Blocks the event loop for ``payload["s"]`` seconds (the mistake being tested)."""
    time.sleep(float(task.json().get("s", 0)))  # noqa: ASYNC251 (on purpose)


@mux.handler("blocking:noop")
async def noop(task: Task) -> None:
    """Does nothing: a run to count."""
