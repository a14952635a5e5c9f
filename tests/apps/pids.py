"""A ServeMux for supervisor tests: each task says which worker process ran it."""

from __future__ import annotations

import asyncio
import os

from asyncq import ServeMux, Task

mux = ServeMux()


@mux.handler("pids:nap")
async def nap(task: Task) -> dict[str, int]:
    """Sleeps ``payload["s"]`` seconds, then returns the pid of the process that ran it."""
    await asyncio.sleep(float(task.json().get("s", 0)))
    return {"pid": os.getpid()}
