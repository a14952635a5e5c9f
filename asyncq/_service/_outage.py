"""Outage: how a loop that talks to Redis reports failures — once when they start, once when
they end — and how long it waits before trying again.

Every background loop of a worker (fetching, writing outcomes, lease renewal, pub/sub,
forwarding, recovery, cleanup, aggregation) owns one ``Outage``. The first failure logs one
warning ``redis calls failing`` (with the operation and the error); the first success after
failures logs one info ``redis calls recovered`` (with the number of failures and the
duration).
Failures in between are counted, not logged, so an outage of an hour is two log lines per loop,
not thousands. A timeout that a stall of the event loop caused is not a failure (see
``_stalls``).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from structlog.typing import FilteringBoundLogger

from ._backoff import Backoff
from ._stalls import overlapped_stall


class Outage:
    """Failure bookkeeping of one loop: logging at the edges, plus exponential backoff with
    jitter for loops that retry continuously."""

    def __init__(self, log: FilteringBoundLogger, operation: str, *, base: float = 0.1,
                 cap: float = 5.0) -> None:
        self._log = log
        self.operation = operation
        #: Called with the operation at each failure (worker metrics count Redis errors).
        self.on_failure: Callable[[str], None] | None = None
        self.backoff = Backoff(base=base, cap=cap)
        self.failures = 0
        """Consecutive failures (0 while healthy)."""
        self.outages = 0
        """How many outages this loop went through."""
        self._since = 0.0

    @property
    def ongoing(self) -> bool:
        return self.failures > 0

    def failed(self, exc: BaseException, *, exc_info: bool = False, **context: Any) -> float:
        """Count a failure (logging the first one, with the traceback if ``exc_info``); return
        how long to wait before retrying.

        A timeout caused by a stall of the event loop (see ``_stalls``) is not a failure of
        Redis: it is retried at once, neither counted nor logged as one."""
        if overlapped_stall(exc):
            self._log.info("redis call timed out while the event loop was blocked: retried, "
                           "not counted as a Redis failure", operation=self.operation)
            return 0.0
        if self.on_failure is not None:
            self.on_failure(self.operation)
        self.failures += 1
        if self.failures == 1:
            self.outages += 1
            self._since = time.monotonic()
            self._log.warning("redis calls failing", operation=self.operation,
                              error=str(exc) or type(exc).__name__,
                              **({"exc_info": exc} if exc_info else {}), **context)
        return self.backoff.next_delay()

    def succeeded(self) -> None:
        """A call went through: log the end of the outage, if there was one."""
        if self.failures:
            self._log.info("redis calls recovered", operation=self.operation,
                           failures=self.failures,
                           outage_s=round(time.monotonic() - self._since, 2))
            self.failures = 0
            self.backoff.reset()


class QueueOutages:
    """One ``Outage`` per queue, made at its first failure: a queue whose calls fail is logged
    and retried on its own, without holding up the others."""

    def __init__(self, log: FilteringBoundLogger, operation: str,
                 on_failure: Callable[[str], None] | None = None) -> None:
        self._log, self._operation, self._on_failure = log, operation, on_failure
        self.by_queue: dict[str, Outage] = {}

    def failed(self, queue: str, exc: BaseException, *, exc_info: bool = False) -> float:
        outage = self.by_queue.get(queue)
        if outage is None:
            outage = self.by_queue[queue] = Outage(self._log.bind(queue=queue), self._operation)
            outage.on_failure = self._on_failure
        return outage.failed(exc, exc_info=exc_info)

    def succeeded(self, queue: str) -> None:
        if queue in self.by_queue:
            self.by_queue[queue].succeeded()

    @property
    def failing(self) -> list[str]:
        """The queues whose last call failed."""
        return [q for q, o in self.by_queue.items() if o.ongoing]
