"""A ServeMux for wildcard-queue tests: ``asyncq worker tests.apps.tenants:mux -q 't:*=1'``.
Each task returns the order in which it finished in its worker process."""

from __future__ import annotations

import asyncio
import itertools

from asyncq import ServeMux, Task

mux = ServeMux()
_finished = itertools.count(1)


@mux.handler("tenants:rank")
async def rank(task: Task) -> int:
    """Works ``payload["ms"]`` milliseconds, then returns its finishing rank (1, 2, ...)."""
    await asyncio.sleep(float(task.json().get("ms", 0)) / 1000)
    return next(_finished)
