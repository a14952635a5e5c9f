"""What rate and concurrency limits cost, and how exactly a rate is kept.

    .venv/bin/python -m benchmarks.limits [--tasks 5000] [--rounds 5] [--no-save]

On a fresh loopback ``redis-server``, one in-process worker (concurrency 100) drains ``--tasks``
no-op tasks enqueued in one ``enqueue_many``, once per variant, variants alternating, for
``--rounds`` rounds:

* ``no gate``: a ServeMux whose worker has no limit gate at all (the baseline: a worker that
  never claims anything);
* ``unused``: the same mux as every worker runs it (the gate present, no limit declared, no
  cap on the queue: the dequeue and hand-off scripts look for a cap, the worker claims
  nothing);
* ``queue cap``: a cap of 1 000 000 on the queue (set with the Inspector: a slot claimed and
  given back per task, never hit);
* ``concurrency``: a ``ConcurrencyLimit(100000)`` on the type (claimed and given back per task,
  never hit);
* ``rate``: a ``RateLimit("1000000/s", burst=1000000)`` (claimed per task, never hit);
* ``both``: both limits.

Reported: median drain time per task and its overhead over the baseline (µs per task). Then
the pickup latency of single tasks (enqueue to handler start, one at a time: no batch shares
the acquire call) for ``no gate``, ``unused`` and ``queue cap``. Then
the rate limits ``200/s``, ``1000/s`` and ``5000/s`` each drain ``3 x rate`` tasks: achieved
start rate (after the first burst) vs configured, and the most admissions (by the Redis clock,
from the limit's window log) and handler starts seen in any 1 s window. Prints a table and
saves ``benchmarks/results/limits-<UTC time>.json``. Not a test.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import platform
import statistics
import time
from pathlib import Path
from typing import Any

from redis.asyncio import Redis

from asyncq import (
    Client,
    ConcurrencyLimit,
    Inspector,
    RateLimit,
    ServeMux,
    Task,
    Worker,
    configure_logging,
)
from asyncq._broker import _keys as K
from asyncq._limits import Limit
from asyncq._testing.redis_server import RedisServer
from benchmarks._results import save_result

ROOT = Path(__file__).resolve().parents[1]
CONCURRENCY = 100

QUEUE_CAP = "queue cap"
VARIANTS: dict[str, list[Any] | None] = {
    "no gate": None,
    "unused": [],
    QUEUE_CAP: [],
    "concurrency": [ConcurrencyLimit(100_000)],
    "rate": [RateLimit("1000000/s", burst=1_000_000)],
    "both": [ConcurrencyLimit(100_000), RateLimit("1000000/s", burst=1_000_000)],
}


class Counter:
    def __init__(self, want: int) -> None:
        self.want = want
        self.starts: list[float] = []
        self.done = asyncio.Event()

    async def handle(self, task: Task) -> None:
        self.starts.append(time.perf_counter())
        if len(self.starts) >= self.want:
            self.done.set()


async def drain(url: str, queue: str, n: int, limits: list[Limit] | None,
                cap: bool = False) -> tuple[float, list[float]]:
    """Seconds from enqueue_many to the n-th handler start, and the starts."""
    counter = Counter(n)
    mux = ServeMux()
    mux.handle("noop", counter.handle, limits=limits or None)
    if cap:
        async with Inspector(url) as inspector:
            await inspector.set_queue_concurrency(queue, 1_000_000)
    async with Client(url) as client, Worker(url, mux, queues={queue: 1},
                                             concurrency=CONCURRENCY) as worker:
        if limits is None:
            worker.processor.limits = None
        began = time.perf_counter()
        await client.enqueue_many(Task("noop", queue=queue) for _ in range(n))
        await asyncio.wait_for(counter.done.wait(), timeout=600)
        return time.perf_counter() - began, counter.starts


async def admissions(url: str, queue: str, rate: int) -> tuple[list[float], list[float]]:
    """Drain ``3 x rate`` tasks under ``RateLimit(rate/s)``: the admissions (Redis clock, read
    from the limit's window log every 0.2 s: its entries live 1 s) and the handler starts."""
    window = K.limit_state(K.limit_base(queue, "rate", "noop"), "") + "win"
    seen: dict[bytes, float] = {}
    redis = Redis.from_url(url)

    async def snapshot() -> None:
        while True:
            seen.update(await redis.zrange(window, 0, -1, withscores=True))
            await asyncio.sleep(0.2)

    reader = asyncio.create_task(snapshot())
    try:
        _, starts = await drain(url, queue, 3 * rate, [RateLimit(f"{rate}/s")])
        seen.update(await redis.zrange(window, 0, -1, withscores=True))
    finally:
        reader.cancel()
        await redis.aclose()
    return [ms / 1000 for ms in seen.values()], starts


async def pickups(url: str, queue: str, n: int, variant: str) -> list[float]:
    """Microseconds from each enqueue call to its handler's start, one task at a time (the
    worker idle in between: the task reaches it in one hop)."""
    started = asyncio.Event()
    at: list[float] = []

    async def handle(task: Task) -> None:
        at.append(time.perf_counter())
        started.set()

    mux = ServeMux()
    mux.handle("noop", handle)
    if variant == QUEUE_CAP:
        async with Inspector(url) as inspector:
            await inspector.set_queue_concurrency(queue, 1_000_000)
    out = []
    async with Client(url) as client, Worker(url, mux, queues={queue: 1},
                                             concurrency=CONCURRENCY) as worker:
        if variant == "no gate":
            worker.processor.limits = None
        for _ in range(n):
            started.clear()
            began = time.perf_counter()
            await client.enqueue("noop", queue=queue)
            await asyncio.wait_for(started.wait(), timeout=30)
            out.append((at[-1] - began) * 1e6)
            await asyncio.sleep(0.002)  # let the worker go idle again (one hop next time)
    return out


def most_in_window(starts: list[float], window: float) -> int:
    starts = sorted(starts)
    most = first = 0
    for last, s in enumerate(starts):
        while starts[first] <= s - window:
            first += 1
        most = max(most, last - first + 1)
    return most


async def run(tasks: int, rounds: int) -> dict[str, Any]:
    with RedisServer() as server:
        times: dict[str, list[float]] = {name: [] for name in VARIANTS}
        for name, limits in VARIANTS.items():  # warm-up: imports, script loads, caches
            await drain(server.url, f"warm-{name.replace(' ', '-')}", 200, limits,
                        name == QUEUE_CAP)
        for r in range(rounds):
            for name, limits in VARIANTS.items():
                seconds, _ = await drain(server.url, f"bench-{r}-{name.replace(' ', '-')}",
                                         tasks, limits, name == QUEUE_CAP)
                times[name].append(seconds)
        base = statistics.median(times["no gate"])
        overhead = {name: {"us_per_task": statistics.median(t) / tasks * 1e6,
                           "overhead_us": (statistics.median(t) - base) / tasks * 1e6,
                           "runs_s": t}
                    for name, t in times.items()}
        latency: dict[str, list[float]] = {name: [] for name in ("no gate", "unused",
                                                                    QUEUE_CAP)}
        for r in range(rounds):
            for name in latency:
                latency[name] += await pickups(server.url, f"pick-{r}-{name.replace(' ', '-')}",
                                               200, name)
        pickup = {name: {"p50_us": statistics.median(v),
                         "p90_us": statistics.quantiles(v, n=10)[-1]}
                  for name, v in latency.items()}
        rates = []
        for rate in (200, 1000, 5000):
            admitted, starts = await admissions(server.url, f"bench-rate-{rate}", rate)
            # A burst (rate // 10) may start at once after a quiet spell: the rate over the
            # run counts from the end of that first burst.
            burst = rate // 10
            achieved = (len(starts) - burst) / (max(starts) - sorted(starts)[burst])
            rates.append({"configured": rate, "tasks": len(starts), "achieved": achieved,
                          "ratio": achieved / rate, "admitted": len(admitted),
                          "most_admitted_in_1s": most_in_window(admitted, 1.0),
                          "most_started_in_1s": most_in_window(starts, 1.0)})
    return {"tasks": tasks, "rounds": rounds, "concurrency": CONCURRENCY,
            "overhead": overhead, "pickup": pickup,
            "rates": rates,
            "machine": {"python": platform.python_version(), "cpus": os.cpu_count(),
                        "platform": platform.platform()}}


def table(doc: dict[str, Any]) -> str:
    lines = ["| variant | µs/task (median) | overhead µs/task |", "|---|---:|---:|"]
    for name, row in doc["overhead"].items():
        lines.append(f"| {name} | {row['us_per_task']:.1f} | {row['overhead_us']:+.1f} |")
    lines += ["", "| one task at a time | pickup p50 µs | p90 µs |", "|---|---:|---:|"]
    for name, row in doc["pickup"].items():
        lines.append(f"| {name} | {row['p50_us']:.0f} | {row['p90_us']:.0f} |")
    lines += ["", "| configured | tasks | achieved /s | ratio | most admitted in 1 s | "
              "most handler starts in 1 s |", "|---:|---:|---:|---:|---:|---:|"]
    for row in doc["rates"]:
        lines.append(f"| {row['configured']}/s | {row['tasks']} | {row['achieved']:.1f} | "
                     f"{row['ratio']:.1%} | {row['most_admitted_in_1s']} | "
                     f"{row['most_started_in_1s']} |")
    return "\n".join(lines)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--tasks", type=int, default=5000)
    p.add_argument("--rounds", type=int, default=5)
    p.add_argument("--no-save", action="store_true")
    args = p.parse_args()
    configure_logging("warning")
    doc = asyncio.run(run(args.tasks, args.rounds))
    print(table(doc))
    if not args.no_save:
        save_result("limits", doc)


if __name__ == "__main__":
    main()
