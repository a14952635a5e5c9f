"""asyncq: ``Client.enqueue`` / ``Client.enqueue_many``, ``ServeMux`` + ``Worker``."""

from __future__ import annotations

import asyncio
import importlib
import logging
import os
from collections.abc import Sequence
from typing import Any

import redis.asyncio as aioredis
import structlog

import asyncq
from benchmarks import _probe
from benchmarks.adapters import SLEEP_S, run_loop


def _pending_key() -> str:
    """The default queue's pending list: from asyncq's key module where this version has one
    (``_broker._keys`` today, ``_keys`` in older versions), else the documented layout."""
    for module in ("asyncq._broker._keys", "asyncq._keys"):
        try:
            return str(importlib.import_module(module).queue_keys("default").pending)
        except Exception:  # internal modules: try the next place
            continue
    return "asyncq:{default}:pending"


_PENDING = _pending_key()
CALL_KEY = "bench:calls"  # what the "call" handler increments with its own Redis client


class Adapter:
    NAME = "asyncq"
    HAS_BULK = True
    BULK_API = "Client.enqueue_many"
    NOTES = ("defaults except concurrency=100; completed tasks are not retained "
             "(asyncq's default retention is 0)")

    HAS_TYPED = True  # "typed": the no-op handler as @mux.task(...) async def typed(i: int)
    HAS_CALL = True  # "call": the handler makes one Redis call (INCR) with its own client

    HAS_APPLY = True
    APPLY_API = "Client.apply (push: the completion event carries the result)"

    def __init__(self) -> None:
        self.client: asyncq.Client | None = None
        self._listener: asyncio.Task[None] | None = None
        self._listen_client: asyncq.Client | None = None
        self.heard = 0

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

    async def apply(self, kind: str, i: int) -> Any:
        assert self.client is not None
        return await self.client.apply(kind, {"i": i}, timeout=30)

    async def start_listening(self, url: str) -> None:
        """One process listening to every event of the queue (what a dashboard does)."""
        client = self._listen_client = asyncq.Client(url)
        ready = asyncio.Event()

        async def listen() -> None:
            async with client.events("default") as events:
                ready.set()
                async for _ in events:
                    self.heard += 1

        self._listener = asyncio.get_running_loop().create_task(listen())
        await ready.wait()

    async def stop_listening(self) -> None:
        if self._listener is not None:
            self._listener.cancel()
        if self._listen_client is not None:
            await self._listen_client.close()

    async def stored(self, redis: Any) -> int:
        return int(await redis.llen(_PENDING))

    @staticmethod
    def run_worker(url: str, concurrency: int, loop: str) -> None:
        structlog.configure(wrapper_class=structlog.make_filtering_bound_logger(logging.WARNING))
        mux = asyncq.ServeMux()

        @mux.handler("noop")
        async def noop(task: asyncq.Task) -> None:
            _probe.done(task.json()["i"])

        typed_task = getattr(mux, "task", None)
        if typed_task is not None:  # (older versions have no typed tasks)
            @typed_task("typed")
            async def typed(i: int) -> None:
                _probe.done(i)

        own = aioredis.Redis.from_url(url)  # the handlers' own client (connects on first use)

        @mux.handler("call")
        async def call(task: asyncq.Task) -> None:
            i = task.json()["i"]
            await own.incr(CALL_KEY)
            _probe.done(i)

        @mux.handler("sleep")
        async def sleep(task: asyncq.Task) -> None:
            _probe.begin()
            await asyncio.sleep(SLEEP_S)
            _probe.done(task.json()["i"])

        @mux.handler("lat")
        async def lat(task: asyncq.Task) -> int:
            i = task.json()["i"]
            _probe.started(i)
            _probe.done(i)
            return int(i)

        # ASYNCQ_BENCH_WORKER=metrics|otel measures what worker metrics / tracing cost per
        # task (compare with the same scenario without it).
        extra: dict[str, Any] = {}
        feature = os.environ.get("ASYNCQ_BENCH_WORKER", "")
        if feature == "metrics":
            from asyncq.metrics import WorkerMetrics
            extra["metrics"] = WorkerMetrics()
        elif feature == "otel":
            from opentelemetry.sdk.trace import TracerProvider
            from opentelemetry.sdk.trace.export import BatchSpanProcessor
            from opentelemetry.sdk.trace.export.in_memory_span_exporter import (
                InMemorySpanExporter,
            )

            from asyncq.otel import instrument
            provider = TracerProvider()
            provider.add_span_processor(BatchSpanProcessor(InMemorySpanExporter()))
            instrument(provider)

        async def main() -> None:
            worker = asyncq.Worker(url, mux, concurrency=concurrency, queues={"default": 1},
                                   **extra)
            await worker.run()

        run_loop(main(), loop)
