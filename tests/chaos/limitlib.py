"""Helpers of the limit cases: worker processes of ``limitapp`` and the timed ledger."""

from __future__ import annotations

import os
from collections.abc import AsyncIterator, Sequence
from contextlib import AsyncExitStack, asynccontextmanager
from pathlib import Path

from anyio.abc import Process
from limitapp import LEDGER_URL_ENV
from redis.asyncio import Redis

from tests.helpers.processes import ROOT, worker_process

APP = "tests.chaos.limitapp:mux"


@asynccontextmanager
async def limit_workers(url: str, queue: str, ledger_url: str, logs: Path, count: int,
                        *extra: str) -> AsyncIterator[list[Process]]:
    """``count`` processes ``python -m asyncq worker tests.chaos.limitapp:mux`` serving
    ``queue``; killed if still running when the block ends."""
    env = {**os.environ, LEDGER_URL_ENV: ledger_url, "PYTHONPATH": str(ROOT)}
    async with AsyncExitStack() as stack:
        yield [await stack.enter_async_context(
                   worker_process(url, queue, logs / f"w{i}.log", *extra, target=APP, env=env,
                                  append=True))
               for i in range(count)]


class Runs:
    """The runs a ledger recorded: (n, start, end, tenant) each."""

    def __init__(self, rows: Sequence[tuple[int, float, float, str]]) -> None:
        self.rows = list(rows)

    @classmethod
    async def read(cls, redis: Redis, key: str) -> Runs:
        rows = []
        for raw in await redis.lrange(key, 0, -1):
            n, start, end, *tenant = raw.decode().split(" ")
            rows.append((int(n), float(start), float(end), tenant[0] if tenant else ""))
        return cls(rows)

    def __len__(self) -> int:
        return len(self.rows)

    def done(self) -> set[int]:
        return {n for n, *_ in self.rows}

    def most_at_once(self, tenant: str | None = None) -> int:
        """The most runs overlapping in time (an end before a start at the same instant)."""
        edges = sorted([(s, 1) for _, s, _, t in self.rows if tenant in (None, t)]
                       + [(e, -1) for _, _, e, t in self.rows if tenant in (None, t)])
        now = most = 0
        for _, step in edges:
            now += step
            most = max(most, now)
        return most

    def most_starts_in(self, window: float) -> int:
        """The most starts in any half-open window [t, t + window)."""
        starts = sorted(s for _, s, _, _ in self.rows)
        most = 0
        first = 0
        for last, s in enumerate(starts):
            while starts[first] <= s - window:
                first += 1
            most = max(most, last - first + 1)
        return most

    def span(self) -> float:
        """From the first start to the last end."""
        return max(e for *_, e, _ in self.rows) - min(s for _, s, _, _ in self.rows)

    def start_span(self) -> float:
        starts = [s for _, s, _, _ in self.rows]
        return max(starts) - min(starts)
