"""The worker side of the FastAPI example: typed tasks and a lifespan database.

    asyncq worker tasks:mux --redis-url redis://127.0.0.1:6390/0

The worker opens the database once (the mux's lifespan) and every task reaches it as
``task.state``; ``summarize`` is a plain function, so it runs in a worker thread.
"""

from __future__ import annotations

import dataclasses
import sqlite3
import threading
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import asyncq


class Database:
    """A tiny SQLite store shared by the worker's tasks (a stand-in for a real pool)."""

    def __init__(self, path: str = ":memory:") -> None:
        self._conn = sqlite3.connect(path, check_same_thread=False)
        self._lock = threading.Lock()
        self._conn.execute("CREATE TABLE IF NOT EXISTS words (report TEXT, word TEXT)")
        self.closed = False

    def add_words(self, report: str, words: list[str]) -> None:
        with self._lock, self._conn:
            self._conn.executemany("INSERT INTO words VALUES (?, ?)",
                                   [(report, w) for w in words])

    def counts(self, report: str) -> dict[str, int]:
        with self._lock:
            rows = self._conn.execute(
                "SELECT word, COUNT(*) FROM words WHERE report = ? GROUP BY word ORDER BY word",
                (report,)).fetchall()
        return dict(rows)

    def close(self) -> None:
        self._conn.close()
        self.closed = True


@asynccontextmanager
async def lifespan() -> AsyncIterator[Database]:
    """Opened before the worker takes its first task, closed after its last outcome."""
    db = Database()
    try:
        yield db
    finally:
        db.close()


mux = asyncq.ServeMux(lifespan=lifespan)


@dataclasses.dataclass
class Summary:
    report: str
    words: int
    top: list[str]


@mux.task("report:ingest", max_retry=3)
async def ingest(task: asyncq.Task, report: str, text: str) -> int:
    """Store the words of a text; returns how many were stored."""
    words = text.lower().split()
    db: Database = task.state
    db.add_words(report, words)
    return len(words)


@mux.task("report:summarize")
def summarize(task: asyncq.Task, report: str, top: int = 3) -> Summary:
    """Blocking work (a database query) in a plain function: it runs in a worker thread."""
    db: Database = task.state
    counts = db.counts(report)
    ranked = sorted(counts, key=lambda w: (-counts[w], w))[:top]
    return Summary(report, sum(counts.values()), ranked)
