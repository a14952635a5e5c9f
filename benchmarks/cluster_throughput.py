"""End-to-end throughput on a 3-master Redis Cluster vs a single Redis node, in one run.

    .venv/bin/python -m benchmarks.cluster_throughput [--tasks 100000] [--queues 6]
        [--workers 2] [--concurrency 100] [--no-save]

For each topology (a fresh single ``redis-server``; a fresh local 3-master cluster, queues
chosen so that each master holds the same number of them): enqueue ``--tasks`` no-op tasks with
``Client.enqueue_many`` spread over the queues (the enqueue rate is measured), then start
``--workers`` ``asyncq worker`` processes serving every queue and measure how fast they drain
them: the rate between 10 % and 90 % processed (start-up excluded) and the wall time until
every task ran. Prints a table and saves ``benchmarks/results/cluster-<UTC time>.json`` with
the command, versions and machine. Not a test: nothing here asserts a speed.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import platform
import subprocess
import sys
import time
import uuid
from pathlib import Path
from typing import Any

import redis
from redis.crc import key_slot

from asyncq import Client, ServeMux, Task
from asyncq._broker import _keys as K
from asyncq._broker._connection import connect
from asyncq._testing.redis_server import RedisServer
from benchmarks._results import save_result
from tests.topology.cluster import LocalCluster

ROOT = Path(__file__).resolve().parents[1]
BATCH = 5000

mux = ServeMux()


@mux.handler("noop")
async def noop(task: Task) -> None:
    return None


def spread_queues(count: int, cluster: LocalCluster | None) -> list[str]:
    """``count`` queue names; on a cluster, the same number on every master."""
    tag = uuid.uuid4().hex[:6]
    if cluster is None:
        return [f"bench-{tag}-{i}" for i in range(count)]
    masters = cluster.master_ports()
    per_master: dict[int, list[str]] = {port: [] for port in masters}
    i = 0
    while any(len(v) < count // len(masters) for v in per_master.values()):
        name = f"bench-{tag}-{i}"
        i += 1
        bucket = per_master[cluster.node_for_slot(key_slot(name.encode()))]
        if len(bucket) < count // len(masters):
            bucket.append(name)
    return [q for qs in per_master.values() for q in qs]


async def processed(client: Any, queues: list[str]) -> int:
    total = 0
    for q in queues:
        total += int(await client.get(K.queue_keys(q).processed) or 0)
    return total


async def run_one(name: str, url: str, queues: list[str], args: argparse.Namespace,
                  log_dir: Path) -> dict[str, Any]:
    n = args.tasks
    async with Client(url) as client:
        t0 = time.perf_counter()
        for start in range(0, n, BATCH):
            size = min(n, start + BATCH) - start
            # Each batch in contiguous blocks of one queue, as a producer filling its queues.
            batch = [Task("noop", queue=queues[i * len(queues) // size]) for i in range(size)]
            results = await client.enqueue_many(batch)
            assert not any(isinstance(r, Exception) for r in results), results[:3]
        enqueue_s = time.perf_counter() - t0
    admin, close = connect(url)
    procs = []
    try:
        command = [sys.executable, "-m", "asyncq", "worker",
                   "benchmarks.cluster_throughput:mux", "--redis-url", url,
                   "--concurrency", str(args.concurrency), "--log-level", "warning",
                   "--log-format", "json"]
        for q in queues:
            command += ["--queue", f"{q}=1"]
        t_start = time.perf_counter()
        for w in range(args.workers):
            with (log_dir / f"{name}-worker{w}.log").open("wb") as log:
                procs.append(await asyncio.create_subprocess_exec(
                    *command, cwd=ROOT, stdout=log, stderr=log))
        marks: dict[float, float] = {}
        while True:
            done = await processed(admin, queues)
            now = time.perf_counter()
            for frac in (0.1, 0.9):
                if frac not in marks and done >= frac * n:
                    marks[frac] = now
            if done >= n:
                break
            if now - t_start > 600:
                raise TimeoutError(f"{name}: {done}/{n} after 600 s")
            await asyncio.sleep(0.02)
        wall_s = time.perf_counter() - t_start
    finally:
        for proc in procs:
            proc.terminate()
        for proc in procs:
            await asyncio.wait_for(proc.wait(), timeout=30)
        await close()
    steady = 0.8 * n / (marks[0.9] - marks[0.1])
    return {"topology": name, "tasks": n, "queues": len(queues),
            "enqueue_per_s": round(n / enqueue_s), "drain_per_s_10_90": round(steady),
            "drain_wall_s_incl_startup": round(wall_s, 2)}


def machine() -> dict[str, Any]:
    cpu = ""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    version = subprocess.run(["redis-server", "--version"], capture_output=True, text=True,
                             check=False).stdout.strip()
    return {"cpu": cpu, "cores": os.cpu_count(), "os": platform.platform(),
            "python": platform.python_version(), "redis_py": redis.__version__,
            "redis_server": version, "load_avg": os.getloadavg()}


async def main(args: argparse.Namespace) -> list[dict[str, Any]]:
    log_dir = Path(os.environ.get("TMPDIR", "/tmp")) / f"asyncq-cluster-bench-{os.getpid()}"
    log_dir.mkdir(parents=True, exist_ok=True)
    print(f"worker logs in {log_dir}", file=sys.stderr)
    rows = []
    with RedisServer() as single:
        rows.append(await run_one("single node", single.url, spread_queues(args.queues, None),
                                  args, log_dir))
    with LocalCluster(masters=3) as cluster:
        rows.append(await run_one("cluster, 3 masters", cluster.url,
                                  spread_queues(args.queues, cluster), args, log_dir))
    return rows


def cli() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tasks", type=int, default=100_000)
    parser.add_argument("--queues", type=int, default=6)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--concurrency", type=int, default=100)
    parser.add_argument("--no-save", action="store_true")
    args = parser.parse_args()
    rows = asyncio.run(main(args))
    cols = list(rows[0])
    widths = [max(len(c), *(len(str(r[c])) for r in rows)) for c in cols]
    print("  ".join(c.ljust(w) for c, w in zip(cols, widths, strict=True)))
    for r in rows:
        print("  ".join(str(r[c]).ljust(w) for c, w in zip(cols, widths, strict=True)))
    if not args.no_save:
        save_result("cluster", {"command": sys.argv, "workers": args.workers,
                                "concurrency": args.concurrency, "machine": machine(),
                                "results": rows})


if __name__ == "__main__":
    cli()
