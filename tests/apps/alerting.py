"""A ServeMux for the Prometheus alerting test: ``asyncq worker tests.apps.alerting:mux``."""

from __future__ import annotations

import asyncio
import time

from asyncq import ServeMux, Task

mux = ServeMux()


@mux.handler("alert:ok")
async def ok(task: Task) -> None:
    """Succeeds at once."""


@mux.handler("alert:fail")
async def fail(task: Task) -> None:
    """Fails every run: with max_retry=0 the task is archived."""
    raise RuntimeError("failing on purpose")


@mux.handler("alert:block")
async def block(task: Task) -> None:
    """Runs until its worker dies: the task stays active with a lease nobody renews."""
    await asyncio.Event().wait()


@mux.handler("alert:stall")
async def stall(task: Task) -> None:
    """Blocks its worker's event loop for 15 s (a blocking call inside async def)."""
    time.sleep(15)  # noqa: ASYNC251 (blocking the loop is the point)
