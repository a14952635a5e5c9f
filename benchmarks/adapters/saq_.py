"""saq: ``Queue.enqueue`` (no bulk enqueue: ``map``/``batch`` wait for results),
``saq.Worker(concurrency=100)``."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import Any

from saq import Queue, Worker

from benchmarks import _probe
from benchmarks.adapters import SLEEP_S, run_loop


async def noop(ctx: Any, *, i: int) -> None:
    _probe.done(i)


async def sleep(ctx: Any, *, i: int) -> None:
    _probe.begin()
    await asyncio.sleep(SLEEP_S)
    _probe.done(i)


async def lat(ctx: Any, *, i: int) -> int:
    _probe.started(i)
    _probe.done(i)
    return i


class Adapter:
    NAME = "saq"
    HAS_BULK = False
    BULK_API = None
    NOTES = ("concurrency=100, other defaults: one BLMOVE dequeue per free slot; "
             "results kept 600 s; JSON")

    HAS_APPLY = True
    APPLY_API = "Queue.apply (pub/sub on job updates)"

    def __init__(self) -> None:
        self.queue: Any = None

    async def apply(self, kind: str, i: int) -> Any:
        return await self.queue.apply(kind, timeout=30, i=i)

    async def open(self, url: str) -> None:
        self.queue = Queue.from_url(url)
        await self.queue.connect()

    async def close(self) -> None:
        if self.queue is not None:
            await self.queue.disconnect()

    async def enqueue(self, kind: str, i: int) -> None:
        job = await self.queue.enqueue(kind, i=i)
        if job is None:
            raise RuntimeError(f"saq refused job {kind}({i})")

    async def enqueue_bulk(self, kind: str, indices: Sequence[int]) -> None:
        raise NotImplementedError

    async def stored(self, redis: Any) -> int:
        return int(await self.queue.count("queued"))

    @staticmethod
    def run_worker(url: str, concurrency: int, loop: str) -> None:
        async def main() -> None:
            queue = Queue.from_url(url)
            worker = Worker(queue, functions=[noop, sleep, lat], concurrency=concurrency)
            await queue.connect()
            try:
                await worker.start()
            finally:
                await queue.disconnect()

        run_loop(main(), loop)
