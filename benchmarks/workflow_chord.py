"""Chord fan-in: N no-op members and one callback, from the start of the enqueue to the start
of the callback, asyncq against Celery's chord on the same Redis in the same run.

    .venv/bin/python -m benchmarks.workflow_chord [--members 10000] [--concurrency 50]
        [--rounds 3]

Both run one worker process with the same concurrency (asyncq: ``asyncq worker -c``; Celery 5:
``celery worker --pool threads -c``) on a redis-server this script starts (Celery: broker
db 1, result backend db 2). Celery is installed in its own venv (benchmarks/.venv-peers/celery,
as for the other peers). Prints a table and writes benchmarks/results/workflow_chord-*.json.
"""

from __future__ import annotations

import argparse
import asyncio
import hashlib
import json
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import venv
from pathlib import Path
from typing import Any

import redis.asyncio

from asyncq import Client, Task, chord
from benchmarks import _venvs
from benchmarks._redis import RedisServer
from benchmarks._results import save_result
from benchmarks._wf_chord_asyncq import STAMP

ROOT = Path(__file__).resolve().parent.parent


def celery_python() -> Path:
    """benchmarks/.venv-peers/celery, made like the other peers' venvs (same requirement key,
    same stamp), without needing a throughput adapter."""
    path = _venvs.VENVS_DIR / "celery"
    py = path / "bin" / "python"
    stamp = path / ".bench-stamp"
    digest = hashlib.sha256(json.dumps([_venvs.REQUIREMENTS["celery"],
                                        _venvs._COMMON]).encode()).hexdigest()[:16]
    has_celery = py.exists() and subprocess.run(
        [str(py), "-c", "import celery"], capture_output=True, check=False).returncode == 0
    if has_celery and (not stamp.exists() or stamp.read_text().strip() != digest):
        stamp.write_text(digest + "\n")
    if not has_celery:
        print("[setup] installing celery[redis] into benchmarks/.venv-peers/celery", flush=True)
        if path.exists():
            shutil.rmtree(path)
        venv.EnvBuilder(with_pip=True, clear=True).create(path)
        subprocess.run([str(py), "-m", "pip", "install", "--quiet",
                        "--disable-pip-version-check", *_venvs.REQUIREMENTS["celery"],
                        *_venvs._COMMON], check=True)
        stamp.write_text(digest + "\n")
    return py


def spawn(cmd: list[str], env: dict[str, str], log: Path) -> subprocess.Popen[bytes]:
    out = log.open("ab")
    return subprocess.Popen(cmd, cwd=ROOT, env={**os.environ, **env, "PYTHONPATH": str(ROOT)},
                            stdout=out, stderr=out)


def stop(proc: subprocess.Popen[bytes]) -> None:
    proc.terminate()
    try:
        proc.wait(timeout=20)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


async def asyncq_round(url: str, members: int) -> dict[str, float]:
    r = redis.asyncio.Redis.from_url(url)
    await r.delete(STAMP)
    async with Client(url) as client:
        flow = chord([Task("noop", i) for i in range(members)], Task("callback"))
        started = time.time()
        handle = await client.enqueue_workflow(flow)
        sent = time.time()
        value = await client.result(handle.id, timeout=600)  # (the callback started first)
        began = float(await r.get(STAMP) or 0)
    await r.aclose()
    assert value == members, value
    return {"enqueue_s": sent - started, "to_callback_start_s": began - started}


def run_asyncq(url: str, args: argparse.Namespace, log: Path) -> list[dict[str, float]]:
    worker = spawn([sys.executable, "-m", "asyncq", "worker", "benchmarks._wf_chord_asyncq:mux",
                    "-c", str(args.concurrency), "--log-level", "warning"],
                   {"ASYNCQ_REDIS_URL": url}, log)
    try:
        time.sleep(1.5)
        return [asyncio.run(asyncq_round(url, args.members)) for _ in range(args.rounds)]
    finally:
        stop(worker)


def run_celery(py: Path, url: str, args: argparse.Namespace,
               log: Path) -> list[dict[str, float]]:
    env = {"BENCH_REDIS_URL": url.rsplit("/", 1)[0]}
    worker = spawn([str(py), "-m", "celery", "-A", "benchmarks._wf_chord_celery", "worker",
                    "--pool", "threads", "-c", str(args.concurrency), "--loglevel", "WARNING",
                    "--without-gossip", "--without-mingle", "--without-heartbeat"], env, log)
    try:
        time.sleep(4)
        out = []
        for _ in range(args.rounds):
            proc = subprocess.run([str(py), "-m", "benchmarks._wf_chord_celery",
                                   str(args.members)], cwd=ROOT, capture_output=True, text=True,
                                  env={**os.environ, **env, "PYTHONPATH": str(ROOT)},
                                  timeout=900, check=True)
            doc = json.loads(proc.stdout.strip().splitlines()[-1])
            assert doc["value"] == args.members, doc
            out.append({k: doc[k] for k in ("enqueue_s", "to_callback_start_s")})
        return out
    finally:
        stop(worker)


def summary(rounds: list[dict[str, float]]) -> dict[str, float]:
    return {f"{key}_median": statistics.median(r[key] for r in rounds)
            for key in ("enqueue_s", "to_callback_start_s")} | {
        "to_callback_start_s_min": min(r["to_callback_start_s"] for r in rounds)}


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--members", type=int, default=10_000)
    p.add_argument("--concurrency", type=int, default=50)
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--skip-celery", action="store_true")
    args = p.parse_args()
    stamp = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime())
    log = Path(tempfile.gettempdir()) / f"asyncq-workflow_chord-{stamp}.log"
    print(f"worker logs: {log}", flush=True)
    results: dict[str, Any] = {}
    with RedisServer() as server:
        url = server.url
        results["asyncq"] = run_asyncq(url, args, log)
        if not args.skip_celery:
            results["celery"] = run_celery(celery_python(), url, args, log)
    rows = {lib: summary(r) for lib, r in results.items()}
    print(f"\nchord of {args.members} no-op members, one worker process, concurrency "
          f"{args.concurrency}, {args.rounds} rounds (median; min)")
    print(f"{'library':<8} {'enqueue s':>10} {'to callback start s':>20} {'min':>8}")
    for lib, row in rows.items():
        print(f"{lib:<8} {row['enqueue_s_median']:>10.3f} "
              f"{row['to_callback_start_s_median']:>20.3f} "
              f"{row['to_callback_start_s_min']:>8.3f}")
    doc = {"benchmark": "workflow_chord", "members": args.members,
           "concurrency": args.concurrency, "rounds": results, "summary": rows,
           "machine": {"python": platform.python_version(), "cpus": os.cpu_count(),
                       "load": os.getloadavg()}}
    save_result("workflow_chord", doc)


if __name__ == "__main__":
    main()
