"""streaq: awaited ``task.enqueue()``, pipelined ``Worker.enqueue_many``,
``streaq.Worker(concurrency=100)``."""

from __future__ import annotations

import asyncio
import os
from collections.abc import Sequence
from contextlib import AsyncExitStack
from typing import Any

from streaq import Worker

from benchmarks import _probe
from benchmarks.adapters import SLEEP_S, run_loop

# streaq binds tasks to a Worker object at import time; producer and worker processes both
# build it from the URL the driver passes in the environment.
worker = Worker(redis_url=os.environ.get("BENCH_REDIS_URL", "redis://127.0.0.1:6379"),
                concurrency=int(os.environ.get("BENCH_CONCURRENCY", "100")))


@worker.task
async def noop(i: int) -> None:
    _probe.done(i)


@worker.task
async def sleep(i: int) -> None:
    _probe.begin()
    await asyncio.sleep(SLEEP_S)
    _probe.done(i)


@worker.task
async def lat(i: int) -> int:
    _probe.started(i)
    _probe.done(i)
    return i


_TASKS = {"noop": noop, "sleep": sleep, "lat": lat}


class Adapter:
    NAME = "streaq"
    HAS_BULK = True
    BULK_API = "Worker.enqueue_many"
    NOTES = ("concurrency=100 (prefetch defaults to concurrency), other defaults: "
             "results kept 5 min; pickle")

    HAS_APPLY = True
    APPLY_API = "await task.result()"

    def __init__(self) -> None:
        self._stack = AsyncExitStack()

    async def apply(self, kind: str, i: int) -> Any:
        task = await _TASKS[kind].enqueue(i)
        res = await task.result(timeout=30)
        if not res.success:
            raise RuntimeError(f"streaq task failed: {res.result!r}")
        return res.result

    async def open(self, url: str) -> None:
        # Producers use the Worker object as an async context manager to get a connection.
        await self._stack.enter_async_context(worker)

    async def close(self) -> None:
        await self._stack.aclose()

    async def enqueue(self, kind: str, i: int) -> None:
        await _TASKS[kind].enqueue(i)

    async def enqueue_bulk(self, kind: str, indices: Sequence[int]) -> None:
        task = _TASKS[kind]
        await worker.enqueue_many([task.enqueue(i) for i in indices])

    async def stored(self, redis: Any) -> int:
        return int(await worker.queue_size())

    @staticmethod
    def run_worker(url: str, concurrency: int, loop: str) -> None:
        run_loop(worker.run_async(), loop)
