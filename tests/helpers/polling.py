"""Polling with a deadline for test code that runs without an event loop (process start-ups,
topology set-ups, a Django test client): the sync counterpart of ``asyncq.testing.wait_until``,
so no test hand-writes a sleep loop."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

INTERVAL = 0.05


def poll_until(predicate: Callable[[], Any], *, timeout: float,
               message: str | Callable[[], str], interval: float = INTERVAL) -> Any:
    """Call ``predicate`` until it returns a truthy value; return that value. After
    ``timeout`` seconds raise TimeoutError with ``message`` (a callable is called then: a log
    read at the moment of failure). A predicate may raise to stop at once (a process died)."""
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            text = message() if callable(message) else message
            raise TimeoutError(f"{text} (not within {timeout:g} s)")
        time.sleep(interval)


def answers(attempt: Callable[[], object], errors: tuple[type[BaseException], ...]) -> bool:
    """Whether ``attempt`` (a connection, a request) succeeds: False on one of ``errors``."""
    try:
        attempt()
    except errors:
        return False
    return True
