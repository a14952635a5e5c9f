"""The handlers of the chaos suite, and the ledger they keep.

Workers of a chaos case run in the test process or in subprocesses
(``python -m asyncq worker tests.chaos.chaosapp:mux`` or ``tests/chaos/run_worker.py``), so the
handlers report every execution to Redis: the **ledger** of a case is one string key
``ledger:{case}`` on the session Redis (never the server a case faults), holding two saturating
8-bit counters per task, updated with ``BITFIELD``:

* byte ``2n``: how many times task ``n`` started (a handler began running it);
* byte ``2n + 1``: how many times it finished (the handler returned normally).

A task's payload names the ledger and its index: ``{"l": "ledger:{case}", "n": 17, ...}``.
Bytes keep a million-task ledger at 2 MB, and one ``BITFIELD`` call updates both counters.

The ledger server is ``$ASYNCQ_CHAOS_LEDGER_URL``; an in-process test calls ``use_ledger(url)``.
"""

from __future__ import annotations

import asyncio
import os
import random
import time
from typing import Any

from redis.asyncio import BlockingConnectionPool, Redis

from asyncq import Retry, ServeMux, Task

LEDGER_URL_ENV = "ASYNCQ_CHAOS_LEDGER_URL"

mux = ServeMux()

_url: str | None = None
_clients: dict[asyncio.AbstractEventLoop, Redis] = {}


def use_ledger(url: str) -> None:
    """Point the handlers of this process at the ledger server ``url``."""
    global _url
    _url = url


def _client() -> Redis:
    loop = asyncio.get_running_loop()
    client = _clients.get(loop)
    if client is None:
        url = _url or os.environ[LEDGER_URL_ENV]
        # A blocking pool: hundreds of handlers at once wait for a ledger connection.
        client = _clients[loop] = Redis.from_pool(BlockingConnectionPool.from_url(
            url, max_connections=50, timeout=60))
    return client


async def close_ledger_clients() -> None:
    """Close the ledger connection of the running event loop (test teardown)."""
    client = _clients.pop(asyncio.get_running_loop(), None)
    if client is not None:
        await client.aclose()


async def _record(doc: dict[str, Any], *, started: int, finished: int) -> None:
    n = int(doc["n"])
    args: list[Any] = ["OVERFLOW", "SAT"]
    if started:
        args += ["INCRBY", "u8", f"#{2 * n}", started]
    if finished:
        args += ["INCRBY", "u8", f"#{2 * n + 1}", finished]
    await _client().execute_command("BITFIELD", doc["l"], *args)


def payload(ledger: str, n: int, **extra: Any) -> dict[str, Any]:
    """The payload of chaos task ``n`` recorded in ``ledger``."""
    return {"l": ledger, "n": n, **extra}


@mux.handler("chaos:work")
async def work(task: Task) -> None:
    """Starts, sleeps ``ms`` milliseconds (``ms``: a fixed value or ``[lo, hi]``; on a re-run,
    ``ms_rerun`` if given), finishes."""
    doc = task.json()
    await _record(doc, started=1, finished=0)
    ms = doc.get("ms_rerun", doc.get("ms", 0)) if task.retried else doc.get("ms", 0)
    if isinstance(ms, list):
        ms = random.uniform(ms[0], ms[1])
    if ms:
        await asyncio.sleep(ms / 1000)
    await _record(doc, started=0, finished=1)


@mux.handler("chaos:echo")
async def echo(task: Task) -> int:
    """As ``chaos:work``, then returns its index ``n``: what a waiter of the task expects."""
    await work(task)
    return int(task.json()["n"])


@mux.handler("chaos:flaky")
async def flaky(task: Task) -> None:
    """Fails with probability ``p`` (half of the failures raise an error, retried after the
    worker's ``retry_delay``; half raise ``Retry(delay=0)``), else succeeds. One ledger write
    per run, at its end: the soak kills nothing in mid-run."""
    doc = task.json()
    if random.random() < doc.get("p", 0.0):
        await _record(doc, started=1, finished=0)
        if random.random() < 0.5:
            raise RuntimeError("flaky failure")
        raise Retry(delay=0.0, message="flaky failure")
    await _record(doc, started=1, finished=1)


@mux.handler("chaos:raise")
async def always_raise(task: Task) -> None:
    """Raises on every call."""
    await _record(task.json(), started=1, finished=0)
    raise ValueError("this handler always fails")


@mux.handler("chaos:stubborn")
async def stubborn(task: Task) -> None:
    """Ignores cancellation and never returns (a badly written handler)."""
    await _record(task.json(), started=1, finished=0)
    while True:
        try:
            await asyncio.Event().wait()
        except asyncio.CancelledError:
            continue


@mux.handler("chaos:block")
async def block_loop(task: Task) -> None:
    """Blocks the whole event loop for ``s`` seconds (``time.sleep`` in an async handler)."""
    doc = task.json()
    await _record(doc, started=1, finished=0)
    time.sleep(doc["s"])  # noqa: ASYNC251 - blocking the loop is the point
    await _record(doc, started=0, finished=1)
