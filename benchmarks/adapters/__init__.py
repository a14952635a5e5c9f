"""One module per library, each exposing ``Adapter`` with the same small interface.

Producer side (used by the driver, in the library's own venv):

* ``await open(url)`` / ``await close()``;
* ``await enqueue(kind, i)``: one awaited enqueue of task ``kind`` carrying index ``i``;
* ``await enqueue_bulk(kind, indices)``: the library's bulk API (only when ``HAS_BULK``);
* ``await stored(redis)``: how many tasks the library holds in Redis waiting to run (to check
  that an enqueue benchmark really stored every task).

Worker side (in a separate OS process started by the driver): ``run_worker(url, concurrency,
loop)`` blocks, running the library's worker with handlers ``noop``, ``sleep`` (awaits
``asyncio.sleep(0.01)``) and ``lat`` (reports its start time), each written the library's
idiomatic way and each calling ``benchmarks._probe``.

``loop`` is ``"asyncio"`` or ``"uvloop"``; every library runs on the same kind of loop.
"""

from __future__ import annotations

import asyncio
import importlib
from collections.abc import Coroutine
from typing import Any

KINDS = ("noop", "sleep", "lat")
SLEEP_S = 0.01


def load(lib: str) -> Any:
    """The ``Adapter`` class of ``lib`` (``asyncq-asynq`` lives in ``asyncq_asynq_``)."""
    return importlib.import_module(f"benchmarks.adapters.{lib.replace('-', '_')}_").Adapter


def run_loop(coro: Coroutine[Any, Any, Any], loop: str) -> Any:
    """Run ``coro`` on a fresh event loop of the requested kind."""
    if loop == "uvloop":
        import uvloop

        return uvloop.run(coro)
    return asyncio.run(coro)
