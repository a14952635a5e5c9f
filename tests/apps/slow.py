"""A ServeMux for worker-process tests: ``asyncq worker tests.apps.slow:mux``."""

from __future__ import annotations

import asyncio

from asyncq import ServeMux, Task

mux = ServeMux()


@mux.handler("slow:block")
async def block(task: Task) -> None:
    """Runs until cancelled: the task stays active while the process lives. Its result field
    says "started" once the handler runs (a task is active from its lease on, before that)."""
    await task.write_result("started")
    await asyncio.Event().wait()


@mux.handler("slow:echo")
async def echo(task: Task) -> object:
    return task.json()
