"""asyncq: ``Client.enqueue`` / ``Client.enqueue_many``, ``ServeMux`` + ``Worker``."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Sequence
from typing import Any

import structlog

import asyncq
from benchmarks import _probe
from benchmarks.adapters import SLEEP_S, run_loop

try:
    from asyncq._keys import queue_keys

    _PENDING = queue_keys("default").pending
except Exception:  # internal module: fall back to the documented key layout
    _PENDING = "asyncq:{default}:pending"


class Adapter:
    NAME = "asyncq"
    HAS_BULK = True
    BULK_API = "Client.enqueue_many"
    NOTES = ("defaults except concurrency=100; completed tasks are not retained "
             "(asyncq's default retention is 0)")

    def __init__(self) -> None:
        self.client: asyncq.Client | None = None

    async def open(self, url: str) -> None:
        self.client = asyncq.Client(url)

    async def close(self) -> None:
        if self.client is not None:
            await self.client.close()

    async def enqueue(self, kind: str, i: int) -> None:
        assert self.client is not None
        await self.client.enqueue(kind, {"i": i})

    async def enqueue_bulk(self, kind: str, indices: Sequence[int]) -> None:
        assert self.client is not None
        results = await self.client.enqueue_many([asyncq.Task(kind, {"i": i}) for i in indices])
        errors = [r for r in results if isinstance(r, Exception)]
        if errors:
            raise RuntimeError(f"{len(errors)} enqueue_many errors, first: {errors[0]!r}")

    async def stored(self, redis: Any) -> int:
        return int(await redis.llen(_PENDING))

    @staticmethod
    def run_worker(url: str, concurrency: int, loop: str) -> None:
        structlog.configure(wrapper_class=structlog.make_filtering_bound_logger(logging.WARNING))
        mux = asyncq.ServeMux()

        @mux.handler("noop")
        async def noop(task: asyncq.Task) -> None:
            _probe.done(task.json()["i"])

        @mux.handler("sleep")
        async def sleep(task: asyncq.Task) -> None:
            _probe.begin()
            await asyncio.sleep(SLEEP_S)
            _probe.done(task.json()["i"])

        @mux.handler("lat")
        async def lat(task: asyncq.Task) -> None:
            i = task.json()["i"]
            _probe.started(i)
            _probe.done(i)

        async def main() -> None:
            worker = asyncq.Worker(url, mux, concurrency=concurrency, queues={"default": 1})
            await worker.run()

        run_loop(main(), loop)
