"""Celery 5 with its Redis broker: ``task.delay(i)``, worker run as
``celery worker --pool threads --concurrency 100`` runs it.

Celery's producer API is synchronous. A single enqueue is the blocking ``delay()`` call a web
handler makes; the concurrent scenario runs ``delay()`` on a 100-thread pool
(``loop.run_in_executor``), what an async application calling Celery does. The worker has no
event loop, so ``--loop`` does not apply to it. Handlers are plain functions run by the thread
pool; the probe's counters are guarded by a lock because 100 threads update them.
"""

from __future__ import annotations

import asyncio
import os
import threading
import time
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from celery import Celery

from benchmarks import _probe
from benchmarks.adapters import SLEEP_S

QUEUE = "celery"  # the default queue: a Redis list of that name
PRODUCER_THREADS = 100

app = Celery("bench", broker=os.environ.get("BENCH_REDIS_URL", "redis://127.0.0.1:6379/0"))
app.conf.update(task_ignore_result=True, worker_hijack_root_logger=False,
                broker_connection_retry_on_startup=True)
_lock = threading.Lock()


@app.task(name="noop")
def noop(i: int) -> None:
    with _lock:
        _probe.done(i)


@app.task(name="sleep")
def sleep(i: int) -> None:
    with _lock:
        _probe.begin()
    time.sleep(SLEEP_S)
    with _lock:
        _probe.done(i)


@app.task(name="lat")
def lat(i: int) -> None:
    with _lock:
        _probe.started(i)
        _probe.done(i)


_TASKS = {"noop": noop, "sleep": sleep, "lat": lat}


class Adapter:
    NAME = "celery"
    HAS_BULK = False
    BULK_API = None
    NOTES = ("Celery 5, Redis broker, worker --pool threads --concurrency 100, other settings "
             "at their defaults (prefetch multiplier 4, early ack, broker pool limit 10), no "
             "result backend; JSON. Sync API: a single enqueue is a blocking delay(); "
             "concurrent producers run delay() on a 100-thread pool; the worker has no event "
             "loop (--loop does not apply)")
    CONCURRENT_API = "delay() on a ThreadPoolExecutor(100) via run_in_executor"

    def __init__(self) -> None:
        self.pool: ThreadPoolExecutor | None = None

    async def open(self, url: str) -> None:
        app.conf.broker_url = url
        self.pool = ThreadPoolExecutor(PRODUCER_THREADS, thread_name_prefix="delay")

    async def close(self) -> None:
        if self.pool is not None:
            self.pool.shutdown(wait=True)
            self.pool = None

    async def enqueue(self, kind: str, i: int) -> None:
        _TASKS[kind].delay(i)

    async def enqueue_concurrently(self, kind: str, i: int) -> None:
        """One of many overlapping enqueues: Celery users hand delay() to threads."""
        assert self.pool is not None
        await asyncio.get_running_loop().run_in_executor(self.pool, _TASKS[kind].delay, i)

    async def enqueue_bulk(self, kind: str, indices: Sequence[int]) -> None:
        raise NotImplementedError

    async def stored(self, redis: Any) -> int:
        return int(await redis.llen(QUEUE))

    @staticmethod
    def run_worker(url: str, concurrency: int, loop: str) -> None:
        app.conf.broker_url = url
        app.worker_main(["worker", "--pool", "threads", "--concurrency", str(concurrency),
                         "--loglevel", "WARNING"])
