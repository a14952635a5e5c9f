"""What the lean connection (``asyncq._broker._lean``) gives the producer, against redis-py.

    .venv/bin/python -m benchmarks.lean_connection [--calls 4000] [--rounds 3] [--no-save]

On its own loopback ``redis-server`` (``benchmarks/_redis.py``), in one process and one run,
interleaved round by round so drift in the machine's load hits every row alike:

* ``redis-py EVALSHA``: ``await Redis.evalsha(...)`` of a one-key script;
* ``lean EVALSHA``: the same call packed by ``_resp.pack`` and sent on a ``LeanPool`` (skipped
  when the checked-out asyncq has none: run on main's merge base, only the other rows are
  measured);
* ``Client.enqueue``: asyncq's producer, one task per call, from a ``redis://`` URL;

each sequential (one awaited call at a time) and with 100 concurrent producers. Reported: the
median calls per second of ``--rounds`` rounds, and CPU time of this process per call. Prints a
table and saves ``benchmarks/results/lean_connection-<UTC time>.json`` with the machine, date
and commit. Not a test: nothing here asserts a speed.
"""

from __future__ import annotations

import argparse
import asyncio
import hashlib
import os
import platform
import statistics
import subprocess
import time
import uuid
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import hiredis
import redis
from redis.asyncio import Redis

from asyncq import Client
from asyncq._broker._resp import pack
from benchmarks._redis import RedisServer
from benchmarks._results import save_result

ROOT = Path(__file__).resolve().parents[1]
PRODUCERS = 100
SCRIPT = "return redis.call('INCR', KEYS[1]) + #ARGV[1]"
SHA = hashlib.sha1(SCRIPT.encode()).hexdigest()
KEY = "asyncq:bench:lean"
ARG = "x" * 200  # about the size of an enqueue's task message

Call = Callable[[], Awaitable[Any]]
Rig = tuple[Call, Callable[[], Awaitable[None]]]  # the call, and how to close what it uses


async def redis_py_rig(url: str) -> Rig:
    r = Redis.from_url(url, max_connections=PRODUCERS)
    await r.script_load(SCRIPT)

    async def call() -> Any:
        return await r.evalsha(SHA, 1, KEY, ARG)

    return call, r.aclose


async def lean_rig(url: str) -> Rig | None:
    try:
        from asyncq._broker._lean import LeanPool
        from asyncq._broker._lean_settings import lean_settings
    except ImportError:  # a commit from before the lean connection
        return None
    r = Redis.from_url(url)
    settings = lean_settings(r)
    assert settings is not None
    pool = LeanPool(settings)

    async def call() -> Any:
        return await pool.submit(pack(("EVALSHA", SHA, 1, KEY, ARG)))

    async def close() -> None:
        await pool.aclose()
        await r.aclose()

    return call, close


async def client_rig(url: str) -> Rig:
    client = Client(url)
    queue = f"bench-lean-{uuid.uuid4().hex[:6]}"
    payload = {"n": 1, "pad": "x" * 100}

    async def call() -> Any:
        return await client.enqueue("bench", payload, queue=queue)

    await call()  # the queue registered, its layout checked, scripts loaded
    return call, client.close


RIGS: dict[str, Callable[[str], Awaitable[Rig | None]]] = {
    "redis-py EVALSHA": redis_py_rig, "lean EVALSHA": lean_rig,
    "Client.enqueue": client_rig}


async def timed(call: Call, calls: int, producers: int) -> tuple[float, float]:
    """Calls per second and CPU microseconds per call, of ``calls`` calls made by
    ``producers`` coroutines each awaiting one call at a time."""
    each = calls // producers

    async def produce() -> None:
        for _ in range(each):
            await call()

    wall, cpu = time.perf_counter(), time.process_time()
    if producers == 1:
        await produce()
    else:
        await asyncio.gather(*(produce() for _ in range(producers)))
    wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
    done = each * producers
    return done / wall, cpu / done * 1e6


async def measure(url: str, calls: int, rounds: int) -> list[dict[str, Any]]:
    rigs: dict[str, Rig] = {}
    for name, make in RIGS.items():
        rig = await make(url)
        if rig is not None:
            rigs[name] = rig
    samples: dict[tuple[str, int], list[tuple[float, float]]] = {}
    try:
        for call, _ in rigs.values():  # warm-up: connections made, code paths hot
            await timed(call, 200, 1)
            await timed(call, 2 * PRODUCERS, PRODUCERS)
        for _ in range(rounds):
            for producers in (1, PRODUCERS):
                for name, (call, _) in rigs.items():
                    n = calls if producers == 1 else calls * 5
                    samples.setdefault((name, producers), []).append(
                        await timed(call, n, producers))
    finally:
        for _, close in rigs.values():
            await close()
    rows = []
    for (name, producers), values in samples.items():
        rows.append({"row": name, "producers": producers, "rounds": len(values),
                     "calls_per_s": round(statistics.median(v for v, _ in values)),
                     "calls_per_s_all": [round(v) for v, _ in values],
                     "cpu_us_per_call": round(statistics.median(c for _, c in values), 1)})
    return rows


def machine() -> dict[str, Any]:
    def out(*cmd: str) -> str:
        return subprocess.run(cmd, capture_output=True, text=True, check=False,
                              cwd=ROOT).stdout.strip()

    model = next((line.split(":", 1)[1].strip() for line in
                  Path("/proc/cpuinfo").read_text().splitlines()
                  if line.startswith("model name")), platform.processor())
    return {"cpu": model, "cores": os.cpu_count(), "os": platform.platform(),
            "python": platform.python_version(), "redis_py": redis.__version__,
            "hiredis": hiredis.__version__, "redis_server": out("redis-server", "--version"),
            "load_avg": os.getloadavg(), "date": datetime.now(UTC).isoformat(),
            "commit": out("git", "rev-parse", "HEAD"),
            "dirty": bool(out("git", "status", "--porcelain", "--", "asyncq"))}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--calls", type=int, default=4000,
                        help="calls per sequential round (5x that with 100 producers)")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--no-save", action="store_true")
    args = parser.parse_args()
    with RedisServer() as server:
        rows = asyncio.run(measure(server.url, args.calls, args.rounds))
    base = {r["producers"]: r["calls_per_s"] for r in rows if r["row"] == "redis-py EVALSHA"}
    print(f"{'row':<20}{'producers':>10}{'calls/s':>10}{'x redis-py':>12}{'cpu us/call':>13}")
    for row in rows:
        ratio = row["calls_per_s"] / base[row["producers"]]
        print(f"{row['row']:<20}{row['producers']:>10}{row['calls_per_s']:>10}"
              f"{ratio:>12.2f}{row['cpu_us_per_call']:>13.1f}")
    if not args.no_save:
        save_result("lean_connection", {"command": "python -m benchmarks.lean_connection",
                                        "args": vars(args), "machine": machine(),
                                        "results": rows})


if __name__ == "__main__":
    main()
