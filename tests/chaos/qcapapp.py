"""The handler of the queue-cap case of the chaos suite, and its ledger of runs.

Each run of a task appends ``"s <n> <task id> <pid> <time>"`` to the list named by its payload's
``l`` on the ledger server (``$ASYNCQ_CHAOS_LEDGER_URL``) as it starts, and ``"e ..."`` as it
ends (Unix seconds), so a case sees the runs a SIGKILL cut short too. The handler declares no
limit: the queue's cap, set in Redis, is all that bounds it. Run by ``python -m asyncq worker
tests.chaos.qcapapp:mux``.
"""

from __future__ import annotations

import asyncio
import os
import time
from typing import Any

from redis.asyncio import Redis

from asyncq import ServeMux, Task

LEDGER_URL_ENV = "ASYNCQ_CHAOS_LEDGER_URL"

mux = ServeMux()
_clients: dict[asyncio.AbstractEventLoop, Redis] = {}


def _client() -> Redis:
    loop = asyncio.get_running_loop()
    client = _clients.get(loop)
    if client is None:
        client = _clients[loop] = Redis.from_url(os.environ[LEDGER_URL_ENV])
    return client


@mux.handler("cap:work", retry_delay=0.01)
async def work(task: Task) -> None:
    """Sleep ``ms`` milliseconds between a start and an end record."""
    doc: dict[str, Any] = task.json()
    ledger = _client()
    await ledger.rpush(doc["l"], f"s {doc['n']} {task.id} {os.getpid()} {time.time():.6f}")
    await asyncio.sleep(doc["ms"] / 1000)
    await ledger.rpush(doc["l"], f"e {doc['n']} {task.id} {os.getpid()} {time.time():.6f}")
