"""CPU-bound handlers: a process pool against threads against one at a time, in one worker.

    .venv/bin/python -m benchmarks.cpu_bound [--tasks 8] [--seconds 0.5] [--rounds 3] [--no-save]

On a fresh loopback ``redis-server``, one in-process worker runs ``--tasks`` CPU-bound tasks
(a pure-Python loop calibrated to take about ``--seconds`` alone), enqueued at once, per
variant, variants alternating, for ``--rounds`` rounds:

* ``serial``: a plain ``def`` handler, concurrency 1 (one at a time);
* ``threads``: the same handler, concurrency tasks + 1 (a thread each: the GIL serialises
  them);
* ``processes``: the same handler with ``isolate="process"``, concurrency tasks + 1, the pool
  sized to the cores (the children are started by a warm-up batch before timing).

While the batch runs, an async ``ping`` task is enqueued every 50 ms; its latency (enqueued to
handler started) says whether the event loop kept serving I/O tasks (with ``serial`` a ping
waits for the one slot, so there it is queueing time). Each round also notes how many cores
other work on the machine took meanwhile (Linux: ``/proc/stat`` minus this process and the CPU
time the handlers report): a 2-core speed-up needs 2 free cores.

Then the kill-to-replaced time of the pool: a child spinning in ``while True`` is abandoned
(as at its time limit) and the time until a fresh child has answered the next task is
measured — for a handler that exits on SIGTERM, and for one that ignores it (SIGKILL after
the kill grace, 0.2 s here).
Prints a table and saves ``benchmarks/results/cpu_bound-<UTC time>.json``. Not a test.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import platform
import statistics
import time
from typing import Any

from asyncq import Client, ServeMux, Task, TaskInfo, Worker, configure_logging
from asyncq._worker._procpool import ProcessPool, handler_ref, start_method

VARIANTS = ("serial", "threads", "processes")
KILL_GRACE = 0.2


def crunch(task: Task) -> float:
    """The CPU-bound handler: ``n`` rounds of integer arithmetic (no I/O, holds the GIL);
    returns the CPU seconds its thread spent."""
    began = time.thread_time()
    total = 0
    for i in range(task.json()):
        total = (total + i * i) % 1_000_003
    return time.thread_time() - began + total * 0


def spin(task: Task) -> None:
    while True:
        pass


def spin_ignoring_sigterm(task: Task) -> None:
    while True:
        try:
            while True:
                pass
        except SystemExit:  # (the child's SIGTERM handler raises it): keep spinning
            continue


def pid(task: Task) -> int:
    return os.getpid()


def calibrate(seconds: float) -> int:
    """Loop rounds that take about ``seconds`` in this process."""
    n = 200_000
    while True:
        began = time.perf_counter()
        crunch(Task("c", n))
        took = time.perf_counter() - began
        if took > 0.1:
            return int(n * seconds / took)
        n *= 4


def mux_for(variant: str, pings: list[float]) -> ServeMux:
    mux = ServeMux()
    mux.handle("crunch", crunch, isolate="process" if variant == "processes" else None)

    @mux.handler("ping")
    async def ping(task: Task) -> None:
        pings.append(time.time() - task.json())

    return mux


def machine_busy() -> float:
    """CPU seconds every core of this machine has spent busy so far (Linux ``/proc/stat``;
    0 elsewhere): with our own CPU time, says how much other work competed for the cores."""
    try:
        with open("/proc/stat") as stat:
            fields = [int(x) for x in stat.readline().split()[1:]]
    except OSError:
        return 0.0
    idle = fields[3] + fields[4]  # idle + iowait
    return (sum(fields[:8]) - idle) / os.sysconf("SC_CLK_TCK")


def own_cpu() -> float:
    """CPU seconds of this process (its threads included)."""
    t = os.times()
    return t.user + t.system


async def batch(url: str, queue: str, variant: str, tasks: int, n: int,
                cores: int) -> dict[str, Any]:
    from asyncq.testing import wait_until  # (not at the top: the children import this module)
    pings: list[float] = []
    concurrency = 1 if variant == "serial" else tasks + 1
    async with Client(url) as client, Worker(
            url, mux_for(variant, pings), queues={queue: 1}, concurrency=concurrency,
            sync_threads=tasks, process_pool_size=cores):
        warm = [await client.enqueue("crunch", 1000, queue=queue, retention=60)
                for _ in range(cores)]
        for info in warm:
            await client.result(info.id, queue=queue, timeout=60)
        busy0, own0 = machine_busy(), own_cpu()
        began = time.perf_counter()
        infos = [i for i in await client.enqueue_many(
            Task("crunch", n, queue=queue, retention=60) for _ in range(tasks))
            if isinstance(i, TaskInfo)]
        results = asyncio.gather(*(client.result(i.id, queue=queue, timeout=600)
                                   for i in infos))
        sent = 0
        while not results.done():
            await client.enqueue("ping", time.time(), queue=queue)
            sent += 1
            await asyncio.wait([results], timeout=0.05)
        cpu = await results
        seconds = time.perf_counter() - began
        busy1, own = machine_busy(), own_cpu() - own0
        if variant == "processes":  # (children are the fork server's: not in os.times)
            own += sum(cpu)
        await wait_until(lambda: len(pings) >= sent, timeout=30, message="pings served")
    others = max(0.0, busy1 - busy0 - own) / seconds if busy1 else None
    return {"seconds": seconds, "ping_ms": [p * 1000 for p in pings],
            "other_load_cores": others}


async def kill_to_replaced(handler: Any) -> float:
    """Seconds from abandoning a run of ``handler`` to a fresh child answering a task."""
    pool = ProcessPool(1, kill_grace=KILL_GRACE)
    meta = {"type": "t", "id": "x", "queue": "q", "enc": "n", "headers": {}, "max_retry": 0,
            "retried": 0, "deadline_ms": 0, "soft_after": 0}
    try:
        first = await pool.run(handler_ref(pid, "pid"), b"", meta)
        hung = asyncio.ensure_future(pool.run(handler_ref(handler, "spin"), b"", meta))
        await asyncio.sleep(0.3)
        began = time.perf_counter()
        hung.cancel()
        second = await pool.run(handler_ref(pid, "pid"), b"", meta)
        took = time.perf_counter() - began
        assert first != second, "the child was not replaced"
        return took
    finally:
        await pool.close()


async def run(tasks: int, seconds: float, rounds: int) -> dict[str, Any]:
    from asyncq._testing.redis_server import RedisServer
    cores = os.cpu_count() or 1
    n = calibrate(seconds)
    runs: dict[str, list[dict[str, Any]]] = {v: [] for v in VARIANTS}
    with RedisServer() as server:
        for r in range(rounds):
            for v in VARIANTS:
                runs[v].append(await batch(server.url, f"cpu-{r}-{v}", v, tasks, n, cores))
    kills = {"exits on SIGTERM": [await kill_to_replaced(spin) for _ in range(5)],
             "ignores SIGTERM": [await kill_to_replaced(spin_ignoring_sigterm)
                                 for _ in range(5)]}
    serial = statistics.median(x["seconds"] for x in runs["serial"])
    out: dict[str, Any] = {}
    for v, rs in runs.items():
        secs = statistics.median(x["seconds"] for x in rs)
        pings = sorted(p for x in rs for p in x["ping_ms"])
        out[v] = {"seconds": secs, "vs_serial": secs / serial,
                  "ping_median_ms": statistics.median(pings) if pings else None,
                  "ping_max_ms": pings[-1] if pings else None, "pings": len(pings),
                  "other_load_cores": [x["other_load_cores"] for x in rs],
                  "runs": [x["seconds"] for x in rs]}
    return {"tasks": tasks, "seconds_per_task": seconds, "loop_rounds": n, "rounds": rounds,
            "pool_size": cores, "variants": out,
            "kill_to_replaced_ms": {k: {"median": statistics.median(v) * 1000,
                                        "max": max(v) * 1000} for k, v in kills.items()},
            "kill_grace_s": KILL_GRACE, "start_method": start_method(),
            "machine": {"python": platform.python_version(), "cpus": cores,
                        "loadavg": os.getloadavg(), "platform": platform.platform()}}


def table(doc: dict[str, Any]) -> str:
    lines = [f"{doc['tasks']} CPU tasks of ~{doc['seconds_per_task']} s on {doc['pool_size']} "
             f"cores, one worker (median of {doc['rounds']} rounds)", "",
             "| variant | wall s | vs serial | I/O ping latency median ms | max ms | "
             "cores taken by other work, per round |",
             "|---|---:|---:|---:|---:|---|"]
    for name, row in doc["variants"].items():
        med = row["ping_median_ms"]
        top = row["ping_max_ms"]
        lines.append(f"| {name} | {row['seconds']:.2f} | {row['vs_serial']:.2f} | "
                     f"{'-' if med is None else f'{med:.1f}'} | "
                     f"{'-' if top is None else f'{top:.1f}'} | "
                     f"{' '.join(_cores(x) for x in row['other_load_cores'])} |")
    lines += ["", f"kill-to-replaced ({doc['start_method']}, kill grace "
              f"{doc['kill_grace_s']} s): abandon a spinning child until a fresh one answered",
              "", "| handler | median ms | max ms |", "|---|---:|---:|"]
    for name, row in doc["kill_to_replaced_ms"].items():
        lines.append(f"| {name} | {row['median']:.0f} | {row['max']:.0f} |")
    return "\n".join(lines)


def _cores(x: float | None) -> str:
    return "-" if x is None else f"{x:.2f}"


def main() -> None:
    p = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    p.add_argument("--tasks", type=int, default=8)
    p.add_argument("--seconds", type=float, default=0.5)
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--no-save", action="store_true")
    args = p.parse_args()
    configure_logging("warning")
    doc = asyncio.run(run(args.tasks, args.seconds, args.rounds))
    print(table(doc))
    if not args.no_save:
        from benchmarks._results import save_result
        save_result("cpu_bound", doc)


if __name__ == "__main__":
    main()
