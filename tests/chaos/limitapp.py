"""Handlers with limits for the limit cases of the chaos suite, and their timed ledger.

Each run of a task appends ``"<n> <start> <end>"`` (Unix seconds of the handler's first and
last line) to the list named by its payload's ``l`` on the ledger server
(``$ASYNCQ_CHAOS_LEDGER_URL``), so a case can check how many ran at once and how many started
in any window. Run by ``python -m asyncq worker tests.chaos.limitapp:mux``.
"""

from __future__ import annotations

import asyncio
import os
import time
from typing import Any

from redis.asyncio import BlockingConnectionPool, Redis

from asyncq import ConcurrencyLimit, RateLimit, ServeMux, Task

LEDGER_URL_ENV = "ASYNCQ_CHAOS_LEDGER_URL"
CONCURRENCY = 5
RATE = 200

mux = ServeMux()
_clients: dict[asyncio.AbstractEventLoop, Redis] = {}


def _client() -> Redis:
    loop = asyncio.get_running_loop()
    client = _clients.get(loop)
    if client is None:
        client = _clients[loop] = Redis.from_pool(BlockingConnectionPool.from_url(
            os.environ[LEDGER_URL_ENV], max_connections=50, timeout=60))
    return client


async def _timed(task: Task) -> None:
    doc: dict[str, Any] = task.json()
    start = time.time()
    if doc.get("ms"):
        await asyncio.sleep(doc["ms"] / 1000)
    end = time.time()
    await _client().rpush(doc["l"], f"{doc['n']} {start:.6f} {end:.6f} {doc.get('t', '')}")


@mux.handler("lim:conc", limits=[ConcurrencyLimit(CONCURRENCY)])
async def concurrent(task: Task) -> None:
    """At most CONCURRENCY at once across every worker."""
    await _timed(task)


@mux.handler("lim:rate", limits=[RateLimit(f"{RATE}/s")])
async def rated(task: Task) -> None:
    """At most RATE starts in any second across every worker."""
    await _timed(task)


@mux.handler("lim:keyed", limits=[ConcurrencyLimit(2, key=lambda t: t.json()["t"])])
async def keyed(task: Task) -> None:
    """At most 2 at once per tenant ``t``."""
    await _timed(task)


@mux.handler("lim:free")
async def free(task: Task) -> None:
    """No limit: flows beside the limited types."""
    await _timed(task)
