"""Idle pickup, taken apart: how long an idle asyncq worker takes from an enqueue to the start of
its handler, where that time goes, and what CPU one hand-off costs.

    .venv/bin/python -m benchmarks.pickup [--n 300] [--rounds 2] [--src A --src B] [--no-save]

A worker process (concurrency 100, one queue, as ``make bench``'s latency scenario) is left idle;
this process enqueues one task at a time, at a random moment 10-30 ms after the previous one
started, and the handler reports when it started. Each sample is split into stages by
timestamps (``time.monotonic``, one clock for every process on Linux):

* **enqueue**: the producer's ``enqueue`` call, until its reply (the hand-off was published
  inside it, by the store script);
* **read**: the worker's listener got the hand-off from its socket (the listener's own
  function is wrapped: only the stage boundary is added);
* **start**: the handler started.

CPU per hand-off is the worker's (and redis-server's) CPU time over the samples, less what the
same processes spend idle over the same time (heartbeats, polls), divided by the samples.

``--src`` runs the worker and producer of another asyncq source tree (a directory holding the
``asyncq`` package, e.g. from ``git archive``), so two versions can be compared in one run,
interleaved round by round. Not a test: nothing is asserted. JSON goes to
``benchmarks/results/pickup-<UTC time>.json``.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from benchmarks._redis import RedisServer
from benchmarks._results import save_result
from benchmarks.lean_connection import machine

ROOT = Path(__file__).resolve().parent.parent

# The worker process: asyncq's Worker on one queue, its listener's read wrapped to stamp the
# moment a hand-off left the socket; the handler sends (i, read, start) over UDP.
_WORKER = r"""
import asyncio, json, os, socket, sys, time, logging
import structlog
structlog.configure(wrapper_class=structlog.make_filtering_bound_logger(logging.WARNING))
import asyncq
from asyncq._broker import _listen

stamp = [0.0]
orig = _listen.Listeners.handoffs

async def handoffs(self, queues, owner):
    async for item in orig(self, queues, owner):
        stamp[0] = time.monotonic()
        yield item

_listen.Listeners.handoffs = handoffs
sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
addr = ("127.0.0.1", int(os.environ["PICKUP_UDP"]))
mux = asyncq.ServeMux()

@mux.handler("lat")
async def lat(task):
    now = time.monotonic()
    sock.sendto(json.dumps([task.json()["i"], stamp[0], now]).encode(), addr)

async def main():
    worker = asyncq.Worker(sys.argv[1], mux, concurrency=100, queues={sys.argv[2]: 1})
    await worker.run()

asyncio.run(main())
"""


class _Inbox(asyncio.DatagramProtocol):
    def __init__(self) -> None:
        self.waiters: dict[int, asyncio.Future[tuple[float, float]]] = {}

    def datagram_received(self, data: bytes, addr: Any) -> None:
        i, read, start = json.loads(data)
        fut = self.waiters.pop(i, None)
        if fut is not None and not fut.done():
            fut.set_result((read, start))


def _cpu(pid: int) -> float:
    """CPU seconds of process ``pid``'s threads so far (the scheduler's nanoseconds, finer than
    the clock ticks of ``/proc/<pid>/stat``)."""
    total = 0
    for task in Path(f"/proc/{pid}/task").iterdir():
        try:
            total += int((task / "schedstat").read_text().split()[0])
        except (OSError, IndexError, ValueError):  # a thread that just ended
            continue
    return total / 1e9


def _ticks(pid: int) -> tuple[float, float]:
    """User and system CPU seconds of process ``pid`` (clock ticks: coarse)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    tick = os.sysconf("SC_CLK_TCK")
    return int(fields[11]) / tick, int(fields[12]) / tick


def _pct(values: list[float], p: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(p / 100 * (len(ordered) - 1)))]


async def _round(src: str | None, url: str, redis_pid: int, n: int) -> dict[str, Any]:
    """One worker process and ``n`` samples with the asyncq of ``src`` (None: this checkout)."""
    env = dict(os.environ)
    path = [src] if src else [str(ROOT)]
    env["PYTHONPATH"] = os.pathsep.join(path + [p for p in [env.get("PYTHONPATH")] if p])
    loop = asyncio.get_running_loop()
    transport, inbox = await loop.create_datagram_endpoint(_Inbox, local_addr=("127.0.0.1", 0))
    env["PICKUP_UDP"] = str(transport.get_extra_info("sockname")[1])
    queue = f"pick{random.randrange(1 << 30)}"
    proc = subprocess.Popen(  # noqa: ASYNC220 (once per round, before any timing)
        [sys.executable, "-c", _WORKER, url, queue], env=env, stdin=subprocess.DEVNULL)
    # The producer imports the same asyncq as the worker.
    sys.path.insert(0, path[0])
    for name in [m for m in sys.modules if m == "asyncq" or m.startswith("asyncq.")]:
        del sys.modules[name]
    import asyncq
    sys.path.pop(0)
    client = asyncq.Client(url)
    try:
        async def one(i: int) -> tuple[float, float, float, float]:
            fut = inbox.waiters[i] = loop.create_future()
            t0 = time.monotonic()
            await client.enqueue("lat", {"i": i}, queue=queue)
            t1 = time.monotonic()
            read, start = await asyncio.wait_for(fut, 30)
            return t0, t1, read, start

        await one(-1)  # the worker is up and subscribed
        for i in range(-20, -2):
            await one(i)
        await asyncio.sleep(1.0)
        # idle CPU over 2 s, to take off the samples' total
        c0, r0, w0 = _cpu(proc.pid), _cpu(redis_pid), time.monotonic()
        await asyncio.sleep(2.0)
        idle_w = (_cpu(proc.pid) - c0) / (time.monotonic() - w0)
        idle_r = (_cpu(redis_pid) - r0) / (time.monotonic() - w0)
        samples = []
        c0, r0, w0 = _cpu(proc.pid), _cpu(redis_pid), time.monotonic()
        u0, s0 = _ticks(proc.pid)
        for i in range(n):
            await asyncio.sleep(random.uniform(0.01, 0.03))
            samples.append(await one(i))
        wall = time.monotonic() - w0
        worker_cpu = (_cpu(proc.pid) - c0 - idle_w * wall) / n
        u1, s1 = _ticks(proc.pid)
        print(f"  worker user {(u1 - u0) / n * 1e6:.0f} µs, system {(s1 - s0) / n * 1e6:.0f} µs"
              f" per hand-off (idle not taken off); idle {idle_w * 1e3:.1f} ms/s")
        redis_cpu = (_cpu(redis_pid) - r0 - idle_r * wall) / n
    finally:
        await client.close()
        transport.close()
        proc.terminate()
        proc.wait(10)
    total = [(s[3] - s[0]) * 1000 for s in samples]
    enqueue = [(s[1] - s[0]) * 1000 for s in samples]
    read = [(s[2] - s[0]) * 1000 for s in samples]
    start = [(s[3] - s[2]) * 1000 for s in samples]
    return {"src": src or "checkout", "n": n,
            "p50_ms": _pct(total, 50), "p90_ms": _pct(total, 90), "p99_ms": _pct(total, 99),
            "max_ms": max(total), "enqueue_p50_ms": _pct(enqueue, 50),
            "read_p50_ms": _pct(read, 50), "read_p99_ms": _pct(read, 99),
            "read_to_start_p50_ms": _pct(start, 50), "read_to_start_p99_ms": _pct(start, 99),
            "worker_cpu_us": worker_cpu * 1e6, "redis_cpu_us": redis_cpu * 1e6}


async def main_async(args: argparse.Namespace) -> dict[str, Any]:
    rounds: list[dict[str, Any]] = []
    sources: list[str | None] = args.src or [None]
    with RedisServer() as server:
        for r in range(args.rounds):
            order = sources if r % 2 == 0 else sources[::-1]
            for src in order:
                assert server.proc is not None
                res = await _round(src, server.url, server.proc.pid, args.n)
                rounds.append(res)
                print(f"[{res['src']}] p50 {res['p50_ms']:.3f} p90 {res['p90_ms']:.3f} "
                      f"p99 {res['p99_ms']:.3f} ms | enqueue {res['enqueue_p50_ms']:.3f}, "
                      f"read {res['read_p50_ms']:.3f} (p99 {res['read_p99_ms']:.3f}), "
                      f"read->start {res['read_to_start_p50_ms']:.3f} "
                      f"(p99 {res['read_to_start_p99_ms']:.3f}) | CPU/hand-off worker "
                      f"{res['worker_cpu_us']:.0f} µs, redis {res['redis_cpu_us']:.0f} µs",
                      flush=True)
    summary = {}
    for src in sources:
        mine = [r for r in rounds if r["src"] == (src or "checkout")]
        summary[src or "checkout"] = {
            key: statistics.median(r[key] for r in mine)
            for key in ("p50_ms", "p99_ms", "read_to_start_p50_ms", "worker_cpu_us",
                        "redis_cpu_us")}
    print(json.dumps(summary, indent=1))
    return {"command": sys.argv, "machine": machine(), "rounds": rounds, "summary": summary}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--n", type=int, default=300, help="samples per round")
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--src", action="append",
                        help="an asyncq source tree to run (repeat to compare; default: this "
                             "checkout)")
    parser.add_argument("--no-save", action="store_true")
    args = parser.parse_args()
    doc = asyncio.run(main_async(args))
    if not args.no_save:
        save_result("pickup", doc)


if __name__ == "__main__":
    main()
