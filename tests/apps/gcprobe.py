"""A ServeMux whose task reports what the garbage collector holds frozen in its process."""

from __future__ import annotations

import asyncio
import gc

from asyncq import ServeMux, Task

mux = ServeMux()


@mux.handler("gc:frozen")
async def frozen(task: Task) -> int:
    """The number of objects frozen out of the collector's reach, once there are any (the
    worker command freezes just after it is ready); 0 if none after ``payload["s"]`` s."""
    for _ in range(int(float(task.json().get("s", 10)) * 100)):
        if gc.get_freeze_count():
            break
        await asyncio.sleep(0.01)  # (no event tells of a freeze: look again)
    return gc.get_freeze_count()
