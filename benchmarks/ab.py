"""``python -m benchmarks.ab REF_A REF_B`` (``make ab A=... B=...``): the A/B guard.

Compares two commits of asyncq on the hot per-task paths, side by side on this machine:

1. installs each commit, not editable, into its own cached venv (``_ab_build``);
2. runs the same harness (this checkout's ``benchmarks.driver``) against each, interleaved:
   every round runs every scenario for A and for B (the order flips each round, A B then B A,
   so drift of the machine's load weighs on both alike), on one private ``redis-server``
   emptied (FLUSHALL, SCRIPT FLUSH) before every run;
3. prints per metric the median of each side, its min-max and B/A, and writes every number to
   ``benchmarks/results/ab-<A>-<B>-<timestamp>.json``.

Stdlib only: it runs from the project's ``.venv``. Nothing here asserts a time: it reports.
See the "A/B guard" section of ``benchmarks/README.md``.
"""

from __future__ import annotations

import argparse
import contextlib
import datetime as dt
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

from benchmarks import _ab_build, _redis
from benchmarks.__main__ import machine_info
from benchmarks._ab_stats import LEGEND, Compared, compare, extract, fmt, metrics_of, table

ROOT = _ab_build.ROOT
RESULTS_DIR = ROOT / "benchmarks" / "results"
SCENARIOS = ["drain", "drain_call", "enqueue", "producers", "latency"]
SIZES: dict[str, dict[str, dict[str, Any]]] = {
    "full": {
        "drain": {"n": 60000, "deadline": 240},
        "drain_call": {"n": 40000, "deadline": 240},
        "enqueue": {"n": 15000, "n_bulk": 20000, "deadline": 150},
        "producers": {"n": 40000, "deadline": 180},
        "latency": {"n": 400, "deadline": 150, "budget": 60},
    },
    "quick": {
        "drain": {"n": 10000, "deadline": 90},
        "drain_call": {"n": 10000, "deadline": 90},
        "enqueue": {"n": 2000, "n_bulk": 10000, "deadline": 60},
        "producers": {"n": 10000, "deadline": 90},
        "latency": {"n": 100, "deadline": 90, "budget": 30},
    },
}
ROUNDS = {"full": 8, "quick": 2}  # even: as many rounds start with B as with A
HARD_TIMEOUT_MARGIN = 60  # a driver is killed this long after its own deadline


def run_driver(side: _ab_build.Side, scenario: str, url: str, cfg: dict[str, Any],
               args: argparse.Namespace, harness_root: Path, log_dir: Path) -> dict[str, Any]:
    """One scenario on one side: the harness copy run by that side's Python, killed (with its
    worker: they share a process group) if it overstays."""
    log_dir.mkdir(parents=True, exist_ok=True)
    lib = "asyncq-asynq" if args.wire == "asynq" else "asyncq"
    cmd = [str(side.python), "-m", "benchmarks.driver", "--lib", lib, "--scenario",
           scenario, "--url", url, "--n", str(cfg["n"]), "--concurrency", str(args.concurrency),
           "--deadline", str(cfg["deadline"]), "--loop", args.loop, "--log-dir", str(log_dir)]
    for key in ("n_bulk", "budget"):
        if key in cfg:
            cmd += [f"--{key.replace('_', '-')}", str(cfg[key])]
    started = time.monotonic()
    log = log_dir / f"driver-{scenario}.log"
    with log.open("wb") as err:
        proc = subprocess.Popen(cmd, cwd=harness_root, env=_ab_build.clean_env(),
                                stdout=subprocess.PIPE, stderr=err, stdin=subprocess.DEVNULL,
                                start_new_session=True)
        try:
            out, _ = proc.communicate(timeout=cfg["deadline"] + HARD_TIMEOUT_MARGIN)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
            return {"scenario": scenario, "status": "timeout",
                    "error": f"killed after {cfg['deadline'] + HARD_TIMEOUT_MARGIN} s",
                    "runtime_s": time.monotonic() - started}
        finally:  # nothing of this run may outlive it: a stray worker would skew the next
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(proc.pid, signal.SIGKILL)
    for line in reversed(out.decode(errors="replace").splitlines()):
        if line.startswith("RESULT "):
            result: dict[str, Any] = json.loads(line[len("RESULT "):])
            result["runtime_s"] = time.monotonic() - started
            return result
    tail = "\n".join(log.read_text(errors="replace").splitlines()[-15:])
    return {"scenario": scenario, "status": "error",
            "error": f"driver exited {proc.returncode} without a result:\n{tail}",
            "runtime_s": time.monotonic() - started}


def summary_line(result: dict[str, Any]) -> str:
    """The run's metrics on one line, or why it has none."""
    if result.get("status") != "ok":
        first = str(result.get("error") or result.get("exactly_once") or "").splitlines()
        return f"{str(result.get('status')).upper()}: {first[0][:160] if first else ''}"
    bits = []
    for m in metrics_of(result["scenario"]):
        value = extract(result, m.key)
        bits.append(f"{m.label.strip()} {fmt(value)} {m.unit}")
    return ", ".join(bits)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m benchmarks.ab", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("ref_a", metavar="REF_A", help="the reference commit (e.g. the merge base)")
    p.add_argument("ref_b", metavar="REF_B", help="the commit compared with it")
    p.add_argument("--rounds", type=int, default=None,
                   help=f"rounds of every scenario on each side (default {ROUNDS['full']}, "
                        f"{ROUNDS['quick']} with --quick)")
    p.add_argument("--scenarios", default=",".join(SCENARIOS),
                   help="comma-separated, of: %(default)s")
    p.add_argument("--quick", action="store_true", help="small counts and 2 rounds: a smoke run")
    p.add_argument("--loop", choices=["asyncio", "uvloop"], default="asyncio")
    p.add_argument("--wire", choices=["asyncq", "asynq"], default="asyncq",
                   help="the Redis layout: asyncq's own, or Go asynq's (?wire=asynq)")
    p.add_argument("--concurrency", type=int, default=100, help="worker concurrency")
    p.add_argument("--results-dir", type=Path, default=RESULTS_DIR)
    p.add_argument("--no-save", action="store_true", help="print the table, write no JSON")
    args = p.parse_args(argv)
    scenarios = [s for s in args.scenarios.replace(" ", ",").split(",") if s]
    for sc in scenarios:
        if sc not in SCENARIOS:
            p.error(f"unknown scenario {sc!r} (known: {', '.join(SCENARIOS)})")
    scenarios = [s for s in SCENARIOS if s in scenarios]
    mode = "quick" if args.quick else "full"
    rounds = args.rounds if args.rounds is not None else ROUNDS[mode]
    if rounds < 1:
        p.error("--rounds must be at least 1")
    sizes = {sc: SIZES[mode][sc] for sc in scenarios}
    try:
        shas = (_ab_build.resolve(args.ref_a), _ab_build.resolve(args.ref_b))
    except RuntimeError as exc:
        p.error(str(exc))
    command = shlex.join(["python", "-m", "benchmarks.ab",
                          *(argv if argv is not None else sys.argv[1:])])
    return run(args, command, scenarios, sizes, rounds, mode, shas)


def run(args: argparse.Namespace, command: str, scenarios: list[str],
        sizes: dict[str, dict[str, Any]], rounds: int, mode: str, shas: tuple[str, str]) -> int:
    t_start = time.monotonic()
    started_at = dt.datetime.now(dt.UTC)
    load_start = os.getloadavg()
    work = Path(tempfile.mkdtemp(prefix="asyncq-ab-"))
    log_dir = work / "logs"
    log_dir.mkdir()
    print(f"asyncq A/B guard ({mode}, {rounds} rounds, loop={args.loop}, wire={args.wire}); "
          f"logs in {log_dir}",
          flush=True)
    if load_start[0] > 1.0:
        print(f"[warn] load average {load_start[0]:.2f} on {os.cpu_count()} cores: something "
              "else is using the CPU; numbers will be noisier", flush=True)

    harness_root = work / "harness"
    harness = _ab_build.copy_harness(harness_root)
    sides: list[_ab_build.Side] = []
    try:
        for name, ref, sha in (("A", args.ref_a, shas[0]), ("B", args.ref_b, shas[1])):
            side = _ab_build.ensure(name, ref, sha, log_dir)
            _ab_build.verify(side, harness_root)
            sides.append(side)
        _ab_build.prune(keep={side.sha for side in sides})
    except RuntimeError as exc:
        print(f"[setup] {exc}", file=sys.stderr, flush=True)
        return 2
    for side in sides:
        v = side.info["versions"]
        print(f"[setup] {side.name} = {side.ref} = {side.sha} ({side.info['subject'][:60]})\n"
              f"        asyncq from {side.info['asyncq_file']}\n"
              f"        ({side.info['files_checked']} files identical to the commit's; python "
              f"{side.info['python']}, redis-py {v.get('redis')}, hiredis {v.get('hiredis')})",
              flush=True)
    print(f"[setup] harness: benchmarks/ of {harness['commit'][:7]}"
          f"{' (uncommitted changes)' if harness['uncommitted_changes'] else ''}, "
          f"copied to {harness_root}; ready in {time.monotonic() - t_start:.0f} s", flush=True)

    runs: list[dict[str, Any]] = []
    interrupted = False
    t_bench = time.monotonic()
    with _redis.RedisServer() as server:
        rinfo = _redis.info(server.port, "server")
        redis_meta = {"version": rinfo.get("redis_version"), "args": server.args[1:]}
        print(f"[redis] redis-server {redis_meta['version']} on {server.url}", flush=True)
        try:
            for rnd in range(1, rounds + 1):
                t_round = time.monotonic()
                order = sides if rnd % 2 else sides[::-1]
                for sc in scenarios:
                    for side in order:
                        _redis.command(server.port, "FLUSHALL")
                        _redis.command(server.port, "SCRIPT", "FLUSH")
                        load = os.getloadavg()
                        result = run_driver(side, sc, server.url, sizes[sc], args,
                                            harness_root, log_dir / f"r{rnd}-{side.name}")
                        runs.append({"round": rnd, "scenario": sc, "side": side.name,
                                     "sha": side.sha, "loadavg": [round(x, 2) for x in load],
                                     "status": result.get("status"), "result": result})
                        print(f"[r{rnd} {sc:10s} {side.name} {side.short}] "
                              f"{summary_line(result)} ({result.get('runtime_s', 0):.0f} s)",
                              flush=True)
                took = time.monotonic() - t_round
                if rnd < rounds:
                    print(f"[round {rnd}/{rounds}] {took:.0f} s; about "
                          f"{took * (rounds - rnd) / 60:.0f} min to go", flush=True)
        except KeyboardInterrupt:
            interrupted = True
            print("\n[interrupted] the table covers the runs done so far", flush=True)
    total_s = time.monotonic() - t_start

    rows: list[Compared] = []
    for sc in scenarios:
        for m in metrics_of(sc):
            per: dict[str, list[float | None]] = {"A": [], "B": []}
            for rnd in range(1, rounds + 1):
                for name in ("A", "B"):
                    run_ = next((r for r in runs if r["round"] == rnd and r["scenario"] == sc
                                 and r["side"] == name), None)
                    if run_ is None:
                        continue
                    ok = run_["status"] == "ok"
                    per[name].append(extract(run_["result"], m.key) if ok else None)
            rows.append(compare(m, per["A"], per["B"]))
    a, b = sides
    head = []
    for s in sides:
        name = s.short if s.sha.startswith(s.ref) else f"{s.ref} {s.short}"
        head.append(f"{s.name} = {name} ({s.info['commit_date'][:10]}, {s.info['subject'][:70]})")
    head.append(f"{rounds} round{'s' if rounds > 1 else ''}, A B / B A interleaved, wire "
                f"{args.wire}, loop "
                f"{args.loop}, concurrency {args.concurrency}; {platform.node()}, "
                f"{machine_info().get('cpu_model', '?')}, {os.cpu_count()} cores, load "
                f"{load_start[0]:.2f} -> {os.getloadavg()[0]:.2f}")
    printed = "\n".join([*head, "", table(rows, rounds, a.short, b.short), "", LEGEND])
    print()
    print(printed)
    failed = [r for r in runs if r["status"] != "ok"]
    for r in failed:
        print(f"[failed] round {r['round']} {r['scenario']} {r['side']}: "
              f"{summary_line(r['result'])}")
    print(f"\ntotal {total_s / 60:.1f} min (benchmarks {(time.monotonic() - t_bench) / 60:.1f}"
          " min)")

    if not args.no_save:
        doc: dict[str, Any] = {
            "tool": "asyncq A/B guard (benchmarks/ab.py)",
            "mode": mode, "rounds": rounds, "scenarios": scenarios, "loop": args.loop,
            "wire": args.wire,
            "concurrency": args.concurrency, "command": command,
            "started_at": started_at.isoformat(timespec="seconds"),
            "finished_at": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
            "duration_s": round(total_s, 1), "interrupted": interrupted,
            "machine": machine_info(), "python": platform.python_version(),
            "loadavg": {"start": [round(x, 2) for x in load_start],
                        "end": [round(x, 2) for x in os.getloadavg()]},
            "harness": harness, "redis": redis_meta, "sizes": sizes,
            "sides": {s.name: s.info for s in sides},
            "table": printed.splitlines(),
            "summary": [c.as_json() for c in rows],
            "runs": runs,
        }
        args.results_dir.mkdir(parents=True, exist_ok=True)
        stamp = started_at.strftime("%Y%m%dT%H%M%SZ")
        path = args.results_dir / (f"ab-{a.short}-{b.short}-{stamp}"
                                   f"{'-asynq' if args.wire == 'asynq' else ''}"
                                   f"{'-quick' if mode == 'quick' else ''}.json")
        path.write_text(json.dumps(doc, indent=1) + "\n")
        print(f"saved {path.relative_to(ROOT) if path.is_relative_to(ROOT) else path}")
    return 1 if failed or interrupted else 0


if __name__ == "__main__":
    sys.exit(main())
