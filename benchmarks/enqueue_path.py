"""What one ``Client.enqueue`` costs the producer's process, against a bare redis-py EVALSHA.

    .venv/bin/python -m benchmarks.enqueue_path [--ref REF ...] [--rounds 3] [--calls 3000]
                                                [--lean] [--profile] [--no-save]

On its own loopback ``redis-server`` (``benchmarks/_redis.py``, never 6379), each round runs,
one after the other (interleaved, so drift in the machine's load hits every row alike):

* ``Client.enqueue`` of every source measured: the working tree, then each ``--ref`` (any
  commit, e.g. the merge base: its ``asyncq/`` copied out of git into a temporary directory put
  first on ``PYTHONPATH``; the venv's dependencies are the same for all): ``await
  client.enqueue("noop", {"i": i})`` one awaited call at a time (sequential), then from 100
  concurrent producers;
* ``redis-py EVALSHA``: ``await Redis.evalsha(...)`` of a one-key script with a message-sized
  argument, sequential and 100 concurrent (the same for every source: measured once a round);
* with ``--lean``, ``lean EVALSHA``: that call packed and sent on the working tree's lean
  connection (``LeanPool.submit``), what an enqueue costs without any Python of its own.

Each row runs in a fresh interpreter (warmed up first: connections open, queue registered);
reported are the median calls per second and CPU microseconds of that process per call
(``time.process_time``: steadier than throughput on a shared machine). ``--profile`` adds a
cProfile of the 100-producer run of each source: its asyncq functions by own time, in µs per
enqueue, and how many Python function calls one enqueue makes (the event loop's included: a
count, steady however loaded the machine is, unlike the times). Prints a table and saves
``benchmarks/results/enqueue_path-<UTC time>.json`` with the machine, date and commits.
Not a test: nothing here asserts a speed.
"""

from __future__ import annotations

import argparse
import asyncio
import cProfile
import hashlib
import io
import json
import os
import pstats
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

from benchmarks.startup import copy_source

ROOT = Path(__file__).resolve().parents[1]
PRODUCERS = 100
SCRIPT = "return redis.call('INCR', KEYS[1]) + #ARGV[1]"
SHA = hashlib.sha1(SCRIPT.encode()).hexdigest()
ARG = "x" * 200  # about the size of an enqueue's task message
BARE = "redis-py EVALSHA"
LEAN = "lean EVALSHA"

Call = Callable[[int], Awaitable[Any]]


# -- the child: one row measured in a fresh interpreter


async def _timed(call: Call, calls: int, producers: int) -> tuple[float, float]:
    """Calls per second and CPU µs per call of ``calls`` calls from ``producers`` coroutines,
    each awaiting one call at a time."""
    each = calls // producers

    async def produce(base: int) -> None:
        for i in range(base, base + each):
            await call(i)

    wall, cpu = time.perf_counter(), time.process_time()
    if producers == 1:
        await produce(0)
    else:
        await asyncio.gather(*(produce(p * each) for p in range(producers)))
    wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
    done = each * producers
    return done / wall, cpu / done * 1e6


def _profile_text(prof: cProfile.Profile, calls: int, top: int) -> str:
    """The asyncq functions of ``prof`` by own time, in µs per call (of ``calls``)."""
    stats = pstats.Stats(prof)
    rows = []
    for (file, line, fn), (_, ncalls, tottime, cumtime, _) in stats.stats.items():  # type: ignore[attr-defined]
        if "/asyncq/" in file:
            short = file.split("/asyncq/", 1)[1]
            rows.append((tottime, cumtime, ncalls, f"{short}:{line}:{fn}"))
    rows.sort(reverse=True)
    total = sum(r[0] for r in rows)
    out = io.StringIO()
    out.write(f"  asyncq own time {total / calls * 1e6:.1f} us/enqueue "
              f"(cProfile inflates it); Python function calls per enqueue, the event loop's "
              f"included: {stats.total_calls / calls:.1f} (deterministic: a steady figure "  # type: ignore[attr-defined]
              f"on a loaded machine)\n"
              f"  {'own us':>7}{'cum us':>8}{'calls/enq':>10}  function\n")
    for tottime, cumtime, ncalls, name in rows[:top]:
        out.write(f"  {tottime / calls * 1e6:>7.2f}{cumtime / calls * 1e6:>8.2f}"
                  f"{ncalls / calls:>10.2f}  {name}\n")
    return out.getvalue()


async def _child(url: str, what: str, calls: int, profile: bool, top: int) -> dict[str, Any]:
    out: dict[str, Any] = {}
    if what == "bare":
        from redis.asyncio import Redis

        r = Redis.from_url(url, max_connections=PRODUCERS)
        await r.script_load(SCRIPT)

        async def bare(i: int) -> Any:
            return await r.evalsha(SHA, 1, "asyncq:bench:evalsha", ARG)

        call: Call = bare
        close: Callable[[], Awaitable[None]] = r.aclose
    elif what == "lean":
        from redis.asyncio import Redis

        from asyncq._broker._lean import LeanPool
        from asyncq._broker._lean_settings import lean_settings
        from asyncq._broker._resp import pack

        r = Redis.from_url(url)
        await r.script_load(SCRIPT)
        settings = lean_settings(r)
        assert settings is not None
        pool = LeanPool(settings)
        command = pack(("EVALSHA", SHA, 1, "asyncq:bench:evalsha", ARG))

        async def lean(i: int) -> Any:
            return await pool.submit(command)

        async def close_lean() -> None:
            await pool.aclose()
            await r.aclose()

        call, close = lean, close_lean
    else:
        import asyncq
        from asyncq import Client

        client = Client(url)
        out["asyncq_file"] = asyncq.__file__

        async def enqueue(i: int) -> Any:
            return await client.enqueue("noop", {"i": i})

        call, close = enqueue, client.close
    try:
        await _timed(call, 300, 1)  # warm-up: connections made, queue checked, paths hot
        await _timed(call, 3 * PRODUCERS, PRODUCERS)
        out["sequential"] = await _timed(call, calls, 1)
        out["producers"] = await _timed(call, calls * 3, PRODUCERS)
        if profile and what == "client":
            prof = cProfile.Profile()
            prof.enable()
            await _timed(call, calls, PRODUCERS)
            prof.disable()
            out["profile"] = _profile_text(prof, calls, top)
    finally:
        await close()
    return out


# -- the parent: sources, rounds, table




def run_child(source: Path | None, url: str, what: str, calls: int, profile: bool,
              top: int) -> dict[str, Any]:
    """One row measured in a fresh interpreter with ``source`` first on the path."""
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(source) if source else "", str(ROOT))
                                        if p)
    argv = [sys.executable, "-m", "benchmarks.enqueue_path", "--child", what, "--url", url,
            "--calls", str(calls), "--top", str(top)] + (["--profile"] if profile else [])
    done = subprocess.run(argv, env=env, cwd=source or ROOT, capture_output=True, text=True,
                          timeout=600)
    if done.returncode:
        raise RuntimeError(f"child {what} failed:\n{done.stderr}")
    result: dict[str, Any] = json.loads(done.stdout.splitlines()[-1])
    used = result.pop("asyncq_file", None)
    if source is not None and used is not None and not Path(used).is_relative_to(source):
        raise RuntimeError(f"the child imported {used}, not the copy in {source}")
    return result


def machine() -> dict[str, Any]:
    import platform

    import hiredis
    import redis

    model = next((line.split(":", 1)[1].strip() for line in
                  Path("/proc/cpuinfo").read_text().splitlines()
                  if line.startswith("model name")), platform.processor())
    version = subprocess.run(["redis-server", "--version"], capture_output=True, text=True,
                             check=False).stdout.strip()
    return {"cpu": model, "cores": os.cpu_count(), "os": platform.platform(),
            "python": platform.python_version(), "redis_py": redis.__version__,
            "hiredis": hiredis.__version__, "redis_server": version,
            "load_avg": os.getloadavg(), "date": time.strftime("%Y-%m-%dT%H:%M:%SZ",
                                                               time.gmtime())}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--ref", action="append", default=[],
                        help="also measure this git ref (repeatable)")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--calls", type=int, default=3000,
                        help="calls per sequential run (3x that with 100 producers)")
    parser.add_argument("--profile", action="store_true",
                        help="cProfile the 100-producer run: asyncq's functions by own time")
    parser.add_argument("--top", type=int, default=25)
    parser.add_argument("--no-save", action="store_true")
    parser.add_argument("--no-tree", action="store_true", help="measure only the refs")
    parser.add_argument("--lean", action="store_true",
                        help="also measure the same EVALSHA on asyncq's lean connection (the "
                             "working tree's): the floor under Client.enqueue")
    parser.add_argument("--child", choices=("client", "bare", "lean"), help=argparse.SUPPRESS)
    parser.add_argument("--url", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        print(json.dumps(asyncio.run(_child(args.url, args.child, args.calls, args.profile,
                                            args.top))))
        return

    from benchmarks._redis import RedisServer, command
    from benchmarks._results import save_result

    tmp = Path(tempfile.mkdtemp(prefix="asyncq-enqpath-"))
    try:
        sources: dict[str, tuple[Path, dict[str, Any]]] = {}
        refs: list[str | None] = ([] if args.no_tree else [None]) + args.ref
        for i, ref in enumerate(refs):
            where = tmp / f"src{i}"
            where.mkdir()  # (tar extracts a ref into an existing directory)
            meta = copy_source(ref, where)
            sources[meta["ref"]] = (where, meta)
        samples: dict[str, list[dict[str, Any]]] = {}
        profiles: dict[str, str] = {}
        with RedisServer() as server:
            for rnd in range(args.rounds):
                rows: list[tuple[str, Path | None, str]] = [
                    (name, where, "client") for name, (where, _) in sources.items()]
                rows.append((BARE, None, "bare"))
                if args.lean:
                    rows.append((LEAN, None, "lean"))
                for name, where, what in rows:
                    command(server.port, "FLUSHALL")
                    profile = args.profile and rnd == args.rounds - 1
                    got = run_child(where, server.url, what, args.calls, profile, args.top)
                    if "profile" in got:
                        profiles[name] = got.pop("profile")
                    samples.setdefault(name, []).append(got)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)

    results = []
    for name, runs in samples.items():
        row: dict[str, Any] = {"row": name, "rounds": len(runs)}
        for mode in ("sequential", "producers"):
            row[mode] = {
                "calls_per_s": round(statistics.median(r[mode][0] for r in runs)),
                "cpu_us_per_call": round(statistics.median(r[mode][1] for r in runs), 1),
                "calls_per_s_all": [round(r[mode][0]) for r in runs],
                "cpu_us_all": [round(r[mode][1], 1) for r in runs]}
        results.append(row)
    bare = next(r for r in results if r["row"] == BARE)
    print(f"\n{'row':<22}{'':>4}{'sequential':>28}{'':>6}{f'{PRODUCERS} producers':>28}")
    print(f"{'':<26}{'calls/s':>10}{'x bare':>8}{'cpu us':>10}{'':>6}"
          f"{'calls/s':>10}{'x bare':>8}{'cpu us':>10}")
    for row in results:
        cells = []
        for mode in ("sequential", "producers"):
            m = row[mode]
            ratio = m["calls_per_s"] / bare[mode]["calls_per_s"]
            cells.append(f"{m['calls_per_s']:>10}{ratio:>8.2f}{m['cpu_us_per_call']:>10.1f}")
        label = row["row"] if row["row"] == BARE else f"{row['row']}"
        print(f"{label[:25]:<26}{cells[0]}{'':>6}{cells[1]}")
    for name, (_, meta) in sources.items():
        print(f"  {name}: {meta['commit'][:10]}{' (dirty)' if meta['dirty'] else ''}")
    for name, text in profiles.items():
        print(f"\ncProfile of 100 producers, {name}:\n{text}")
    if not args.no_save:
        save_result("enqueue_path", {
            "command": "python -m benchmarks.enqueue_path " + " ".join(sys.argv[1:]),
            "args": {k: v for k, v in vars(args).items() if k not in ("child", "url")},
            "machine": machine(), "sources": {n: m for n, (_, m) in sources.items()},
            "results": results, "profiles": profiles})


if __name__ == "__main__":
    main()
