"""Handlers that log, for the log tests: ``asyncq worker tests.logging.logapp:mux``. Each
logs through structlog and through stdlib ``logging`` (its own logger and a library's)."""

from __future__ import annotations

import asyncio
import logging
import warnings

import structlog

from asyncq import ServeMux, Task

mux = ServeMux()
stdlib_log = logging.getLogger("logapp")
library_log = logging.getLogger("somelibrary.client")  # what a third-party library logs to


def _log_all(where: str) -> None:
    structlog.get_logger().info("handler structlog line", where=where)
    stdlib_log.warning("handler stdlib line from %s", where)
    library_log.info("library line")


@mux.handler("log:async")
async def async_handler(task: Task) -> None:
    _log_all("async")


@mux.handler("log:sync")
def sync_handler(task: Task) -> None:  # runs in a worker thread
    _log_all("sync")
    warnings.warn("a deprecated call", UserWarning, stacklevel=1)


@mux.handler("log:fail", retry_delay=lambda retried, exc, task: 0.05)
async def failing(task: Task) -> None:
    raise ValueError("boom")


@mux.handler("log:block")
async def block(task: Task) -> None:
    await task.write_result("started")
    await asyncio.Event().wait()


@mux.task("log:add")
async def add(x: int, y: int) -> int:
    return x + y
