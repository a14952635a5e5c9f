"""How long the web dashboard takes to render its pages server-side on a large deployment.

    .venv/bin/python -m benchmarks.web_render [--queues 100] [--tasks 1000000] [--renders 20]
                                              [--no-save]

A fresh loopback ``redis-server`` gets ``--queues`` queues holding ``--tasks`` tasks in all
(three quarters pending, a quarter scheduled; every fifth queue has its pending tasks archived).
Each page is then requested ``--renders`` times
in-process (httpx's ASGI transport, so the time is the app's own: Redis reads, templates, no
network or browser), every request reading Redis again (the overview always reads fresh).
Reported per page: median, p90 and worst wall time, the app's CPU per render and the HTML size.

Then the cost of live updates: the dashboard is served by uvicorn and 0, 1 and 10 browser tabs
(event streams of the overview) stay open while tasks are enqueued at a steady rate; reported
are the Redis commands per second of the whole server (the enqueuer's own included: the 0-tab
row is that baseline) and the documents each tab received per second.

Prints the tables and saves ``benchmarks/results/web-<UTC>.json``. Not a test: nothing here asserts
a speed.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import time
from typing import Any

import httpx
import uvicorn

import asyncq
from asyncq.web import create_app
from benchmarks._redis import RedisServer, _free_port, info
from benchmarks._results import save_result

BATCH = 5_000
LIVE_TABS = (0, 1, 10)


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


async def measure(queues: int, tasks: int, renders: int, live_seconds: float,
                  live_rate: int) -> dict[str, Any]:
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
        live = await live_cost(server.url, server.port, names, live_seconds, live_rate)
    return {"queues": queues, "tasks": tasks, "fill_s": round(fill_s, 1),
            "redis_memory": memory, "pages": rows, "live": live}


async def _tab(http: httpx.AsyncClient, received: list[float], opened: asyncio.Event) -> None:
    """One open overview tab: counts the documents its event stream delivers."""
    async with http.stream("GET", "/events") as stream:
        async for line in stream.aiter_lines():
            if line.startswith("data: "):
                received.append(time.perf_counter())
                opened.set()


async def live_cost(url: str, port: int, names: list[str], seconds: float,
                    rate: int) -> list[dict[str, Any]]:
    """Redis commands per second of the server and documents per tab per second, with 0, 1
    and 10 tabs open while tasks are enqueued at ``rate`` a second."""
    app = create_app(url)
    config = uvicorn.Config(app, host="127.0.0.1", port=_free_port(), log_level="warning",
                            lifespan="on", timeout_graceful_shutdown=1)
    server = uvicorn.Server(config)
    serving = asyncio.create_task(server.serve())
    while not server.started:  # noqa: ASYNC110 (uvicorn offers a flag, not an event)
        await asyncio.sleep(0.01)
    rows = []
    try:
        async with asyncq.Client(url) as client, httpx.AsyncClient(
                base_url=f"http://127.0.0.1:{config.port}", timeout=30) as http:
            for tabs in LIVE_TABS:
                received: list[list[float]] = [[] for _ in range(tabs)]
                opened = [asyncio.Event() for _ in range(tabs)]
                readers = [asyncio.create_task(_tab(http, r, o))
                           for r, o in zip(received, opened, strict=True)]
                await asyncio.gather(*(o.wait() for o in opened))
                start = time.perf_counter()
                for r in received:
                    r.clear()
                c0 = int(info(port, "stats")["total_commands_processed"])
                sent = 0
                while (elapsed := time.perf_counter() - start) < seconds:
                    if sent < elapsed * rate:
                        await client.enqueue("t", None, queue=names[sent % len(names)])
                        sent += 1
                    else:
                        await asyncio.sleep(1 / rate)
                c1 = int(info(port, "stats")["total_commands_processed"])
                wall = time.perf_counter() - start
                for reader in readers:
                    reader.cancel()
                await asyncio.gather(*readers, return_exceptions=True)
                rows.append({
                    "tabs": tabs, "enqueued_per_s": round(sent / wall),
                    "redis_commands_per_s": round((c1 - c0) / wall),
                    "documents_per_tab_per_s": round(
                        sum(len(r) for r in received) / tabs / wall, 2) if tabs else None,
                })
    finally:
        server.should_exit = True
        await serving
        await app.state.dashboard.close()
    return rows


def table(result: dict[str, Any]) -> str:
    head = (f"{result['queues']} queues, {result['tasks']:,} tasks "
            f"(Redis {result['redis_memory']}, filled in {result['fill_s']} s)")
    lines = [head, "",
             f"{'page':<26} {'p50 ms':>8} {'p90 ms':>8} {'max ms':>8} {'cpu ms':>8} {'KiB':>7}"]
    for row in result["pages"]:
        lines.append(f"{row['page']:<26} {row['wall_ms_p50']:>8} {row['wall_ms_p90']:>8} "
                     f"{row['wall_ms_max']:>8} {row['cpu_ms_p50']:>8} {row['html_kb']:>7}")
    lines += ["", f"{'open tabs':<10} {'enqueued/s':>11} {'Redis cmds/s':>13} {'docs/tab/s':>11}"]
    for row in result["live"]:
        docs = "-" if row["documents_per_tab_per_s"] is None else row["documents_per_tab_per_s"]
        lines.append(f"{row['tabs']:<10} {row['enqueued_per_s']:>11} "
                     f"{row['redis_commands_per_s']:>13} {docs:>11}")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--queues", type=int, default=100)
    parser.add_argument("--tasks", type=int, default=1_000_000)
    parser.add_argument("--renders", type=int, default=20)
    parser.add_argument("--live-seconds", type=float, default=10.0)
    parser.add_argument("--live-rate", type=int, default=200, help="tasks enqueued a second")
    parser.add_argument("--no-save", action="store_true")
    args = parser.parse_args()
    result = asyncio.run(measure(args.queues, args.tasks, args.renders, args.live_seconds,
                                 args.live_rate))
    print(table(result))
    if not args.no_save:
        save_result("web", result)


if __name__ == "__main__":
    main()
