"""Helpers of the chaos suite: the ledger reader, worker processes, final-state checks.

Every case follows the same plan: enqueue N tasks with known ids ``<case>-<n>`` whose handlers
count their starts and finishes in the case's ledger (see ``chaosapp``), inject a real fault
into real processes, wait (polling, with a deadline) until nothing is pending, active,
scheduled or in retry, then build a :class:`LedgerReport` from the ledger and the tasks' final
states, and assert it.
"""

from __future__ import annotations

import json
import os
import signal
import sys
import time
import uuid
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import anyio
import psutil
from anyio.abc import Process
from chaosapp import LEDGER_URL_ENV
from redis.asyncio import Redis
from redis.asyncio.retry import Retry
from redis.backoff import ExponentialBackoff
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import TimeoutError as RedisTimeoutError

from asyncq._broker import _keys as K
from asyncq.testing import queue_counts, wait_until
from tests.helpers.processes import ROOT, spawn, worker_process

APP = "tests.chaos.chaosapp:mux"
RUNNER = ROOT / "tests" / "chaos" / "run_worker.py"
REPORT_ENV = "ASYNCQ_CHAOS_REPORT"
"""If set, each case appends its ledger report (one JSON line) to this file."""


# ---------------------------------------------------------------- the ledger


class Ledger:
    """Reads the starts/finishes counters the handlers keep (see ``chaosapp``)."""

    def __init__(self, redis: Redis, name: str) -> None:
        self.redis = redis
        self.key = f"ledger:{{{name}}}:{uuid.uuid4().hex[:8]}"

    async def counts(self, n: int) -> tuple[list[int], list[int]]:
        """(starts, finishes) of tasks 0..n-1."""
        raw = (await self.redis.get(self.key)) or b""
        raw = raw.ljust(2 * n, b"\0")
        return list(raw[0:2 * n:2]), list(raw[1:2 * n:2])

    async def finished(self, n: int) -> int:
        """How many of tasks 0..n-1 finished at least once."""
        _, finishes = await self.counts(n)
        return sum(1 for f in finishes if f)

    async def started(self, n: int) -> int:
        starts, _ = await self.counts(n)
        return sum(1 for s in starts if s)

    async def delete(self) -> None:
        await self.redis.delete(self.key)


def observer(url: str) -> Redis:
    """The test's own connection to a server it faults: read-only, so unlike asyncq's it may
    let redis-py retry (its pooled connections die with every restart or CLIENT KILL)."""
    return Redis.from_url(url, retry=Retry(ExponentialBackoff(cap=0.5), 20),
                          retry_on_error=[RedisConnectionError, RedisTimeoutError])


def task_ids(case: str, n: int) -> list[str]:
    return [f"{case}-{i}" for i in range(n)]


# ---------------------------------------------------------------- final state


@dataclass
class LedgerReport:
    """The final ledger of a case: what the issue asks each case to report."""

    case: str
    enqueued: int
    completed: int = 0
    archived: int = 0
    duplicates: int = 0
    lost: int = 0
    archived_reasons: dict[str, int] = field(default_factory=dict)
    duplicate_ids: list[str] = field(default_factory=list)
    lost_ids: list[str] = field(default_factory=list)
    extra: dict[str, Any] = field(default_factory=dict)

    def publish(self) -> None:
        line = json.dumps(asdict(self) | {"duplicate_ids": self.duplicate_ids[:20],
                                          "lost_ids": self.lost_ids[:20]})
        print(f"\nLEDGER {line}")
        path = os.environ.get(REPORT_ENV)
        if path:
            with open(path, "a", encoding="utf-8") as out:
                out.write(line + "\n")


async def task_states(redis: Redis, queue: str, ids: Sequence[str]) -> list[tuple[str, str]]:
    """(state, error) of each task; state "" when its hash is gone (done, not kept)."""
    qk = K.queue_keys(queue)
    out: list[tuple[str, str]] = []
    for start in range(0, len(ids), 5000):
        pipe = redis.pipeline(transaction=False)
        for task_id in ids[start:start + 5000]:
            pipe.hmget(qk.task(task_id), "state", "error")
        for state, error in await pipe.execute():
            out.append(((state or b"").decode(), (error or b"").decode()))
    return out


async def wait_settled(redis: Redis, queues: Iterable[str], *, timeout: float,
                       message: str = "tasks settled") -> dict[str, dict[str, int]]:
    """Wait until no task of ``queues`` is pending, active, scheduled or in retry."""
    names = list(queues)
    last: dict[str, dict[str, int]] = {}

    async def settled() -> bool:
        for queue in names:
            last[queue] = counts = await queue_counts(redis, queue)
            if counts["pending"] + counts["active"] + counts["scheduled"] + counts["retry"]:
                return False
        return True

    try:
        await wait_until(settled, timeout=timeout, message=message)
    except TimeoutError:
        raise TimeoutError(f"{message}: not within {timeout}s: {last}") from None
    return last


async def build_report(case: str, queue_redis: Redis, queue: str, ledger: Ledger,
                       ids: Sequence[str], *, runs_expected: Sequence[int] | None = None,
                       kept: bool = True) -> LedgerReport:
    """Compare the ledger with the tasks' final states.

    ``kept``: tasks were enqueued with a retention (or return a value), so a completed task is
    still in Redis (state ``completed``); otherwise a completed task is gone or, for a minute,
    only its completion mark (state ``completed`` too).
    ``runs_expected[i]``: how many starts task i needs without any fault (default 1); starts
    beyond that are duplicates.
    """
    starts, finishes = await ledger.counts(len(ids))
    states = await task_states(queue_redis, queue, ids)
    report = LedgerReport(case, enqueued=len(ids))
    for i, task_id in enumerate(ids):
        state, error = states[i]
        expected = 1 if runs_expected is None else runs_expected[i]
        extra_runs = max(0, starts[i] - expected)
        if extra_runs:
            report.duplicates += extra_runs
            report.duplicate_ids.append(task_id)
        done = state == "completed" or (not kept and state == "")
        if state == "archived":
            report.archived += 1
            reason = error.split(":", 1)[0] or "?"
            report.archived_reasons[reason] = report.archived_reasons.get(reason, 0) + 1
        elif done and finishes[i] >= 1:
            report.completed += 1
        else:
            report.lost += 1
            report.lost_ids.append(f"{task_id}({state or 'gone'},s={starts[i]},f={finishes[i]})")
    return report


# ---------------------------------------------------------------- worker processes


def _env(ledger_url: str) -> dict[str, str]:
    return {**os.environ, LEDGER_URL_ENV: ledger_url, "PYTHONPATH": str(ROOT)}


def cli_worker(url: str, queue: str, ledger_url: str, log: Path,
               *extra: str) -> Any:
    """``python -m asyncq worker tests.chaos.chaosapp:mux`` serving ``queue``."""
    return worker_process(url, queue, log, *extra, target=APP, env=_env(ledger_url),
                          append=True)


def runner_worker(url: str, ledger_url: str, log: Path, **options: Any) -> Any:
    """``tests/chaos/run_worker.py``: a worker process with any ``WorkerConfig`` options."""
    command = [sys.executable, str(RUNNER), "--redis-url", url,
               "--options", json.dumps(options)]
    return spawn(command, log, env=_env(ledger_url), append=True)


async def stop_process(proc: Process, *, timeout: float) -> tuple[int, float]:
    """SIGTERM ``proc``; return its exit code and how long it took to exit."""
    began = time.monotonic()
    proc.send_signal(signal.SIGTERM)
    with anyio.fail_after(timeout):
        code = await proc.wait()
    return code, time.monotonic() - began


def rss_mb(pid: int) -> float:
    return psutil.Process(pid).memory_info().rss / 2**20
