"""Shared by the processor tests: muxes whose handlers fail, and a retry delay long enough that
the forwarder never brings a retried task back during a test.
"""

from __future__ import annotations

import time
from typing import Any

from asyncq import ServeMux, Task

NO_RETRY_SOON = 3600.0  # a retry delay long enough that the forwarder never brings it back


def now_ms() -> int:
    return time.time_ns() // 1_000_000


def never_soon(retried: int, exc: BaseException, task: Task) -> float:
    return NO_RETRY_SOON


def failing_mux(exc_factory: Any, calls: list[Task] | None = None) -> ServeMux:
    mux = ServeMux()

    @mux.handler("fail")
    async def fail(task: Task) -> None:
        if calls is not None:
            calls.append(task)
        raise exc_factory(task)

    return mux


