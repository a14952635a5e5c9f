"""What keeping results costs: the default result rule and handler task options.

    .venv/bin/python -m benchmarks.result_retention [--tasks 5000] [--rounds 5] [--no-save]

On a fresh loopback ``redis-server``, one in-process worker (concurrency 100) drains ``--tasks``
tasks enqueued in one ``enqueue_many``, once per variant, variants alternating, for
``--rounds`` rounds:

* ``retention=0``: returns nothing and keeps nothing (the baseline: what every task cost
  before the result rule);
* ``returns nothing``: the default rule, a 1-min completion mark per task;
* ``returns a value``: the default rule, the task kept 10 min with its result;
* ``handler options``: returns nothing, its handler registered with ``max_retry``,
  ``timeout`` and ``retry_on`` (what applying a registration costs per task).

Reported per variant: median drain time per task and its overhead over the baseline (µs),
Redis memory held per task once drained (``used_memory`` after minus before, bytes), and Redis
time per completion script (``cmdstat_evalsha`` µs per call over the drain). Prints a table
and saves ``benchmarks/results/result_retention-<UTC time>.json``. Not a test.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import platform
import statistics
import time
from typing import Any

from redis.asyncio import Redis

from asyncq import Client, ServeMux, Task, Worker, configure_logging
from asyncq._testing.redis_server import RedisServer
from benchmarks._results import save_result

CONCURRENCY = 100
VARIANTS = ("retention=0", "returns nothing", "returns a value", "handler options")


def mux_for(variant: str, done: asyncio.Event, want: int) -> ServeMux:
    mux = ServeMux()
    seen = 0

    async def handler(task: Task) -> object:
        nonlocal seen
        seen += 1
        if seen >= want:
            done.set()
        return {"ok": True, "n": seen} if variant == "returns a value" else None

    if variant == "handler options":
        mux.handle("t", handler, max_retry=3, timeout=60, retry_on=(ValueError,))
    else:
        mux.handle("t", handler)
    return mux


async def stats(redis: Redis) -> tuple[int, int, int]:
    """used_memory, evalsha calls, evalsha µs."""
    mem = int((await redis.info("memory"))["used_memory"])
    cmd = (await redis.info("commandstats")).get("cmdstat_evalsha", {})
    return mem, int(cmd.get("calls", 0)), int(cmd.get("usec", 0))


async def drain(url: str, redis: Redis, queue: str, n: int, variant: str) -> dict[str, float]:
    done = asyncio.Event()
    options: dict[str, Any] = {"retention": 0} if variant == "retention=0" else {}
    async with Client(url) as client, Worker(url, mux_for(variant, done, n), queues={queue: 1},
                                             concurrency=CONCURRENCY) as worker:
        mem0, calls0, usec0 = await stats(redis)
        began = time.perf_counter()
        await client.enqueue_many(Task("t", queue=queue, **options) for _ in range(n))
        await asyncio.wait_for(done.wait(), timeout=600)
        await worker.wait_drained() if hasattr(worker, "wait_drained") else None
        seconds = time.perf_counter() - began
        await asyncio.sleep(0.5)  # (the last outcomes are written)
        mem1, calls1, usec1 = await stats(redis)
    return {"seconds": seconds, "bytes_per_task": (mem1 - mem0) / n,
            "evalsha_us": (usec1 - usec0) / max(1, calls1 - calls0)}


async def run(tasks: int, rounds: int) -> dict[str, Any]:
    with RedisServer() as server:
        redis = Redis.from_url(server.url)
        runs: dict[str, list[dict[str, float]]] = {v: [] for v in VARIANTS}
        for v in VARIANTS:  # warm-up: imports, script loads, caches
            await drain(server.url, redis, f"warm-{v.replace(' ', '-')}", 200, v)
        for r in range(rounds):
            for v in VARIANTS:
                await redis.flushdb()
                runs[v].append(await drain(server.url, redis, f"b-{r}-{v[:8].strip()}",
                                           tasks, v))
        await redis.aclose()
    base = statistics.median(x["seconds"] for x in runs["retention=0"])
    out = {}
    for v, rs in runs.items():
        secs = statistics.median(x["seconds"] for x in rs)
        out[v] = {"us_per_task": secs / tasks * 1e6, "overhead_us": (secs - base) / tasks * 1e6,
                  "bytes_per_task": statistics.median(x["bytes_per_task"] for x in rs),
                  "evalsha_us": statistics.median(x["evalsha_us"] for x in rs), "runs": rs}
    return {"tasks": tasks, "rounds": rounds, "concurrency": CONCURRENCY, "variants": out,
            "machine": {"python": platform.python_version(), "cpus": os.cpu_count(),
                        "platform": platform.platform()}}


def table(doc: dict[str, Any]) -> str:
    lines = ["| variant | µs/task (median) | overhead µs/task | Redis bytes held/task | "
             "µs per script call |", "|---|---:|---:|---:|---:|"]
    for name, row in doc["variants"].items():
        lines.append(f"| {name} | {row['us_per_task']:.1f} | {row['overhead_us']:+.1f} | "
                     f"{row['bytes_per_task']:.0f} | {row['evalsha_us']:.1f} |")
    return "\n".join(lines)


def main() -> None:
    p = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    p.add_argument("--tasks", type=int, default=5000)
    p.add_argument("--rounds", type=int, default=5)
    p.add_argument("--no-save", action="store_true")
    args = p.parse_args()
    configure_logging("warning")
    doc = asyncio.run(run(args.tasks, args.rounds))
    print(table(doc))
    if not args.no_save:
        save_result("result_retention", doc)


if __name__ == "__main__":
    main()
