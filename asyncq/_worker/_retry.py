"""Retry delays and queue ordering: the pure functions behind retries and priorities."""

from __future__ import annotations

import math
import random
from collections.abc import Callable, Mapping
from datetime import timedelta
from functools import reduce

from .._broker import Broker
from .._model._task import Task


def default_retry_delay(retried: int, exc: BaseException, task: Task) -> float:
    """Seconds before the next try: retried^4 + 15 + rand(0..29) * (retried + 1).

    The first retry comes after 15-44 s, the fifth after ~11-14 min, the 25th after ~4 days.
    """
    return float(retried**4 + 15 + random.randrange(30) * (retried + 1))


def retry_delay_policy(
    configured: Callable[[int, BaseException, Task], float | timedelta], broker: Broker,
) -> Callable[[int, BaseException, Task], float | timedelta]:
    """The worker's retry delay policy: ``configured``, unless it is ``default_retry_delay``
    (nobody chose one), then the broker's layout default (``Broker.default_retry_delay``: with
    wire=asynq, the schedule Go servers on the same queues follow)."""
    if configured is not default_retry_delay:
        return configured

    def layout_default(retried: int, exc: BaseException, task: Task) -> float:
        return broker.default_retry_delay(retried)

    return layout_default


def normalize_priorities(queues: Mapping[str, int]) -> dict[str, int]:
    """Divide every priority by their greatest common divisor (zeros are kept as zeros)."""
    positive = [p for p in queues.values() if p > 0]
    divisor = reduce(math.gcd, positive) if positive else 1
    return {q: p // divisor for q, p in queues.items()}


class QueueOrder:
    """The order in which a worker tries its queues on each fetch.

    Strict: always highest priority first. Weighted: a random order in which a queue comes first
    with probability priority / sum(priorities) (a uniform shuffle of each queue repeated
    ``priority`` times, keeping first occurrences).
    """

    def __init__(self, queues: Mapping[str, int], strict: bool) -> None:
        self._norm = normalize_priorities(queues)
        self._strict = strict
        self._sorted = sorted(self._norm, key=lambda q: -self._norm[q])
        self._pool = [q for q, p in self._norm.items() for _ in range(p)]

    def __call__(self) -> list[str]:
        if self._strict or len(self._sorted) == 1:
            return self._sorted
        pool = self._pool[:]
        random.shuffle(pool)
        return list(dict.fromkeys(pool))
