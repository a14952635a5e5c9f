"""How long asyncq takes to start: ``import asyncq`` and the commands that only print.

    .venv/bin/python -m benchmarks.startup [--ref REF] [--runs 11] [--modes source,cached]
                                           [--top 6] [--no-save]

Each command runs in a fresh interpreter of this venv, ``--runs`` times, the commands
interleaved round by round: ``python -c pass`` (the floor: the interpreter alone),
``python -c "import asyncq"``, ``python -m asyncq --version``, ``asyncq --help`` and
``asyncq task ls --help`` (the venv's console script). Each round times the command's wall
clock, then runs it again under ``-X importtime`` (``PYTHONPROFILEIMPORTTIME``) for the total
import time (the top-level entries' cumulative times), asyncq's own share (the top-level
``asyncq*`` entries), how many modules were loaded, which heavy ones (redis-py, protobuf,
starlette, prometheus_client, opentelemetry, structlog) were, and the modules with the largest
cumulative time (of the run with the median total).

The asyncq measured is a copy of ``asyncq/`` (of the working tree, or of ``--ref``: any commit,
e.g. the merge base, checked out of git without touching the tree) in a temporary directory
put first on ``PYTHONPATH``; the venv's dependencies are the same for both. Two modes:

* ``source``: asyncq's modules compiled at every start (no bytecode cache), as an editable
  checkout starts where ``PYTHONDONTWRITEBYTECODE=1`` is set (this machine sets it); the
  dependencies load their installed bytecode.
* ``cached``: every module from a bytecode cache (``PYTHONPYCACHEPREFIX``, filled by a warm-up
  run), as an installed wheel starts.

Prints a table per mode and saves ``benchmarks/results/startup-<UTC time>.json`` with the
machine, the date and the commit. Not a test: nothing here asserts a speed.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import platform
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from benchmarks._results import save_result

ROOT = Path(__file__).resolve().parent.parent
#: Packages whose loading the fast start avoids (as tests/cli/test_startup.py checks).
HEAVY = ("redis", "hiredis", "google.protobuf", "starlette", "prometheus_client",
         "opentelemetry", "structlog")
MODES = {
    "source": "asyncq compiled at each start (no bytecode cache: PYTHONDONTWRITEBYTECODE=1)",
    "cached": "every module from a warm bytecode cache (as an installed wheel)",
}
_LINE = re.compile(r"^import time:\s+(\d+) \|\s+(\d+) \| ( *)(\S+)$")


@dataclass(frozen=True)
class Command:
    """A command line measured, by the label the table shows."""

    label: str
    argv: list[str]


def commands() -> list[Command]:
    """The commands measured, with this venv's interpreter and its ``asyncq`` script."""
    python = sys.executable
    script = Path(python).parent / "asyncq"
    asyncq = [str(script)] if script.exists() else [python, "-m", "asyncq"]
    return [
        Command("python -c pass", [python, "-c", "pass"]),
        Command('python -c "import asyncq"', [python, "-c", "import asyncq"]),
        Command("python -m asyncq --version", [python, "-m", "asyncq", "--version"]),
        Command("asyncq --help", [*asyncq, "--help"]),
        Command("asyncq task ls --help", [*asyncq, "task", "ls", "--help"]),
    ]


def copy_source(ref: str | None, into: Path) -> dict[str, Any]:
    """Put the ``asyncq`` package of ``ref`` (default: the working tree) under ``into``, without
    bytecode; return what was copied (ref, commit, dirty)."""
    def git(*args: str) -> str:
        return subprocess.run(["git", *args], cwd=ROOT, capture_output=True, text=True,
                              check=True, timeout=60).stdout.strip()

    if ref is None:
        shutil.copytree(ROOT / "asyncq", into / "asyncq",
                        ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
        return {"ref": "working tree", "commit": git("rev-parse", "HEAD"),
                "dirty": bool(git("status", "--porcelain", "--untracked-files=no", "asyncq"))}
    commit = git("rev-parse", "--verify", f"{ref}^{{commit}}")
    archive = subprocess.run(["git", "archive", commit, "asyncq"], cwd=ROOT,
                             capture_output=True, check=True, timeout=60).stdout
    subprocess.run(["tar", "-x", "-C", str(into)], input=archive, check=True, timeout=60)
    return {"ref": ref, "commit": commit, "dirty": False}


def environment(source: Path, mode: str, cache: Path) -> dict[str, str]:
    """The environment of a measured command: ``source`` first on the path, and the mode's
    bytecode setting."""
    env = {k: v for k, v in os.environ.items()
           if k not in ("PYTHONPATH", "PYTHONPYCACHEPREFIX", "PYTHONDONTWRITEBYTECODE",
                        "PYTHONPROFILEIMPORTTIME")}
    env["PYTHONPATH"] = str(source)
    if mode == "source":
        env["PYTHONDONTWRITEBYTECODE"] = "1"
    else:
        env["PYTHONPYCACHEPREFIX"] = str(cache)
    return env


def run_once(cmd: Command, env: dict[str, str], cwd: Path) -> float:
    """Wall seconds of one run of ``cmd`` (its output discarded)."""
    start = time.perf_counter()
    subprocess.run(cmd.argv, env=env, cwd=cwd, stdout=subprocess.DEVNULL,
                   stderr=subprocess.DEVNULL, check=True, timeout=120)
    return time.perf_counter() - start


def import_profile(cmd: Command, env: dict[str, str], cwd: Path) -> list[tuple[int, str, int]]:
    """``-X importtime`` of one run of ``cmd``: (depth, module, cumulative µs) per import."""
    done = subprocess.run(cmd.argv, env={**env, "PYTHONPROFILEIMPORTTIME": "1"}, cwd=cwd,
                          stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
                          check=True, timeout=120)
    found = []
    for line in done.stderr.splitlines():
        match = _LINE.match(line)
        if match:
            found.append((len(match[3]) // 2, match[4], int(match[2])))
    return found


def summary(values: list[float]) -> dict[str, Any]:
    """Median, min and max (ms, rounded) of ``values`` and the values themselves."""
    return {"median": round(statistics.median(values), 2), "min": round(min(values), 2),
            "max": round(max(values), 2), "runs": [round(v, 2) for v in values]}


def measure(cmds: list[Command], source: Path, mode: str, runs: int, top: int,
            cache: Path) -> dict[str, Any]:
    """Every command of ``cmds`` ``runs`` times in ``mode``, interleaved; a result per label."""
    env = environment(source, mode, cache)
    where = subprocess.run([sys.executable, "-c", "import asyncq; print(asyncq.__file__)"],
                           env=env, cwd=source, capture_output=True, text=True, check=True,
                           timeout=60).stdout.strip()
    if not Path(where).is_relative_to(source):
        raise SystemExit(f"the copy is not what imports as asyncq ({where}): not measured")
    if mode == "cached":
        for cmd in cmds:  # fill the bytecode cache
            run_once(cmd, env, source)
    walls: dict[str, list[float]] = {c.label: [] for c in cmds}
    profiles: dict[str, list[list[tuple[int, str, int]]]] = {c.label: [] for c in cmds}
    for _ in range(runs):
        for cmd in cmds:
            walls[cmd.label].append(run_once(cmd, env, source) * 1000)
            profiles[cmd.label].append(import_profile(cmd, env, source))
    results = {}
    for cmd in cmds:
        totals = [sum(us for depth, _, us in p if depth == 0) / 1000
                  for p in profiles[cmd.label]]
        ours = [sum(us for depth, name, us in p if depth == 0 and name.startswith("asyncq"))
                / 1000 for p in profiles[cmd.label]]
        median_run = profiles[cmd.label][totals.index(sorted(totals)[len(totals) // 2])]
        modules = [name for _, name, _ in median_run]
        results[cmd.label] = {
            "argv": [Path(a).name if os.sep in a else a for a in cmd.argv],
            "wall_ms": summary(walls[cmd.label]),
            "import_ms": summary(totals),
            "asyncq_import_ms": summary(ours),
            "modules": len(modules),
            "heavy": sorted({h for h in HEAVY for m in modules
                             if m == h or m.startswith(h + ".")}),
            "top": largest(median_run, top),
        }
    return results


def largest(profile: list[tuple[int, str, int]], count: int) -> list[list[Any]]:
    """The ``count`` modules of ``profile`` with the largest cumulative import time, in ms
    (a module listed twice, as ``redis.asyncio`` inside ``redis`` inside it, once)."""
    found: dict[str, float] = {}
    for _, name, us in sorted(profile, key=lambda entry: -entry[2]):
        found.setdefault(name, round(us / 1000, 1))
    return [[name, ms] for name, ms in list(found.items())[:count]]


def machine() -> dict[str, Any]:
    """What ran it: CPU, cores, OS, Python, and how busy the machine was."""
    cpu = None
    with contextlib.suppress(OSError):
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    return {"cpu_model": cpu, "cores": os.cpu_count(), "os": platform.platform(),
            "python": platform.python_version(), "executable": sys.executable,
            "load_avg": [round(x, 2) for x in os.getloadavg()]}


def print_table(mode: str, results: dict[str, Any], runs: int) -> None:
    """One mode's results: a row per command, then each command's largest imports."""
    print(f"\n{mode}: {MODES[mode]}; median of {runs} runs [min-max], ms")
    print(f"{'command':<28}{'wall':>8} {'[min-max]':<12}{'import':>8} {'[min-max]':<12}"
          f"{'asyncq':>7}{'modules':>8}  heavy loaded")

    def spread(s: dict[str, Any]) -> str:
        """``  64.2 [63-70]      ``: the median and the range of the runs."""
        span = f"[{s['min']:.0f}-{s['max']:.0f}]"
        return f"{s['median']:>8.1f} {span:<12}"

    for label, r in results.items():
        print(f"{label:<28}{spread(r['wall_ms'])}{spread(r['import_ms'])}"
              f"{r['asyncq_import_ms']['median']:>7.1f}{r['modules']:>8}  "
              f"{', '.join(r['heavy']) or '-'}")
    print("largest cumulative imports (run with the median total), ms:")
    for label, r in results.items():
        if label != "python -c pass":
            print(f"  {label}: " + ", ".join(f"{name} {ms:g}" for name, ms in r["top"]))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--ref", help="measure the asyncq of this git ref (default: the "
                                      "working tree)")
    parser.add_argument("--runs", type=int, default=11, help="runs per command (default 11)")
    parser.add_argument("--modes", default="source,cached",
                        help="comma-separated: source, cached (default both)")
    parser.add_argument("--top", type=int, default=6,
                        help="largest imports listed per command (default 6)")
    parser.add_argument("--no-save", action="store_true", help="print the table only")
    args = parser.parse_args()
    modes = [m.strip() for m in args.modes.split(",") if m.strip()]
    if unknown := set(modes) - set(MODES):
        parser.error(f"unknown mode(s) {', '.join(sorted(unknown))}: use {', '.join(MODES)}")
    if args.runs < 1:
        parser.error("--runs must be at least 1")
    started = datetime.now(UTC)
    doc: dict[str, Any] = {"benchmark": "startup", "date": started.isoformat(timespec="seconds"),
                           "machine": machine(), "runs": args.runs, "modes": {}}
    with tempfile.TemporaryDirectory(prefix="asyncq-startup-") as tmp:
        source, cache = Path(tmp) / "src", Path(tmp) / "pycache"
        source.mkdir()
        doc["git"] = copy_source(args.ref, source)
        print(f"asyncq of {doc['git']['ref']} ({doc['git']['commit'][:12]}"
              f"{', uncommitted changes' if doc['git']['dirty'] else ''}), "
              f"Python {platform.python_version()}, {os.cpu_count()} cores, "
              f"load {doc['machine']['load_avg'][0]}")
        cmds = commands()
        for mode in modes:
            doc["modes"][mode] = {"meaning": MODES[mode],
                                  "commands": measure(cmds, source, mode, args.runs, args.top,
                                                      cache)}
            print_table(mode, doc["modes"][mode]["commands"], args.runs)
    doc["machine"]["load_avg_end"] = [round(x, 2) for x in os.getloadavg()]
    if not args.no_save:
        save_result("startup", doc)


if __name__ == "__main__":
    main()
