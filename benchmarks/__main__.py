"""``python -m benchmarks`` (``make bench``): asyncq against arq, Celery, saq, streaq and
taskiq-redis, and against Go's asynq (the reference implementation) on the same Redis.

Stdlib only, so it runs from the project's ``.venv``. It

1. builds one venv per library under ``benchmarks/.venv-peers/`` (see ``_venvs``; a library
   that cannot be installed or imported is skipped with a message) and the Go peer with
   ``go build`` (see ``_go``; skipped with a message when Go is missing);
2. starts its own ``redis-server`` on a free loopback port and measures its ceiling with
   ``redis-benchmark``;
3. runs every scenario for every library, each in a subprocess of that library's venv
   (``benchmarks.driver``, which starts the worker as another process; for the Go peer the
   Go port of that driver in the built binary), with FLUSHALL of this
   private server between runs and a hard timeout per run;
4. prints one table and writes ``benchmarks/results/<timestamp>.json`` and ``latest.json``.

See ``benchmarks/README.md`` for what each number means.
"""

from __future__ import annotations

import argparse
import contextlib
import datetime as dt
import hashlib
import json
import os
import platform
import shlex
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from benchmarks import _go, _profile, _redis, _venvs
from benchmarks._table import render

ROOT = _venvs.ROOT
RESULTS_DIR = ROOT / "benchmarks" / "results"
SCENARIOS = ["enqueue", "producers", "drain", "drain_typed", "drain_listened", "io", "latency",
             "roundtrip", "memory", "redis"]

# Sizes per mode. The full sizes are the ones issue 6 asks for.
SIZES: dict[str, dict[str, Any]] = {
    "full": {
        "enqueue": {"n": 5000, "n_bulk": 20000, "deadline": 120},
        "producers": {"n": 20000, "deadline": 150},
        "drain": {"n": 20000, "deadline": 180},
        "drain_typed": {"n": 20000, "deadline": 180},
        "drain_listened": {"n": 20000, "deadline": 180},
        "io": {"n": 5000, "deadline": 120},
        "latency": {"n": 200, "deadline": 150, "budget": 60},
        "roundtrip": {"n": 500, "deadline": 180},
        "memory": {"n": 200000, "deadline": 240, "budget": 60, "enqueue_budget": 45},
        "redis": {"n": 100000},
    },
    "quick": {
        "enqueue": {"n": 1000, "n_bulk": 5000, "deadline": 60},
        "producers": {"n": 5000, "deadline": 90},
        "drain": {"n": 5000, "deadline": 90},
        "drain_typed": {"n": 5000, "deadline": 90},
        "drain_listened": {"n": 5000, "deadline": 90},
        "io": {"n": 2000, "deadline": 60},
        "latency": {"n": 50, "deadline": 90, "budget": 20},
        "roundtrip": {"n": 100, "deadline": 120},
        "memory": {"n": 30000, "deadline": 120, "budget": 30, "enqueue_budget": 30},
        "redis": {"n": 20000},
    },
}
LOOPS = ["asyncio", "uvloop"]
HARD_TIMEOUT_MARGIN = 60  # the orchestrator kills a driver this long after its own deadline


def machine_info() -> dict[str, Any]:
    out: dict[str, Any] = {"platform": platform.platform(), "kernel": platform.release(),
                           "cores": os.cpu_count(), "arch": platform.machine()}
    with contextlib.suppress(OSError):
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                out["cpu_model"] = line.split(":", 1)[1].strip()
                break
    with contextlib.suppress(OSError, ValueError):
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemTotal:"):
                out["mem_gib"] = round(int(line.split()[1]) / 1024 / 1024, 1)
    with contextlib.suppress(OSError):
        for line in Path("/etc/os-release").read_text().splitlines():
            if line.startswith("PRETTY_NAME="):
                out["os"] = line.split("=", 1)[1].strip('"')
    return out


def git_info() -> dict[str, Any]:
    def run(*args: str) -> str:
        return subprocess.run(["git", *args], cwd=ROOT, capture_output=True, text=True,
                              timeout=30, check=False).stdout.strip()

    with contextlib.suppress(OSError, subprocess.SubprocessError):
        # Uncommitted changes to asyncq/ are part of what is measured: fingerprint them.
        diff = run("diff", "HEAD", "--", "asyncq") + run("ls-files", "--others",
                                                          "--exclude-standard", "asyncq")
        return {"commit": run("rev-parse", "HEAD"),
                "dirty": bool(run("status", "--porcelain", "--untracked-files=no")),
                "asyncq_uncommitted_sha256": (hashlib.sha256(diff.encode()).hexdigest()[:16]
                                              if diff else None)}
    return {}


def run_driver(env: _venvs.LibEnv, scenario: str, url: str, cfg: dict[str, Any],
               args: argparse.Namespace, log_dir: Path) -> dict[str, Any]:
    """One (library, scenario) run in the library's venv, killed if it overstays."""
    cmd = [*env.driver_command(), "--lib", env.lib, "--scenario", scenario,
           "--url", url, "--n", str(cfg["n"]), "--concurrency", str(args.concurrency),
           "--deadline", str(cfg["deadline"]), "--loop", args.loop, "--log-dir", str(log_dir)]
    for key in ("n_bulk", "budget", "enqueue_budget"):
        if key in cfg:
            cmd += [f"--{key.replace('_', '-')}", str(cfg[key])]
    profile = log_dir / f"profile-{env.lib}-{scenario}.txt"
    if args.profile and scenario != "enqueue":
        cmd += ["--profile", str(profile)]
    log = log_dir / f"driver-{env.lib}-{scenario}.log"
    started = time.monotonic()
    with log.open("wb") as err:
        proc = subprocess.Popen(cmd, cwd=ROOT, stdout=subprocess.PIPE, stderr=err,
                                stdin=subprocess.DEVNULL, start_new_session=True)
        try:
            out, _ = proc.communicate(timeout=cfg["deadline"] + HARD_TIMEOUT_MARGIN)
        except subprocess.TimeoutExpired:
            # The driver and its worker share a process group of their own.
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
            return {"lib": env.lib, "scenario": scenario, "status": "timeout",
                    "error": f"killed after {cfg['deadline'] + HARD_TIMEOUT_MARGIN} s",
                    "runtime_s": time.monotonic() - started}
        finally:
            # Nothing of this run may outlive it (a worker left behind would skew the next).
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(proc.pid, signal.SIGKILL)
    for line in reversed(out.decode(errors="replace").splitlines()):
        if line.startswith("RESULT "):
            result: dict[str, Any] = json.loads(line[len("RESULT "):])
            result["runtime_s"] = time.monotonic() - started
            result["command"] = shlex.join(cmd)
            if args.profile and profile.exists():
                result["profile"] = _profile.summarize(profile)
            return result
    tail = "\n".join(log.read_text(errors="replace").splitlines()[-15:])
    return {"lib": env.lib, "scenario": scenario, "status": "error",
            "error": f"driver exited {proc.returncode} without a result:\n{tail}",
            "runtime_s": time.monotonic() - started}


def wire_available(env: _venvs.LibEnv, url: str, port: int) -> str | None:
    """None when this asyncq speaks asynq's layout (``?wire=asynq``), else why not; checked
    once on the suite's server, which is flushed afterwards."""
    assert env.python is not None
    try:
        proc = subprocess.run([str(env.python), "-m", "benchmarks.adapters.asyncq_asynq_", url],
                              cwd=ROOT, capture_output=True, text=True, timeout=60, check=False)
        out = (proc.stdout.strip() or proc.stderr.strip() or f"exit {proc.returncode}")
        # (the first clause of the error: asyncq lists every URL option it knows after it)
        why = None if proc.returncode == 0 else out.splitlines()[-1].split(" (known:")[0][:300]
    except (OSError, subprocess.SubprocessError) as exc:
        why = f"{type(exc).__name__}: {exc}"
    _redis.command(port, "FLUSHALL")
    return why


def redis_ceiling(port: int, n: int) -> dict[str, Any]:
    sha = str(_redis.command(port, "SCRIPT", "LOAD", "return 1"))
    evalsha = ["EVALSHA", sha, "0"]
    out: dict[str, Any] = {"script": "return 1", "n": n}
    out["c50"] = _redis.redis_benchmark(port, n, "-t", "lpush,rpop")
    out["c50"].update({"EVALSHA": next(iter(_redis.redis_benchmark(port, n, *evalsha).values()))})
    out["c50_P16"] = _redis.redis_benchmark(port, n, "-t", "lpush,rpop", pipeline=16)
    out["c50_P16"].update({"EVALSHA": next(iter(
        _redis.redis_benchmark(port, n, *evalsha, pipeline=16).values()))})
    out["c1"] = {"EVALSHA": next(iter(
        _redis.redis_benchmark(port, max(n // 5, 1000), *evalsha, clients=1).values()))}
    _redis.command(port, "FLUSHALL")
    return out


def one_line(r: dict[str, Any]) -> str:
    st = r.get("status")
    if st not in ("ok", "failed-check"):
        return f"{st}: {str(r.get('error', '')).splitlines()[0][:150]}"
    sc = r["scenario"]
    bits = []
    if sc == "enqueue":
        bits.append(f"single {r['single']['ops_s']:.0f}/s "
                    f"({100 * r['single'].get('vs_bare_evalsha', 0):.0f}% of bare EVALSHA)")
        if r.get("bulk"):
            bits.append(f"bulk {r['bulk']['ops_s']:.0f}/s")
        bits.append("stored ok" if r.get("stored_ok") else "STORED COUNT WRONG")
    elif sc == "producers":
        bare = r.get("bare_evalsha") or {}
        bits.append(f"{r.get('ops_s') or 0:.0f}/s with {r.get('coroutines', 0)} coroutines "
                    f"({r.get('vs_bare_evalsha') or 0:.2f}x bare EVALSHA "
                    f"{bare.get('concurrent_ops_s') or 0:.0f}/s), p99 "
                    f"{r.get('p99_ms') or 0:.2f} ms (lone call p99 "
                    f"{r.get('lone_p99_ms') or 0:.2f} ms)")
        bits.append("stored ok" if r.get("stored_ok") else "STORED COUNT WRONG")
    elif sc == "roundtrip":
        bits.append(f"round trip p50 {r.get('rt_p50_ms', float('nan')):.2f} ms, "
                    f"p99 {r.get('rt_p99_ms', float('nan')):.2f} ms; handler -> caller p50 "
                    f"{r.get('resume_p50_ms', float('nan')):.2f} ms; "
                    f"{r.get('concurrent_applies_s') or 0:.0f}/s with "
                    f"{r.get('concurrent_callers', 0)} callers")
    elif sc in ("drain", "io", "drain_listened", "drain_typed"):
        bits.append(f"{r.get('tasks_s') or 0:.0f} tasks/s")
        if sc == "io":
            bits.append(f"{r.get('pct_ideal') or 0:.1f}% of ideal")
    elif sc == "latency":
        bits.append(f"p50 {r.get('p50_ms', float('nan')):.2f} ms, "
                    f"p99 {r.get('p99_ms', float('nan')):.2f} ms ({r.get('samples', 0)} samples)")
    elif sc == "memory":
        bits.append(f"RSS {r.get('rss_start_mb', 0):.1f} / peak {r.get('rss_peak_mb', 0):.1f} / "
                    f"end {r.get('rss_end_mb', 0):.1f} MB")
        if "rss_end_vs_checkpoint_pct" in r:
            bits.append(f"end vs @{r['checkpoint_task']}: {r['rss_end_vs_checkpoint_pct']:+.1f}%")
    if r.get("partial"):
        bits.append(f"partial: {r['partial']}")
    eo = r.get("exactly_once")
    if eo is not None:
        bits.append("exactly once" if eo["ok"] else
                    f"EXACTLY-ONCE FAILED ({eo['executions']} runs, {eo['distinct']} distinct, "
                    f"{eo['duplicates']} dup)")
    return ", ".join(bits)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m benchmarks", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--quick", action="store_true", help="smaller counts: a smoke run")
    p.add_argument("--only", default=",".join(_venvs.LIBRARIES),
                   help="comma-separated libraries (default: all: %(default)s)")
    p.add_argument("--scenarios", default=",".join(SCENARIOS),
                   help="comma-separated scenarios (default: %(default)s)")
    p.add_argument("--loop", default="asyncio,uvloop",
                   help="event loop(s) for every producer and worker, comma-separated: the "
                        "whole suite runs once per loop (default: %(default)s)")
    p.add_argument("--concurrency", type=int, default=100)
    p.add_argument("--results-dir", type=Path, default=RESULTS_DIR)
    p.add_argument("--no-save", action="store_true", help="print the table, write no JSON")
    p.add_argument("--profile", action="store_true",
                   help="record every worker with py-spy (non-blocking sampling: numbers are "
                        "slightly lower); top functions go into the JSON, raw stacks stay in "
                        "the log directory")
    args = p.parse_args(argv)

    libs = [s.strip() for s in args.only.split(",") if s.strip()]
    scenarios = [s.strip() for s in args.scenarios.split(",") if s.strip()]
    for lib in libs:
        if lib not in _venvs.LIBRARIES:
            p.error(f"unknown library {lib!r} (known: {', '.join(_venvs.LIBRARIES)})")
    for sc in scenarios:
        if sc not in SCENARIOS:
            p.error(f"unknown scenario {sc!r} (known: {', '.join(SCENARIOS)})")
    loops = [s.strip() for s in args.loop.split(",") if s.strip()]
    for loop in loops:
        if loop not in LOOPS:
            p.error(f"unknown loop {loop!r} (known: {', '.join(LOOPS)})")
    rc = 0
    for loop in loops:
        args.loop = loop
        rc = max(rc, run_suite(args, argv, libs, scenarios))
    return rc


def run_suite(args: argparse.Namespace, argv: list[str] | None, libs: list[str],
              scenarios: list[str]) -> int:
    """Every scenario for every library on one event loop (``args.loop``): table and JSON."""
    mode = "quick" if args.quick else "full"
    sizes = SIZES[mode]

    t_start = time.monotonic()
    started_at = dt.datetime.now(dt.UTC)
    load_start = os.getloadavg()
    git_start = git_info()  # asyncq is installed editable: this is the code being measured
    log_dir = Path(tempfile.mkdtemp(prefix="asyncq-bench-"))
    print(f"asyncq benchmark suite ({mode}, loop={args.loop}); logs in {log_dir}", flush=True)
    if load_start[0] > 1.0:
        print(f"[warn] load average {load_start[0]:.2f} on {os.cpu_count()} cores: something "
              "else is using the CPU; numbers will be noisy", flush=True)

    # 1. venvs and the Go build
    envs: dict[str, _venvs.LibEnv] = {}
    skipped: dict[str, str] = {}
    built: dict[str, _venvs.LibEnv] = {}
    for lib in libs:
        if lib == _go.LIB:
            env = _go.ensure(log_dir=log_dir)
        else:
            base = _venvs.VENV_OF.get(lib, lib)
            if base not in built:
                built[base] = _venvs.ensure(base, log_dir=log_dir)
            env = _venvs.LibEnv(lib, built[base].python, built[base].error)
        if not env.available:
            skipped[lib] = env.error or "unavailable"
            print(f"[setup] SKIPPING {lib}: {skipped[lib]}", flush=True)
        else:
            envs[lib] = env
    versions = {lib: _go.versions(env) if lib == _go.LIB else _venvs.versions(env)
                for lib, env in envs.items()}
    setup_s = time.monotonic() - t_start
    print(f"[setup] ready in {setup_s:.1f} s: "
          + ", ".join(f"{lib} {v.get(lib) or v.get(_venvs.VENV_OF.get(lib, lib), '?')}"
                      for lib, v in versions.items()), flush=True)

    results: dict[str, dict[str, Any]] = {}
    ceiling: dict[str, Any] | None = None
    t_bench = time.monotonic()
    with _redis.RedisServer() as server:
        rinfo = _redis.info(server.port, "server")
        redis_meta = {"version": rinfo.get("redis_version"), "port": server.port,
                      "args": server.args[1:], "persistence": "off (--save '' --appendonly no)"}
        print(f"[redis] redis-server {redis_meta['version']} on {server.url}", flush=True)
        if "redis" in scenarios:
            t0 = time.monotonic()
            try:
                ceiling = redis_ceiling(server.port, sizes["redis"]["n"])
                c50 = ceiling["c50"]
                print("[redis] ceiling: " + ", ".join(
                    f"{k} {v['rps']:.0f}/s" for k, v in c50.items())
                    + f"; EVALSHA 1 client {ceiling['c1']['EVALSHA']['rps']:.0f}/s"
                    f" ({time.monotonic() - t0:.1f} s)", flush=True)
            except (OSError, RuntimeError, subprocess.SubprocessError, StopIteration) as exc:
                ceiling = {"error": f"{type(exc).__name__}: {exc}"}
                print(f"[redis] redis-benchmark failed: {exc}", flush=True)
        if "asyncq-asynq" in envs:
            why = wire_available(envs["asyncq-asynq"], server.url, server.port)
            if why is not None:
                skipped["asyncq-asynq"] = f"not available ({why})"
                del envs["asyncq-asynq"]
                print(f"asyncq asynq-wire: not available ({why})", flush=True)
        for sc in (s for s in SCENARIOS if s in scenarios and s != "redis"):
            results[sc] = {}
            for lib, env in envs.items():
                _redis.command(server.port, "FLUSHALL")
                r = run_driver(env, sc, server.url, sizes[sc], args, log_dir)
                results[sc][lib] = r
                print(f"[{sc}] {lib:12s} {one_line(r)} ({r.get('runtime_s', 0):.1f} s)",
                      flush=True)
        _redis.command(server.port, "FLUSHALL")
    total_s = time.monotonic() - t_start

    notes = {}
    for per_lib in results.values():
        for lib, r in per_lib.items():
            if r.get("notes"):
                notes[lib] = r["notes"]
    doc: dict[str, Any] = {
        "suite": "asyncq benchmarks",
        "mode": mode,
        "loop": args.loop,
        "concurrency": args.concurrency,
        "command": shlex.join([Path(sys.executable).name, "-m", "benchmarks",
                               *(argv if argv is not None else sys.argv[1:])]),
        "started_at": started_at.isoformat(timespec="seconds"),
        "duration_s": {"total": round(total_s, 1), "setup": round(setup_s, 1),
                       "benchmarks": round(time.monotonic() - t_bench, 1)},
        "git": git_start,
        "machine": machine_info(),
        "loadavg": {"start": [round(x, 2) for x in load_start],
                    "end": [round(x, 2) for x in os.getloadavg()]},
        "profiled": bool(args.profile),
        "python": platform.python_version(),
        "redis": redis_meta,
        "versions": versions,
        "skipped": skipped,
        "sizes": sizes,
        "notes": notes,
        "redis_ceiling": ceiling,
        "results": results,
    }
    git_end = git_info()
    if git_end != git_start:
        doc["git_at_end"] = git_end
        print("[warn] the git tree changed during the run (commit or dirty state): asyncq "
              "numbers may mix two versions of the code", flush=True)
    table, summary = render(doc)
    doc["summary"] = summary
    print()
    print(table)
    print(f"\ntotal {total_s:.0f} s (setup {setup_s:.0f} s)")
    if not args.no_save:
        args.results_dir.mkdir(parents=True, exist_ok=True)
        stamp = started_at.strftime("%Y%m%dT%H%M%SZ")
        suffix = ("-quick" if args.quick else "") + ("-uvloop" if args.loop == "uvloop" else "")
        path = args.results_dir / f"{stamp}{suffix}.json"
        text = json.dumps(doc, indent=1, sort_keys=False) + "\n"
        path.write_text(text)
        latest = "latest-uvloop.json" if args.loop == "uvloop" else "latest.json"
        (args.results_dir / latest).write_text(text)
        print(f"saved {path.relative_to(ROOT) if path.is_relative_to(ROOT) else path} "
              f"and {latest}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
