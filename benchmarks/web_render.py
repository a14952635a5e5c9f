"""How long the web dashboard takes to render its pages server-side on a large deployment.

    .venv/bin/python -m benchmarks.web_render [--queues 100] [--tasks 1000000] [--renders 20]
                                              [--no-save]

A fresh loopback ``redis-server`` gets ``--queues`` queues holding ``--tasks`` tasks in all
(three quarters pending, a quarter scheduled; every fifth queue has its pending tasks archived).
Each page is then requested ``--renders`` times
in-process (httpx's ASGI transport, so the time is the app's own: Redis reads, templates, no
network or browser), every request reading Redis again (the overview always reads fresh).
Reported per page: median, p90 and worst wall time, the app's CPU per render and the HTML size.
Prints a table and saves ``benchmarks/results/web-<UTC>.json``. Not a test: nothing here asserts
a speed.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import httpx

import asyncq
from asyncq.web import create_app
from benchmarks._redis import RedisServer, info

RESULTS = Path(__file__).resolve().parent / "results"
BATCH = 5_000


async def fill(url: str, queues: int, tasks: int) -> list[str]:
    """Enqueue the tasks and archive every fifth queue's pending ones; returns the queue
    names."""
    names = [f"q{q:03d}" for q in range(queues)]
    per_queue = tasks // queues
    async with asyncq.Client(url) as client:
        for name in names:
            for start in range(0, per_queue, BATCH):
                batch = [asyncq.Task("report:build", {"n": i, "customer": f"c{i % 97}"},
                                     queue=name, process_in=3600 if i % 4 == 0 else None)
                         for i in range(start, min(per_queue, start + BATCH))]
                await client.enqueue_many(batch)
    async with asyncq.Inspector(url) as inspector:
        for name in names[::5]:
            await inspector.archive_all(name, "pending")
    return names


async def time_page(http: httpx.AsyncClient, path: str, renders: int) -> dict[str, Any]:
    walls, cpus, size = [], [], 0
    for i in range(renders + 1):
        w0, c0 = time.perf_counter(), time.process_time()
        response = await http.get(path)
        w1, c1 = time.perf_counter(), time.process_time()
        if response.status_code != 200:
            raise RuntimeError(f"{path}: HTTP {response.status_code}")
        size = len(response.content)
        if i:  # the first render warms the connection pool and the template cache
            walls.append((w1 - w0) * 1000)
            cpus.append((c1 - c0) * 1000)
    walls.sort()
    return {
        "path": path, "renders": renders,
        "wall_ms_p50": round(statistics.median(walls), 2),
        "wall_ms_p90": round(walls[int(0.9 * (len(walls) - 1))], 2),
        "wall_ms_max": round(walls[-1], 2),
        "cpu_ms_p50": round(statistics.median(cpus), 2),
        "html_kb": round(size / 1024, 1),
    }


async def measure(queues: int, tasks: int, renders: int) -> dict[str, Any]:
    with RedisServer() as server:
        t0 = time.perf_counter()
        names = await fill(server.url, queues, tasks)
        fill_s = time.perf_counter() - t0
        memory = info(server.port, "memory")["used_memory_human"]
        app = create_app(server.url)
        busy, archived = names[1], names[0]
        async with asyncq.Inspector(server.url) as inspector:
            task_id = (await inspector.list_tasks(busy, "pending", 1, 1))[0].id
        pages = {
            "overview": "/",
            "queue, pending, page 1": f"/queue?q={busy}&state=pending",
            "queue, pending, page 200": f"/queue?q={busy}&state=pending&page=200",
            "queue, scheduled, page 1": f"/queue?q={busy}&state=scheduled",
            "queue, archived, page 1": f"/queue?q={archived}&state=archived",
            "task": f"/task?q={busy}&id={task_id}",
            "servers": "/servers",
        }
        rows = []
        try:
            async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app),
                                         base_url="http://dash") as http:
                for name, path in pages.items():
                    rows.append({"page": name, **await time_page(http, path, renders)})
        finally:
            await app.state.dashboard.close()
    return {"queues": queues, "tasks": tasks, "fill_s": round(fill_s, 1),
            "redis_memory": memory, "pages": rows}


def table(result: dict[str, Any]) -> str:
    head = (f"{result['queues']} queues, {result['tasks']:,} tasks "
            f"(Redis {result['redis_memory']}, filled in {result['fill_s']} s)")
    lines = [head, "",
             f"{'page':<26} {'p50 ms':>8} {'p90 ms':>8} {'max ms':>8} {'cpu ms':>8} {'KiB':>7}"]
    for row in result["pages"]:
        lines.append(f"{row['page']:<26} {row['wall_ms_p50']:>8} {row['wall_ms_p90']:>8} "
                     f"{row['wall_ms_max']:>8} {row['cpu_ms_p50']:>8} {row['html_kb']:>7}")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--queues", type=int, default=100)
    parser.add_argument("--tasks", type=int, default=1_000_000)
    parser.add_argument("--renders", type=int, default=20)
    parser.add_argument("--no-save", action="store_true")
    args = parser.parse_args()
    result = asyncio.run(measure(args.queues, args.tasks, args.renders))
    print(table(result))
    if not args.no_save:
        RESULTS.mkdir(exist_ok=True)
        stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%SZ")
        path = RESULTS / f"web-{stamp}.json"
        path.write_text(json.dumps(result, indent=2) + "\n")
        print(f"\nsaved {path}")


if __name__ == "__main__":
    main()
