"""What enqueueing from synchronous code costs: ``SyncClient`` beside the async ``Client``.

    .venv/bin/python -m benchmarks.sync_client [--tasks 2000] [--per-thread 300] [--rounds 3]
                                               [--no-save]

Against a fresh local ``redis-server`` (persistence off), in one process:

* **latency**: ``--tasks`` enqueues one after another, each timed: ``SyncClient.enqueue``
  from the main thread, ``await Client.enqueue`` in ``asyncio.run``, and (for scale) what sync
  code does without a SyncClient, ``asyncio.run`` around a fresh ``Client`` per enqueue
  (``--tasks`` / 10 of those). p50 and p99 in milliseconds.
* **throughput**: 16 threads sharing one SyncClient, ``--per-thread`` enqueues each; beside
  16 asyncio tasks sharing one Client on one loop. Tasks per second, wall time.

Medians over ``--rounds`` rounds (variants alternating). Prints a table and saves
``benchmarks/results/sync_client-<UTC time>.json``. Not a test.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import platform
import statistics
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import asyncq
from benchmarks._redis import RedisServer, command
from benchmarks._results import save_result

THREADS = 16
QUEUE = "bench-sync"


def _percentiles(samples: list[float]) -> dict[str, float]:
    ordered = sorted(samples)
    return {"p50_ms": ordered[len(ordered) // 2] * 1000,
            "p99_ms": ordered[min(len(ordered) - 1, int(len(ordered) * 0.99))] * 1000}


def sync_latency(client: asyncq.SyncClient, n: int) -> dict[str, float]:
    samples = []
    for _ in range(n):
        began = time.perf_counter()
        client.enqueue("bench:noop", queue=QUEUE)
        samples.append(time.perf_counter() - began)
    return _percentiles(samples)


def async_latency(url: str, n: int) -> dict[str, float]:
    async def run() -> list[float]:
        samples = []
        async with asyncq.Client(url) as client:
            await client.enqueue("bench:noop", queue=QUEUE)  # connect outside the timing
            for _ in range(n):
                began = time.perf_counter()
                await client.enqueue("bench:noop", queue=QUEUE)
                samples.append(time.perf_counter() - began)
        return samples

    return _percentiles(asyncio.run(run()))


def run_per_call_latency(url: str, n: int) -> dict[str, float]:
    async def once() -> None:
        async with asyncq.Client(url) as client:
            await client.enqueue("bench:noop", queue=QUEUE)

    samples = []
    for _ in range(n):
        began = time.perf_counter()
        asyncio.run(once())
        samples.append(time.perf_counter() - began)
    return _percentiles(samples)


def sync_throughput(client: asyncq.SyncClient, per_thread: int) -> dict[str, float]:
    start = threading.Barrier(THREADS + 1)

    def work() -> None:
        start.wait()
        for _ in range(per_thread):
            client.enqueue("bench:noop", queue=QUEUE)

    with ThreadPoolExecutor(THREADS) as pool:
        futures = [pool.submit(work) for _ in range(THREADS)]
        start.wait()
        began = time.perf_counter()
        for f in futures:
            f.result()
        elapsed = time.perf_counter() - began
    return {"tasks_per_s": THREADS * per_thread / elapsed, "seconds": elapsed}


def async_throughput(url: str, per_task: int) -> dict[str, float]:
    async def run() -> float:
        async with asyncq.Client(url) as client:
            await client.enqueue("bench:noop", queue=QUEUE)

            async def work() -> None:
                for _ in range(per_task):
                    await client.enqueue("bench:noop", queue=QUEUE)

            began = time.perf_counter()
            await asyncio.gather(*(work() for _ in range(THREADS)))
            return time.perf_counter() - began

    elapsed = asyncio.run(run())
    return {"tasks_per_s": THREADS * per_task / elapsed, "seconds": elapsed}


def _median(rounds: list[dict[str, float]]) -> dict[str, float]:
    return {k: statistics.median(r[k] for r in rounds) for k in rounds[0]}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tasks", type=int, default=2000)
    parser.add_argument("--per-thread", type=int, default=300)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--no-save", action="store_true")
    args = parser.parse_args()

    measured: dict[str, list[dict[str, float]]] = {}

    def record(name: str, fn: Callable[[], dict[str, float]]) -> None:
        measured.setdefault(name, []).append(fn())

    with RedisServer() as redis:
        url = redis.url
        with asyncq.SyncClient(url) as client:
            client.ping()  # start the loop thread and connect outside the timing
            for _ in range(args.rounds):
                record("sync_latency", lambda: sync_latency(client, args.tasks))
                record("async_latency", lambda: async_latency(url, args.tasks))
                record("run_per_call_latency",
                       lambda: run_per_call_latency(url, max(1, args.tasks // 10)))
                record("sync_throughput", lambda: sync_throughput(client, args.per_thread))
                record("async_throughput", lambda: async_throughput(url, args.per_thread))
                command(redis.port, "FLUSHALL")
    results = {name: _median(rounds) for name, rounds in measured.items()}

    print(f"\nenqueue from sync code vs the async Client ({args.rounds} rounds, medians; "
          f"{os.cpu_count()} cores, load {os.getloadavg()[0]:.1f})")
    print(f"{'':44} {'p50 ms':>8} {'p99 ms':>8}")
    for name, label in [("sync_latency", "SyncClient.enqueue"),
                        ("async_latency", "await Client.enqueue"),
                        ("run_per_call_latency", "asyncio.run(new Client) per enqueue")]:
        r = results[name]
        print(f"{label:44} {r['p50_ms']:8.3f} {r['p99_ms']:8.3f}")
    print(f"{'':44} {'tasks/s':>8}")
    for name, label in [("sync_throughput", f"SyncClient, {THREADS} threads"),
                        ("async_throughput", f"Client, {THREADS} asyncio tasks, one loop")]:
        print(f"{label:44} {results[name]['tasks_per_s']:8.0f}")

    doc: dict[str, Any] = {
        "python": platform.python_version(), "cpus": os.cpu_count(),
        "load_1m": os.getloadavg()[0], "tasks": args.tasks, "per_thread": args.per_thread,
        "threads": THREADS, "rounds": args.rounds, "results": results, "all_rounds": measured,
    }
    if not args.no_save:
        save_result("sync_client", doc)


if __name__ == "__main__":
    main()
