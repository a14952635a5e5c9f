"""What the task log context costs: per handler run, and per line logged.

    .venv/bin/python -m benchmarks.log_context [--tasks 50000] [--lines 20000] [--rounds 7]
                                               [--no-save]

* **per run**: the worker binds ``task_id``, ``queue``, ``type`` and ``retried`` in each
  handler's own asyncio task (``asyncq._worker._invoke``). Measured as ``--tasks`` asyncio
  tasks each awaiting a no-op handler, created and awaited in batches of 1 000: bare, binding
  the four fields as the worker does (four ``ContextVar.set`` on structlog's variables), and
  through ``bind_contextvars``; the difference is the cost per task, paid whether or not the
  handler logs.
* **binding alone**: the same bindings timed with ``timeit`` in a fresh copy of a context
  each (what a new asyncio task starts with), minus an empty call: the cost itself, without
  the asyncio noise around it.
* **per line**: after ``asyncq.configure_logging("info", "json")`` with stderr sent to
  /dev/null, ``--lines`` lines logged through structlog and through stdlib ``logging`` (the
  bridge), outside a task and inside one (the four fields merged into each line).

Medians over ``--rounds`` rounds (variants alternating). Prints a table and saves
``benchmarks/results/log_context-<UTC time>.json``. Not a test.
"""

from __future__ import annotations

import argparse
import asyncio
import contextvars
import logging
import os
import platform
import statistics
import sys
import time
import timeit
from collections.abc import Callable
from typing import Any

import structlog
from structlog.contextvars import bind_contextvars

import asyncq
from asyncq._worker._invoke import _QUEUE, _RETRIED, _TASK_ID, _TYPE
from benchmarks._results import save_result

BATCH = 1_000


async def _handler() -> None:
    return None


async def _bare() -> None:
    await _handler()


async def _bound() -> None:  # what asyncq._worker._invoke.invoke does
    _TASK_ID.set("3f1c2a9e-4b7d-4e21-9a51-0c2f7d8e6b10")
    _QUEUE.set("default")
    _TYPE.set("email:deliver")
    _RETRIED.set(0)
    await _handler()


async def _bind_contextvars() -> None:  # the same through structlog's call
    bind_contextvars(task_id="3f1c2a9e-4b7d-4e21-9a51-0c2f7d8e6b10", queue="default",
                     type="email:deliver", retried=0)
    await _handler()


async def _runs(body: Callable[[], Any], tasks: int) -> float:
    """Seconds to run ``tasks`` asyncio tasks of ``body``."""
    loop = asyncio.get_running_loop()
    start = time.perf_counter()
    for _ in range(tasks // BATCH):
        await asyncio.gather(*[loop.create_task(body()) for _ in range(BATCH)])
    return time.perf_counter() - start


def _sets() -> None:
    _TASK_ID.set("3f1c2a9e-4b7d-4e21-9a51-0c2f7d8e6b10")
    _QUEUE.set("default")
    _TYPE.set("email:deliver")
    _RETRIED.set(0)


def _bind() -> None:
    bind_contextvars(task_id="3f1c2a9e-4b7d-4e21-9a51-0c2f7d8e6b10", queue="default",
                     type="email:deliver", retried=0)


def _nothing() -> None:
    return None


def _binding_alone(rounds: int, number: int = 200_000) -> dict[str, float]:
    """µs per binding (four sets; bind_contextvars), each in a fresh context copy."""
    base = contextvars.copy_context()
    times: dict[str, list[float]] = {"nothing": [], "bound": [], "bind_contextvars": []}
    for _ in range(rounds):
        for name, fn in (("nothing", _nothing), ("bound", _sets),
                         ("bind_contextvars", _bind)):
            seconds = timeit.timeit(lambda fn=fn: base.copy().run(fn), number=number)
            times[name].append(seconds / number * 1e6)
    median = {k: statistics.median(v) for k, v in times.items()}
    return {k: median[k] - median["nothing"] for k in ("bound", "bind_contextvars")}


def _lines(log: Callable[[], None], lines: int, bound: bool) -> float:
    """Seconds to log ``lines`` lines, in a context with the task fields bound or not."""
    def run() -> float:
        if bound:
            bind_contextvars(task_id="3f1c2a9e-4b7d-4e21-9a51-0c2f7d8e6b10", queue="default",
                             type="email:deliver", retried=0)
        start = time.perf_counter()
        for _ in range(lines):
            log()
        return time.perf_counter() - start
    return contextvars.copy_context().run(run)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--tasks", type=int, default=50_000)
    p.add_argument("--lines", type=int, default=20_000)
    p.add_argument("--rounds", type=int, default=7)
    p.add_argument("--no-save", action="store_true")
    args = p.parse_args()

    variants = {"bare": _bare, "bound": _bound, "bind_contextvars": _bind_contextvars}
    per_run: dict[str, list[float]] = {name: [] for name in variants}

    async def runs() -> None:
        await _runs(_bare, BATCH * 5)  # warm up
        for _ in range(args.rounds):
            for name, body in variants.items():
                per_run[name].append(await _runs(body, args.tasks) / args.tasks * 1e6)

    asyncio.run(runs())

    devnull = open(os.devnull, "w")  # noqa: SIM115 (the whole run)
    stderr, sys.stderr = sys.stderr, devnull
    try:
        asyncq.configure_logging("info", "json")
        slog = structlog.get_logger("bench")
        std = logging.getLogger("bench")
        loggers: dict[str, Callable[[], None]] = {
            "structlog": lambda: slog.info("handler line", n=1),
            "stdlib": lambda: std.info("handler line %d", 1),
        }
        per_line: dict[str, list[float]] = {
            f"{name} {where}": [] for name in loggers for where in ("outside", "in a task")}
        for _ in range(args.rounds):
            for name, log in loggers.items():
                for where in ("outside", "in a task"):
                    seconds = _lines(log, args.lines, where == "in a task")
                    per_line[f"{name} {where}"].append(seconds / args.lines * 1e6)
    finally:
        sys.stderr = stderr
        devnull.close()

    alone_us = _binding_alone(args.rounds)
    run_us = {k: statistics.median(v) for k, v in per_run.items()}
    line_us = {k: statistics.median(v) for k, v in per_line.items()}
    print(f"per handler run ({args.tasks} tasks, median of {args.rounds}):")
    print(f"  bare  {run_us['bare']:7.2f} µs/task")
    print(f"  bound {run_us['bound']:7.2f} µs/task   "
          f"(+{run_us['bound'] - run_us['bare']:.2f} µs for the task context)")
    print(f"  bind_contextvars {run_us['bind_contextvars']:7.2f} µs/task   "
          f"(+{run_us['bind_contextvars'] - run_us['bare']:.2f} µs, structlog's call)")
    print(f"binding alone: {alone_us['bound']:.2f} µs (four sets), "
          f"{alone_us['bind_contextvars']:.2f} µs (bind_contextvars)")
    print(f"per line logged, JSON to /dev/null ({args.lines} lines, median of {args.rounds}):")
    for name, value in line_us.items():
        print(f"  {name:22s} {value:7.2f} µs/line")
    doc = {"python": platform.python_version(), "structlog": structlog.__version__,
           "cpus": os.cpu_count(), "tasks": args.tasks, "lines": args.lines,
           "rounds": args.rounds, "per_run_us": run_us,
           "context_cost_us_per_task": run_us["bound"] - run_us["bare"],
           "binding_alone_us": alone_us,
           "per_line_us": line_us}
    if not args.no_save:
        save_result("log_context", doc)


if __name__ == "__main__":
    main()
