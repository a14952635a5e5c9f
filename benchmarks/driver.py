"""Scenario driver: ``python -m benchmarks.driver --lib NAME --scenario S ...``.

Runs inside the library's own venv (started by the orchestrator, ``python -m benchmarks``),
plays the producer, starts the worker as a separate OS process (``benchmarks.worker``), watches it
through the UDP probe (see ``_probe``) and psutil, and prints one JSON line prefixed ``RESULT ``.
Every scenario has a deadline: when it passes, whatever was measured so far is reported with
``status: "timeout"``. The worker is always stopped (SIGTERM, then SIGKILL) before exiting.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import itertools
import json
import math
import os
import random
import signal
import subprocess
import sys
import time
import traceback
from collections.abc import Awaitable, Callable, Iterator
from pathlib import Path
from typing import Any

import psutil
import redis.asyncio as aioredis

from benchmarks.adapters import SLEEP_S, load, run_loop

ROOT = Path(__file__).resolve().parent.parent
BULK_CHUNK = 1000
ENQUEUE_CONCURRENCY = 100
WARMUP = 100
SETTLE_S = 1.0
BLOCKS = 5  # bare EVALSHA and library calls alternate in this many blocks


class Timeout(Exception):
    """The scenario's deadline passed."""


# --------------------------------------------------------------------------- probe listener

class _Listener(asyncio.DatagramProtocol):
    def __init__(self) -> None:
        self.snap: dict[str, Any] = {"n": 0, "distinct": 0, "over": 0, "out_of_range": 0,
                                     "t_first": 0.0, "t_last": 0.0}
        self.hello = asyncio.Event()
        self.lat: dict[int, float] = {}
        self.waiters: dict[int, asyncio.Future[float]] = {}

    def datagram_received(self, data: bytes, addr: Any) -> None:
        msg = json.loads(data)
        if "lat" in msg:
            i, t = msg["lat"], msg["t"]
            self.lat.setdefault(i, t)
            fut = self.waiters.pop(i, None)
            if fut is not None and not fut.done():
                fut.set_result(t)
        elif "hello" in msg:
            self.hello.set()
        elif msg.get("n", 0) >= self.snap.get("n", 0):
            self.snap = msg


# --------------------------------------------------------------------------- helpers

def pct(values: list[float], q: float) -> float:
    """Nearest-rank percentile (q in 0..100) of a non-empty list."""
    s = sorted(values)
    k = max(1, math.ceil(q / 100 * len(s)))
    return s[k - 1]


def chunks(n: int, size: int) -> Iterator[range]:
    for start in range(0, n, size):
        yield range(start, min(start + size, n))


class Driver:
    def __init__(self, args: argparse.Namespace) -> None:
        self.args = args
        self.lib: str = args.lib
        self.url: str = args.url
        self.deadline = time.monotonic() + args.deadline
        self.adapter = load(self.lib)()
        self.listener: _Listener | None = None
        self.udp_port = 0
        self.proc: subprocess.Popen[bytes] | None = None
        self.profiler: subprocess.Popen[bytes] | None = None
        self.ps: psutil.Process | None = None
        self.redis = aioredis.Redis.from_url(self.url)
        self.result: dict[str, Any] = {"lib": self.lib, "scenario": args.scenario, "n": args.n,
                                       "concurrency": args.concurrency, "status": "ok",
                                       "notes": self.adapter.NOTES}

    def left(self) -> float:
        return self.deadline - time.monotonic()

    def check_deadline(self, what: str) -> None:
        if self.left() <= 0:
            raise Timeout(what)

    async def start_udp(self) -> None:
        loop = asyncio.get_running_loop()
        transport, proto = await loop.create_datagram_endpoint(
            _Listener, local_addr=("127.0.0.1", 0))
        self.listener = proto
        self.udp_port = transport.get_extra_info("sockname")[1]

    # ---------------------------------------------------------------- worker process

    def spawn_worker(self, expected: int) -> None:
        env = {**os.environ, "BENCH_N": str(expected), "BENCH_UDP_PORT": str(self.udp_port),
               "BENCH_REDIS_URL": self.url, "BENCH_CONCURRENCY": str(self.args.concurrency)}
        log_dir = Path(self.args.log_dir)
        log_dir.mkdir(parents=True, exist_ok=True)
        log = (log_dir / f"worker-{self.lib}-{self.args.scenario}.log").open("wb")
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "benchmarks.worker", "--lib", self.lib, "--url", self.url,
             "--concurrency", str(self.args.concurrency), "--loop", self.args.loop],
            cwd=ROOT, env=env, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT)
        log.close()
        self.ps = psutil.Process(self.proc.pid)
        self.result["worker_pid"] = self.proc.pid
        if self.args.profile:
            self.start_profiler(self.proc.pid)

    def start_profiler(self, pid: int) -> None:
        """Sample the worker with py-spy (non-blocking mode), collapsed stacks to a file."""
        pyspy = Path(sys.executable).parent / "py-spy"
        if not pyspy.exists():
            self.result["profile_error"] = "py-spy is not installed in this venv"
            return
        out = Path(self.args.profile)
        out.parent.mkdir(parents=True, exist_ok=True)
        log = out.with_suffix(".log").open("wb")
        self.profiler = subprocess.Popen(
            [str(pyspy), "record", "--pid", str(pid), "--rate", "250", "--nonblocking",
             "--idle", "--format", "raw", "-o", str(out)],
            stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT)
        log.close()
        self.result["profile_file"] = str(out)

    def worker_alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def worker_cpu(self) -> float:
        try:
            assert self.ps is not None
            t = self.ps.cpu_times()
            return float(t.user + t.system)
        except (psutil.Error, AssertionError):
            return float("nan")

    def worker_rss(self) -> int:
        try:
            assert self.ps is not None
            return int(self.ps.memory_info().rss)
        except (psutil.Error, AssertionError):
            return 0

    async def stop_worker(self) -> None:
        proc = self.proc
        if proc is None:
            return
        if proc.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                proc.send_signal(signal.SIGTERM)
            for _ in range(50):
                if proc.poll() is not None:
                    break
                await asyncio.sleep(0.1)
            if proc.poll() is None:
                with contextlib.suppress(ProcessLookupError):
                    proc.kill()
        proc.wait()
        self.result["worker_exit_code"] = proc.returncode
        if self.profiler is not None:  # py-spy writes its file when the worker is gone
            for _ in range(150):
                if self.profiler.poll() is not None:
                    break
                await asyncio.sleep(0.1)
            if self.profiler.poll() is None:
                self.profiler.terminate()
            self.profiler.wait()

    async def wait_hello(self) -> None:
        assert self.listener is not None
        while not self.listener.hello.is_set():
            if not self.worker_alive():
                raise RuntimeError("worker process exited before it started")
            self.check_deadline("worker start")
            await asyncio.sleep(0.02)

    async def redis_cpu(self) -> float:
        info = await self.redis.info("cpu")
        return float(info["used_cpu_user"]) + float(info["used_cpu_sys"])

    async def cpu_block(self, block: Awaitable[float], cpu: list[float]) -> float:
        """Await ``block`` (a timed run of library calls), adding this process's CPU and
        redis-server's CPU during it to ``cpu`` ([producer s, redis s]); its result."""
        p0, r0 = time.process_time(), await self.redis_cpu()
        dt = await block
        r1 = await self.redis_cpu()
        cpu[0] += time.process_time() - p0
        cpu[1] += r1 - r0
        return dt

    # ---------------------------------------------------------------- enqueue helpers

    async def enqueue_concurrent(self, kind: str, indices: range, budget: float) -> bool:
        """Enqueue with 100 coroutines; False when ``budget`` seconds ran out first."""
        it = iter(indices)
        enqueue = self.concurrent_enqueue()

        async def pump() -> None:
            for i in it:
                await enqueue(kind, i)

        tasks = [asyncio.create_task(pump()) for _ in range(ENQUEUE_CONCURRENCY)]
        try:
            await asyncio.wait_for(asyncio.gather(*tasks), timeout=max(budget, 0.01))
            return True
        except TimeoutError:
            return False
        finally:
            for t in tasks:
                t.cancel()

    def concurrent_enqueue(self) -> Callable[[str, int], Awaitable[None]]:
        """The call overlapping producers make: ``enqueue``, or for a library with only a
        blocking API the adapter's ``enqueue_concurrently`` (a thread pool)."""
        return getattr(self.adapter, "enqueue_concurrently", self.adapter.enqueue)

    async def bare_call(self) -> Callable[[], Awaitable[Any]]:
        """One bare redis-py ``EVALSHA`` of ``return 1`` (loaded and warmed up): the Redis
        ceiling seen from this process, with this venv's redis-py and loop."""
        r = self.redis
        sha = await r.script_load("return 1")
        for _ in range(WARMUP):
            await r.evalsha(sha, 0)
        return lambda: r.evalsha(sha, 0)

    @staticmethod
    async def sequential(call: Callable[[], Awaitable[Any]], n: int, lat: list[float]) -> float:
        """``call()`` ``n`` times one after another, each timed into ``lat``; seconds taken."""
        t0 = time.perf_counter()
        for _ in range(n):
            t = time.perf_counter()
            await call()
            lat.append(time.perf_counter() - t)
        return time.perf_counter() - t0

    async def concurrent(self, call: Callable[[], Awaitable[Any]], n: int,
                         lat: list[float]) -> float:
        """``n`` calls shared by 100 coroutines, each timed into ``lat``; seconds taken."""
        left = n

        async def pump() -> None:
            nonlocal left
            while left > 0:
                left -= 1
                t = time.perf_counter()
                await call()
                lat.append(time.perf_counter() - t)

        t0 = time.perf_counter()
        try:
            await asyncio.wait_for(asyncio.gather(*[pump() for _ in range(ENQUEUE_CONCURRENCY)]),
                                   timeout=max(self.left(), 0.01))
        except TimeoutError:
            raise Timeout(f"{ENQUEUE_CONCURRENCY} concurrent calls: {len(lat)} done") from None
        return time.perf_counter() - t0

    async def pipelined(self, n: int) -> float:
        """Bare EVALSHA pipelined 100 per round trip: ops/s."""
        r = self.redis
        sha = await r.script_load("return 1")
        rounds = max(1, n // ENQUEUE_CONCURRENCY)
        t0 = time.perf_counter()
        for _ in range(rounds):
            pipe = r.pipeline(transaction=False)
            for _ in range(ENQUEUE_CONCURRENCY):
                pipe.evalsha(sha, 0)
            await pipe.execute()
        return rounds * ENQUEUE_CONCURRENCY / (time.perf_counter() - t0)

    async def pre_enqueue(self, kind: str, n: int, budget: float | None = None,
                          ) -> dict[str, Any]:
        """Fill the queue with ``n`` tasks: the bulk API when there is one, else 100 concurrent
        single enqueues. Returns how, how long and the rate (informational). With ``budget``
        (seconds), enqueueing stops when it runs out and ``stored`` says how many made it."""
        limit = min(self.left(), budget if budget is not None else self.left())
        end = time.monotonic() + limit
        complete = True
        t0 = time.perf_counter()
        if self.adapter.HAS_BULK:
            method = f"bulk {self.adapter.BULK_API} x{BULK_CHUNK}"
            for idx in chunks(n, BULK_CHUNK):
                await self.adapter.enqueue_bulk(kind, idx)
                if time.monotonic() > end:
                    complete = idx.stop >= n
                    break
        else:
            method = f"{ENQUEUE_CONCURRENCY} concurrent single enqueues"
            complete = await self.enqueue_concurrent(kind, range(n), limit)
        dt = time.perf_counter() - t0
        if not complete:
            if budget is None:
                raise Timeout("pre-enqueue")
            await asyncio.sleep(0.3)  # let cancelled in-flight enqueues land before counting
        stored = await self.adapter.stored(self.redis)
        return {"method": method, "seconds": dt, "ops_s": stored / dt, "stored": stored,
                "requested": n, "complete": complete,
                "stored_ok": stored == n if complete else stored > 0}

    # ---------------------------------------------------------------- drain helpers

    async def wait_drained(self, n: int, sample: Callable[[], Awaitable[None]] | None = None,
                           budget_end: float | None = None) -> dict[str, Any]:
        """Wait until ``n`` executions were reported; with ``budget_end`` (monotonic time), stop
        early there and return the snapshot so far."""
        assert self.listener is not None
        while self.listener.snap["n"] < n:
            if budget_end is not None and time.monotonic() > budget_end:
                break
            if not self.worker_alive():
                raise RuntimeError(f"worker process exited (code {self.proc and self.proc.poll()})"
                                   f" after {self.listener.snap['n']}/{n} tasks")
            if self.left() <= 0:
                raise Timeout(f"drain: {self.listener.snap['n']}/{n} tasks done")
            if sample is not None:
                await sample()
                await asyncio.sleep(0.2)
            else:
                await asyncio.sleep(0.02)
        return dict(self.listener.snap)

    def exactly_once(self, snap: dict[str, Any], expected: int) -> dict[str, Any]:
        """``expected`` tasks ran, each exactly once (no duplicate, no unknown index)."""
        ok = (snap["n"] == expected and snap["distinct"] == expected and snap["over"] == 0
              and snap["out_of_range"] == 0)
        out = {"expected": expected, "executions": snap["n"], "distinct": snap["distinct"],
               "duplicates": snap["over"], "unknown": snap["out_of_range"], "ok": ok}
        self.result["exactly_once"] = out
        if not ok:
            self.result["status"] = "failed-check"
        return out

    async def settle(self) -> dict[str, Any]:
        """Give late duplicates a chance to show up, then return the latest snapshot."""
        assert self.listener is not None
        await asyncio.sleep(SETTLE_S)
        return dict(self.listener.snap)

    async def drain(self, kind: str, n: int) -> None:
        self.result["pre_enqueue"] = pre = await self.pre_enqueue(kind, n)
        await self.adapter.close()
        if not pre["stored_ok"]:
            self.result["status"] = "failed-check"
        spawn_wall = time.time()
        self.spawn_worker(n)
        await self.wait_hello()
        cpu0 = rcpu0 = None
        n0 = 0

        async def first_sample() -> None:
            nonlocal cpu0, rcpu0, n0
            assert self.listener is not None
            if cpu0 is None and self.listener.snap["n"] > 0:
                cpu0, rcpu0, n0 = self.worker_cpu(), await self.redis_cpu(), \
                    self.listener.snap["n"]

        while self.listener is not None and self.listener.snap["n"] == 0:
            if not self.worker_alive() or self.left() <= 0:
                break
            await asyncio.sleep(0.005)
        await first_sample()
        snap = await self.wait_drained(n)
        cpu1, rcpu1 = self.worker_cpu(), await self.redis_cpu()
        elapsed = snap["t_last"] - snap["t_first"]
        res = self.result
        res["seconds"] = elapsed
        res["tasks_s"] = n / elapsed if elapsed > 0 else None
        res["wall_from_spawn_s"] = snap["t_last"] - spawn_wall
        if cpu0 is not None and rcpu0 is not None and n > n0:
            res["worker_cpu_us_per_task"] = (cpu1 - cpu0) / (n - n0) * 1e6
            res["redis_cpu_us_per_task"] = (rcpu1 - rcpu0) / (n - n0) * 1e6
        if kind == "sleep":
            ideal = self.args.concurrency / SLEEP_S
            res["ideal_tasks_s"] = ideal
            res["pct_ideal"] = 100 * res["tasks_s"] / ideal if res["tasks_s"] else None
        self.exactly_once(await self.settle(), n)

    # ---------------------------------------------------------------- scenarios

    async def sc_enqueue(self) -> None:
        n = self.args.n
        a = self.adapter
        res = self.result
        bare = await self.bare_call()
        for i in range(WARMUP):  # connections, script loading
            await a.enqueue("noop", n + i)
        index = itertools.count()

        def enqueue() -> Awaitable[None]:
            return a.enqueue("noop", next(index))  # type: ignore[no-any-return]

        # Bare round trips and enqueues alternate in blocks, so a change of load on the machine
        # weighs on both alike.
        per = n // BLOCKS
        n = per * BLOCKS
        lat: list[float] = []
        bare_lat: list[float] = []
        dt = bare_dt = 0.0
        cpu = [0.0, 0.0]
        for _ in range(BLOCKS):
            bare_dt += await self.sequential(bare, per, bare_lat)
            dt += await self.cpu_block(self.sequential(enqueue, per, lat), cpu)
            self.check_deadline("single enqueue")
        res["bare_evalsha"] = {"script": "return 1", "single_ops_s": n / bare_dt,
                               "single_p50_ms": pct(bare_lat, 50) * 1000,
                               "single_p99_ms": pct(bare_lat, 99) * 1000}
        stored = await a.stored(self.redis)
        res["single"] = {"n": n, "seconds": dt, "ops_s": n / dt, "us_per_op": dt / n * 1e6,
                         "p50_ms": pct(lat, 50) * 1000, "p99_ms": pct(lat, 99) * 1000,
                         "stored": stored, "stored_ok": stored == n + WARMUP,
                         "vs_bare_evalsha": bare_dt / dt,
                         "client_cpu_us_per_task": cpu[0] / n * 1e6,
                         "redis_cpu_us_per_task": cpu[1] / n * 1e6}
        ok = stored == n + WARMUP
        if a.HAS_BULK:
            await self.redis.flushall()
            nb = self.args.n_bulk
            await a.enqueue_bulk("noop", range(nb, nb + WARMUP))
            t0 = time.perf_counter()
            for idx in chunks(nb, BULK_CHUNK):
                await a.enqueue_bulk("noop", idx)
                self.check_deadline("bulk enqueue")
            dt = time.perf_counter() - t0
            stored = await a.stored(self.redis)
            res["bulk"] = {"n": nb, "api": a.BULK_API, "chunk": BULK_CHUNK, "seconds": dt,
                           "ops_s": nb / dt, "stored": stored,
                           "stored_ok": stored == nb + WARMUP}
            ok = ok and stored == nb + WARMUP
        else:
            res["bulk"] = None
        res["stored_ok"] = ok
        if not ok:
            res["status"] = "failed-check"

    async def sc_producers(self) -> None:
        """100 coroutines enqueueing at once (a web app under load), next to the same
        coroutines making bare EVALSHA calls and to one caller alone, all in this process;
        bare and library measurements alternate in blocks."""
        n = self.args.n
        res = self.result
        per = n // BLOCKS
        n = per * BLOCKS
        n_lone = max(500, n // 10) // BLOCKS * BLOCKS
        a = self.adapter
        bare = await self.bare_call()
        conc_enqueue = self.concurrent_enqueue()
        res["api"] = getattr(a, "CONCURRENT_API", "enqueue from each coroutine")
        for i in range(WARMUP):
            await a.enqueue("noop", n + n_lone + i)
        await asyncio.gather(*[conc_enqueue("noop", n + n_lone + WARMUP + i)
                               for i in range(ENQUEUE_CONCURRENCY)])
        lone_index = itertools.count(n)
        index = itertools.count()

        def lone() -> Awaitable[None]:
            return a.enqueue("noop", next(lone_index))  # type: ignore[no-any-return]

        def overlapping() -> Awaitable[None]:
            return conc_enqueue("noop", next(index))

        lone_lat: list[float] = []
        bare_lone: list[float] = []
        lat: list[float] = []
        bare_lat: list[float] = []
        dt = bare_dt = bare_lone_dt = 0.0
        cpu = [0.0, 0.0]
        for _ in range(BLOCKS):
            bare_lone_dt += await self.sequential(bare, n_lone // BLOCKS, bare_lone)
            await self.sequential(lone, n_lone // BLOCKS, lone_lat)
            bare_dt += await self.concurrent(bare, per, bare_lat)
            dt += await self.cpu_block(self.concurrent(overlapping, per, lat), cpu)
        ms = 1000.0
        res["bare_evalsha"] = bare_res = {
            "script": "return 1", "single_ops_s": n_lone / bare_lone_dt,
            "single_p99_ms": pct(bare_lone, 99) * ms, "concurrent_ops_s": n / bare_dt,
            "concurrent_p50_ms": pct(bare_lat, 50) * ms,
            "concurrent_p99_ms": pct(bare_lat, 99) * ms,
            "pipelined_ops_s": await self.pipelined(n), "pipeline": ENQUEUE_CONCURRENCY}
        lone_p99 = pct(lone_lat, 99)
        res.update({
            "coroutines": ENQUEUE_CONCURRENCY, "ops_s": n / dt, "p50_ms": pct(lat, 50) * ms,
            "p99_ms": pct(lat, 99) * ms, "lone_p50_ms": pct(lone_lat, 50) * ms,
            "client_cpu_us_per_task": cpu[0] / n * 1e6, "redis_cpu_us_per_task": cpu[1] / n * 1e6,
            "lone_p99_ms": lone_p99 * ms, "vs_bare_evalsha": bare_dt / dt,
            "p99_vs_lone_p99": pct(lat, 99) / lone_p99,
            "p99_vs_bare_p99": pct(lat, 99) * ms / bare_res["concurrent_p99_ms"]})
        expected = n + n_lone + WARMUP + ENQUEUE_CONCURRENCY
        stored = await a.stored(self.redis)
        res.update({"stored": stored, "stored_ok": stored == expected})
        if stored != expected:
            res["status"] = "failed-check"

    async def sc_drain(self) -> None:
        await self.drain("noop", self.args.n)

    async def sc_drain_typed(self) -> None:
        """The no-op drain with the handler defined as a typed task (arguments decoded to
        their annotations): what typing costs per task, next to ``drain``."""
        if not getattr(self.adapter, "HAS_TYPED", False):
            self.result["status"] = "skipped"
            self.result["error"] = "no typed task definitions"
            return
        await self.drain("typed", self.args.n)

    async def sc_drain_call(self) -> None:
        """The no-op drain with a handler that makes one Redis call of its own (``INCR`` on its
        own redis-py client), as most real handlers touch Redis or a database: what the worker
        costs next to a handler's own I/O (only adapters with ``HAS_CALL``)."""
        if not getattr(self.adapter, "HAS_CALL", False):
            self.result["status"] = "skipped"
            self.result["error"] = "no Redis-calling handler in this adapter"
            return
        await self.drain("call", self.args.n)

    async def sc_drain_listened(self) -> None:
        """The no-op drain while one other process listens to every task event of the queue
        (only libraries with events: ``start_listening``)."""
        start = getattr(self.adapter, "start_listening", None)
        if start is None:
            self.result["status"] = "skipped"
            self.result["error"] = "no task events to listen to"
            return
        await start(self.url)
        try:
            await self.drain("noop", self.args.n)
        finally:
            await self.adapter.stop_listening()
        self.result["events_heard"] = self.adapter.heard

    async def sc_roundtrip(self) -> None:
        """Enqueue a task and await its result, as a web request would: first one at a time
        (round trip, and handler start -> caller resumed), then 100 callers at once."""
        if not getattr(self.adapter, "HAS_APPLY", False):
            self.result["status"] = "skipped"
            self.result["error"] = "no result API configured in this adapter"
            return
        n, warm, conc = self.args.n, 5, self.args.concurrency
        n_conc = max(conc, n * 5)
        assert self.listener is not None
        lst = self.listener
        self.spawn_worker(warm + n + n_conc)
        await self.wait_hello()
        loop = asyncio.get_running_loop()
        self.result["api"] = self.adapter.APPLY_API

        async def one(i: int) -> tuple[float, float, float]:
            fut: asyncio.Future[float] = loop.create_future()
            lst.waiters[i] = fut
            t0 = time.time()
            value = await self.adapter.apply("lat", i)
            t1 = time.time()
            if value != i:
                raise RuntimeError(f"apply({i}) returned {value!r}")
            t_start = await asyncio.wait_for(fut, timeout=10)
            return t0, t1, t_start

        for i in range(warm):
            await one(n + n_conc + i)
        rt_ms: list[float] = []
        resume_ms: list[float] = []
        for i in range(n):
            self.check_deadline("round trips")
            t0, t1, ts = await one(i)
            rt_ms.append((t1 - t0) * 1000)
            resume_ms.append((t1 - ts) * 1000)
        self.result.update({
            "samples": n, "rt_p50_ms": pct(rt_ms, 50), "rt_p99_ms": pct(rt_ms, 99),
            "resume_p50_ms": pct(resume_ms, 50), "resume_p99_ms": pct(resume_ms, 99)})
        todo = iter(range(n, n + n_conc))

        async def caller() -> None:
            for i in todo:
                value = await self.adapter.apply("lat", i)
                if value != i:
                    raise RuntimeError(f"apply({i}) returned {value!r}")

        t0 = time.perf_counter()
        self.result.update({"concurrent_callers": conc, "concurrent_n": n_conc})
        try:
            await asyncio.gather(*[caller() for _ in range(conc)])
        except Exception as exc:  # reported, and the one-caller numbers are kept
            self.result["concurrent_error"] = f"{type(exc).__name__}: {exc}"[:300]
            self.result["partial"] = "100 concurrent callers failed"
            return
        dt = time.perf_counter() - t0
        self.result["concurrent_applies_s"] = n_conc / dt
        self.exactly_once(await self.settle(), warm + n + n_conc)

    async def sc_io(self) -> None:
        await self.drain("sleep", self.args.n)

    async def sc_latency(self) -> None:
        n, warm = self.args.n, 5
        assert self.listener is not None
        lst = self.listener
        self.spawn_worker(n + warm)
        await self.wait_hello()
        loop = asyncio.get_running_loop()

        async def one(i: int) -> tuple[float, float, float]:
            fut: asyncio.Future[float] = loop.create_future()
            lst.waiters[i] = fut
            t0 = time.time()
            await self.adapter.enqueue("lat", i)
            t1 = time.time()
            try:
                t_start = await asyncio.wait_for(fut, timeout=max(min(self.left(), 10.0), 0.01))
            except TimeoutError:
                raise Timeout(f"latency: task {i} did not start within 10 s") from None
            return t0, t1, t_start

        for i in range(n, n + warm):  # the worker is up and has run something
            await one(i)
        await asyncio.sleep(0.5)
        lat_ms: list[float] = []
        enq_ms: list[float] = []
        self.result["latency_ms"] = lat_ms
        # A library that polls while idle (arq: every 0.5 s) would phase-lock with a loop that
        # enqueues right after each start; a random extra gap of up to one poll period samples
        # its poll phase uniformly. Libraries that block on Redis get no extra gap.
        poll = float(getattr(self.adapter, "IDLE_POLL_S", 0.0))
        self.result["extra_gap_s"] = poll
        budget_end = time.monotonic() + self.args.budget
        measured = 0
        try:
            for i in range(n):
                if time.monotonic() > budget_end:
                    self.result["partial"] = f"{len(lat_ms)}/{n} samples in {self.args.budget:g} s"
                    break
                # idle again, at an unsynchronised moment
                await asyncio.sleep(random.uniform(0.01, 0.03) + random.uniform(0, poll))
                t0, t1, ts = await one(i)
                measured += 1
                lat_ms.append((ts - t0) * 1000)
                enq_ms.append((t1 - t0) * 1000)
        finally:
            if lat_ms:
                self.result.update({
                    "samples": len(lat_ms), "p50_ms": pct(lat_ms, 50), "p90_ms": pct(lat_ms, 90),
                    "p99_ms": pct(lat_ms, 99), "max_ms": max(lat_ms),
                    "mean_ms": sum(lat_ms) / len(lat_ms), "min_ms": min(lat_ms),
                    "enqueue_call_p50_ms": pct(enq_ms, 50)})
        self.exactly_once(await self.settle(), measured + warm)

    async def sc_memory(self) -> None:
        n = self.args.n
        checkpoint = max(1, n // 10)
        self.result["checkpoint_task"] = checkpoint
        self.result["pre_enqueue"] = pre = await self.pre_enqueue(
            "noop", n, budget=self.args.enqueue_budget)
        await self.adapter.close()
        stored = pre["stored"]
        if not pre["stored_ok"]:
            self.result["status"] = "failed-check"
            return
        assert self.listener is not None
        lst = self.listener
        samples: list[tuple[float, int, int]] = []  # (t since spawn, rss bytes, tasks done)
        self.result["samples"] = samples
        t_spawn = time.monotonic()
        self.spawn_worker(n)

        async def sample() -> None:
            rss = self.worker_rss()
            if rss:
                samples.append((round(time.monotonic() - t_spawn, 3), rss, lst.snap["n"]))

        try:
            await self.wait_hello()
            snap = await self.wait_drained(stored, sample,
                                           budget_end=time.monotonic() + self.args.budget)
            for _ in range(10):  # 2 s after the last task: the "after" RSS
                await asyncio.sleep(0.2)
                await sample()
            done = snap["n"]
            elapsed = snap["t_last"] - snap["t_first"]
            self.result["tasks_done"] = done
            self.result["tasks_s"] = done / elapsed if elapsed > 0 else None
            if done < n:
                why = ("enqueue budget" if stored < n else f"drain budget {self.args.budget:g} s")
                self.result["partial"] = f"{done}/{n} tasks ({why})"
            if done >= stored:
                self.exactly_once(dict(lst.snap), stored)
            else:  # stopped by the budget: every execution so far distinct
                last = dict(lst.snap)
                ok = last["n"] == last["distinct"] and last["over"] == 0
                self.result["exactly_once"] = {
                    "expected": stored, "executions": last["n"], "distinct": last["distinct"],
                    "duplicates": last["over"], "unknown": last["out_of_range"], "ok": ok,
                    "partial": True}
                if not ok:
                    self.result["status"] = "failed-check"
        finally:
            self.summarise_memory(samples, checkpoint, n)

    def summarise_memory(self, samples: list[tuple[float, int, int]], checkpoint: int,
                         n: int) -> None:
        if not samples:
            return
        mb = 1024 * 1024
        started = [s for s in samples if s[2] > 0]
        at_ckpt = [s for s in samples if s[2] >= checkpoint]
        res = self.result
        res["rss_start_mb"] = (started[0] if started else samples[0])[1] / mb
        res["rss_peak_mb"] = max(s[1] for s in samples) / mb
        res["rss_end_mb"] = samples[-1][1] / mb
        res["rss_end_tasks"] = samples[-1][2]
        if at_ckpt:
            ref = at_ckpt[0][1]
            res["rss_checkpoint_mb"] = ref / mb
            res["rss_end_vs_checkpoint_pct"] = 100 * (samples[-1][1] - ref) / ref
            res["flat"] = abs(samples[-1][1] - ref) <= 0.10 * ref

    # ---------------------------------------------------------------- run

    async def run(self) -> dict[str, Any]:
        scenario = getattr(self, f"sc_{self.args.scenario}")
        try:
            await self.start_udp()
            await self.adapter.open(self.url)
            await scenario()
        except Timeout as exc:
            self.result["status"] = "timeout"
            self.result["error"] = f"deadline ({self.args.deadline:g} s) passed during {exc}"
        except Exception as exc:
            self.result["status"] = "error"
            self.result["error"] = f"{type(exc).__name__}: {exc}"
            self.result["traceback"] = traceback.format_exc()[-3000:]
        finally:
            if self.listener is not None and self.proc is not None:
                self.result["last_snapshot"] = dict(self.listener.snap)
            await self.stop_worker()
            with contextlib.suppress(Exception):
                await self.adapter.close()
            with contextlib.suppress(Exception):
                await self.redis.aclose()
        return self.result


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--lib", required=True)
    p.add_argument("--scenario", required=True,
                   choices=["enqueue", "producers", "drain", "drain_typed", "drain_listened",
                            "drain_call", "io", "latency", "memory", "roundtrip"])
    p.add_argument("--url", required=True)
    p.add_argument("--n", type=int, required=True)
    p.add_argument("--n-bulk", type=int, default=20000)
    p.add_argument("--concurrency", type=int, default=100)
    p.add_argument("--deadline", type=float, default=120.0,
                   help="hard limit for the whole scenario: past it, status 'timeout'")
    p.add_argument("--budget", type=float, default=60.0,
                   help="latency: stop sampling after this long; memory: stop draining after "
                        "this long (the result is then marked partial)")
    p.add_argument("--enqueue-budget", type=float, default=60.0,
                   help="memory: stop pre-enqueueing after this long")
    p.add_argument("--loop", choices=["asyncio", "uvloop"], default="asyncio")
    p.add_argument("--log-dir", default="/tmp/asyncq-bench")
    p.add_argument("--profile", default="",
                   help="record the worker with py-spy into this file (collapsed stacks)")
    args = p.parse_args()
    os.environ["BENCH_REDIS_URL"] = args.url
    os.environ["BENCH_CONCURRENCY"] = str(args.concurrency)
    result = run_loop(Driver(args).run(), args.loop)
    print("RESULT " + json.dumps(result), flush=True)


if __name__ == "__main__":
    main()
