"""What progress reports cost: tasks that never report, and the price of a report.

    .venv/bin/python -m benchmarks.progress [--tasks 3000] [--rounds 5] [--no-save]
    PYTHONPATH=/path/to/other/checkout python -m benchmarks.progress --only quiet --no-save

On a fresh loopback ``redis-server``, one in-process worker (concurrency 100) drains
``--tasks`` tasks (``retention=0``) enqueued in one ``enqueue_many``, once per variant,
variants alternating, for ``--rounds`` rounds:

* ``quiet``: the handler never reports (what every task pays for the feature: run it with
  ``--only quiet`` against a checkout without progress reports to compare);
* ``once``: one ``set_progress(1.0, "done")`` per task (one progress.lua write each);
* ``chatty``: 1 000 ``set_progress`` calls per task, without yielding between them (coalesced:
  the first is written at once, the last before the outcome).

Reported per variant: median drain time per task and its overhead over ``quiet`` (µs), and
progress writes per task. Then, measured directly: what the worker does for a task that never
reports (the processor's hooks: ``quiet_task_hooks_us``), the handler's cost of one call
(``await task.set_progress`` on the loop, with and without message and data;
``set_progress_sync`` from a sync handler's thread), and Redis time per progress.lua call
(``cmdstat_evalsha``) with nobody listening and with a listener (the event is published).
Prints the numbers and saves ``benchmarks/results/progress-<UTC time>.json``. Not a test.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import platform
import statistics
import time
from typing import Any, cast

import orjson
from redis.asyncio import Redis

from asyncq import Client, ServeMux, Task, Worker, configure_logging
from asyncq._testing.redis_server import RedisServer
from benchmarks._results import save_result

CONCURRENCY = 100
VARIANTS = ("quiet", "once", "chatty")
CHATTY_CALLS = 1000
CALLS = 200_000  # set_progress calls timed in one handler


def mux_for(variant: str, done: asyncio.Event, want: int) -> ServeMux:
    mux = ServeMux()
    seen = 0

    async def handler(task: Task) -> None:
        nonlocal seen
        if variant == "once":
            await task.set_progress(1.0, "done")
        elif variant == "chatty":
            for i in range(CHATTY_CALLS):
                await task.set_progress((i + 1) / CHATTY_CALLS)
        seen += 1
        if seen >= want:
            done.set()

    mux.handle("t", handler)
    return mux


async def drain(url: str, queue: str, n: int, variant: str) -> dict[str, float]:
    done = asyncio.Event()
    async with Client(url) as client, Worker(url, mux_for(variant, done, n), queues={queue: 1},
                                             concurrency=CONCURRENCY) as worker:
        began = time.perf_counter()
        await client.enqueue_many(Task("t", queue=queue, retention=0) for _ in range(n))
        await asyncio.wait_for(done.wait(), timeout=600)
        seconds = time.perf_counter() - began
        progress = getattr(worker.processor, "progress", None)
        writes = progress.writes if progress is not None else 0
    return {"seconds": seconds, "writes_per_task": writes / n}


async def call_cost(url: str, queue: str) -> dict[str, float]:
    """µs per ``set_progress`` call inside a handler: on the loop (bare, and with a message and
    data), and ``set_progress_sync`` from a sync handler's thread."""
    out: dict[str, float] = {}
    done = asyncio.Event()
    mux = ServeMux()

    @mux.handler("bare")
    async def bare(task: Task) -> None:
        began = time.perf_counter()
        for i in range(CALLS):
            await task.set_progress(i / CALLS)
        out["loop_call_us"] = (time.perf_counter() - began) / CALLS * 1e6
        done.set()

    @mux.handler("rich")
    async def rich(task: Task) -> None:
        began = time.perf_counter()
        for i in range(CALLS):
            await task.set_progress(i / CALLS, "rendering page", data={"page": i})
        out["loop_call_with_message_and_data_us"] = (time.perf_counter() - began) / CALLS * 1e6
        done.set()

    @mux.handler("thread")
    def thread(task: Task) -> None:
        began = time.perf_counter()
        for i in range(CALLS):
            task.set_progress_sync(i / CALLS)
        out["thread_call_us"] = (time.perf_counter() - began) / CALLS * 1e6

    async with Client(url) as client, Worker(url, mux, queues={queue: 1}):
        for name in ("bare", "rich"):
            done.clear()
            await client.enqueue(name, queue=queue, retention=0)
            await asyncio.wait_for(done.wait(), timeout=120)
        info = await client.enqueue("thread", queue=queue)
        await client.wait(info, timeout=120)
    return out


def hooks_cost(n: int = 1_000_000) -> float:
    """µs per task of what the processor does for progress when a task never reports: bind
    the loop as the run starts, look the task up as its outcome is settled, read whether
    outcomes wait (``idle``)."""
    from asyncq._clock import SYSTEM_CLOCK
    from asyncq._worker._progress import ProgressReports

    reports = ProgressReports(cast(Any, None), "bench", SYSTEM_CLOCK,  # (never writes)
                              lambda task: True)
    loop = asyncio.new_event_loop()
    try:
        began = time.perf_counter()
        for _ in range(n):
            reports.bind(loop)
            _ = "a-task-id" in reports.runs
            _ = reports.settling
        return (time.perf_counter() - began) / n * 1e6
    finally:
        loop.close()


async def evalsha(redis: Redis) -> tuple[int, int]:
    cmd = (await redis.info("commandstats")).get("cmdstat_evalsha", {})
    return int(cmd.get("calls", 0)), int(cmd.get("usec", 0))


async def script_cost(url: str, redis: Redis, queue: str, n: int = 5000) -> dict[str, float]:
    """Redis µs per progress.lua call, without and with a listener (direct broker calls on
    one leased task: only progress scripts run while measuring)."""
    out: dict[str, float] = {}
    async with Client(url) as client:
        broker: Any = client.broker
        await client.enqueue("t", queue=queue)
        raws, _ = await broker.dequeue(queue, 1, "bench", 600_000, 1000)
        task_id = raws[0].id
        report = orjson.dumps({"v": 0.5, "m": "page 3 of 8", "at": int(time.time() * 1000)})
        for name, listening in (("script_us_nobody_listening", False),
                                ("script_us_one_listener", True)):
            stream = client.events(queue) if listening else None
            if stream is not None:
                await stream.start()
            await redis.config_resetstat()
            calls0, usec0 = await evalsha(redis)
            for _ in range(n):
                assert await broker.set_progress(queue, task_id, "bench", report)
            calls1, usec1 = await evalsha(redis)
            out[name] = (usec1 - usec0) / max(1, calls1 - calls0)
            if stream is not None:
                await stream.aclose()
    return out


async def run(tasks: int, rounds: int, only: list[str]) -> dict[str, Any]:
    with RedisServer() as server:
        redis = Redis.from_url(server.url)
        runs: dict[str, list[dict[str, float]]] = {v: [] for v in only}
        for v in only:  # warm-up: imports, script loads, caches
            await drain(server.url, f"warm-{v}", 200, v)
        for r in range(rounds):
            for v in only:
                await redis.flushdb()
                runs[v].append(await drain(server.url, f"b-{r}-{v}", tasks, v))
        calls: dict[str, float] = {}
        scripts: dict[str, float] = {}
        if only != ["quiet"]:
            calls = {"quiet_task_hooks_us": hooks_cost(),
                     **await call_cost(server.url, "calls")}
            scripts = await script_cost(server.url, redis, "scripts")
        await redis.aclose()
    base = statistics.median(x["seconds"] for x in runs[only[0]])
    out = {}
    for v, rs in runs.items():
        secs = statistics.median(x["seconds"] for x in rs)
        out[v] = {"us_per_task": secs / tasks * 1e6, "overhead_us": (secs - base) / tasks * 1e6,
                  "writes_per_task": statistics.median(x["writes_per_task"] for x in rs),
                  "runs": rs}
    return {"tasks": tasks, "rounds": rounds, "concurrency": CONCURRENCY,
            "chatty_calls_per_task": CHATTY_CALLS, "variants": out, "calls": calls,
            "scripts": scripts,
            "machine": {"python": platform.python_version(), "cpus": os.cpu_count(),
                        "platform": platform.platform()}}


def table(doc: dict[str, Any]) -> str:
    lines = ["| variant | µs/task (median) | overhead µs/task | progress writes/task |",
             "|---|---:|---:|---:|"]
    for name, row in doc["variants"].items():
        lines.append(f"| {name} | {row['us_per_task']:.1f} | {row['overhead_us']:+.1f} | "
                     f"{row['writes_per_task']:.2f} |")
    for key, value in {**doc["calls"], **doc["scripts"]}.items():
        lines.append(f"\n{key}: {value:.3f}")
    return "\n".join(lines)


def main() -> None:
    p = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    p.add_argument("--tasks", type=int, default=3000)
    p.add_argument("--rounds", type=int, default=5)
    p.add_argument("--only", choices=VARIANTS, action="append",
                   help="run only these variants (repeat); the first is the baseline")
    p.add_argument("--no-save", action="store_true")
    args = p.parse_args()
    configure_logging("warning")
    doc = asyncio.run(run(args.tasks, args.rounds, args.only or list(VARIANTS)))
    print(table(doc))
    if not args.no_save:
        save_result("progress", doc)


if __name__ == "__main__":
    main()
