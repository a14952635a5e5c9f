"""What one Prometheus scrape of ``asyncq metrics`` costs as the deployment grows.

    .venv/bin/python -m benchmarks.metrics_scrape [--queues 10,100,1000] [--tasks 20]
                                                  [--scrapes 15] [--no-save]

For each size, a fresh loopback ``redis-server`` gets that many queues with ``--tasks`` tasks
each (pending, scheduled and archived), and the exporter's ASGI app is scraped ``--scrapes``
times in-process (httpx's ASGI transport, every scrape reading Redis again). Reported: median
and worst wall time per scrape, the exporter's CPU time per scrape, Redis round trips, and the
size of the exposition. Prints a table and saves ``benchmarks/results/metrics-<UTC>.json``.
Not a test: nothing here asserts a speed.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import time
from typing import Any

import httpx

import asyncq
from asyncq.metrics import queue_metrics_app
from benchmarks._redis import RedisServer, info
from benchmarks._results import save_result


async def fill(url: str, queues: int, tasks: int) -> None:
    async with asyncq.Client(url) as client:
        for q in range(queues):
            name = f"q{q:04d}"
            batch = [asyncq.Task("t", {"n": i}, queue=name,
                                 process_in=600 if i % 4 == 0 else None)
                     for i in range(tasks)]
            await client.enqueue_many(batch)
        async with asyncq.Inspector(url) as inspector:
            for q in range(0, queues, 10):
                await inspector.archive_all(f"q{q:04d}", "pending")


async def measure(queues: int, tasks: int, scrapes: int) -> dict[str, Any]:
    with RedisServer() as server:
        await fill(server.url, queues, tasks)
        app = queue_metrics_app(server.url, timeout=60)
        walls, cpus = [], []
        calls0 = int(info(server.port, "stats")["total_commands_processed"])
        size = 0
        async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app),
                                     base_url="http://m") as http:
            for i in range(scrapes + 1):
                app.exporter.expire()
                w0, c0 = time.perf_counter(), time.process_time()
                text = (await http.get("/metrics")).text
                w1, c1 = time.perf_counter(), time.process_time()
                if i == 0:  # warm-up: connections, scripts
                    calls0 = int(info(server.port, "stats")["total_commands_processed"])
                    continue
                walls.append(w1 - w0)
                cpus.append(c1 - c0)
                size = len(text)
        calls1 = int(info(server.port, "stats")["total_commands_processed"])
        await app.aclose()
    return {"queues": queues, "tasks_per_queue": tasks, "scrapes": scrapes,
            "wall_ms_median": statistics.median(walls) * 1000,
            "wall_ms_max": max(walls) * 1000,
            "exporter_cpu_ms_median": statistics.median(cpus) * 1000,
            "redis_commands_per_scrape": (calls1 - calls0) / scrapes,
            "exposition_kib": size / 1024}


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--queues", default="10,100,1000")
    p.add_argument("--tasks", type=int, default=20)
    p.add_argument("--scrapes", type=int, default=15)
    p.add_argument("--no-save", action="store_true")
    args = p.parse_args()
    rows = [asyncio.run(measure(int(n), args.tasks, args.scrapes))
            for n in args.queues.split(",")]
    print("| queues | scrape wall p50 (ms) | worst (ms) | exporter CPU (ms) | "
          "Redis commands (incl. in scripts) | exposition (KiB) |")
    print("|---:|---:|---:|---:|---:|---:|")
    for r in rows:
        print(f"| {r['queues']:,} | {r['wall_ms_median']:.1f} | {r['wall_ms_max']:.1f} | "
              f"{r['exporter_cpu_ms_median']:.1f} | {r['redis_commands_per_scrape']:.0f} | "
              f"{r['exposition_kib']:.0f} |")
    if not args.no_save:
        save_result("metrics", {"rows": rows, "args": vars(args)})


if __name__ == "__main__":
    main()
