"""Retry delays and queue ordering: the pure functions behind retries and priorities."""

from __future__ import annotations

import math
import random
from bisect import bisect_right
from collections.abc import Mapping, Sequence
from functools import reduce

from .._defaults import DEFAULT_RETRY_DELAY_MAX
from .._model._task import Task
from .._validate import is_queue_pattern, queue_matcher, served_queue_name


def default_retry_delay(retried: int, exc: BaseException, task: Task) -> float:
    """Seconds before the next try: retried^4 + 15 + rand(0..29) * (retried + 1), Go asynq's
    default, capped at DEFAULT_RETRY_DELAY_MAX (1 h; 0.9 to 1 times it once the formula
    reaches it, so tasks that failed together do not all come back together).

    The first retry comes after 15-44 s, the sixth after ~11-14 min, every one from the
    ninth on after 54-60 min: the 25 default retries span about 18 hours. Below the cap
    Go asynq servers sharing queues (``wire=asynq``) space retries alike; Go's own delay
    has no cap.
    """
    delay = retried**4 + 15 + random.randrange(30) * (retried + 1)
    if delay < DEFAULT_RETRY_DELAY_MAX:
        return float(delay)
    return DEFAULT_RETRY_DELAY_MAX * (1.0 - random.random() / 10)


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

    A pattern (``tenant:*``) takes its place in that order as one entry of its priority, and
    stands there for the queues it serves (``matched[pattern]``, sorted, changed as they are
    found) in turn: each round starts at the queue after the last one that gave tasks
    (``took``), so one busy queue of the pattern never starves the others.
    """

    def __init__(self, queues: Mapping[str, int], strict: bool,
                 matched: Mapping[str, Sequence[str]] | None = None) -> None:
        self._norm = normalize_priorities(queues)
        self._strict = strict
        self._sorted = sorted(self._norm, key=lambda q: -self._norm[q])
        self._pool = [q for q, p in self._norm.items() for _ in range(p)]
        self._matched: Mapping[str, Sequence[str]] = matched or {}
        self._patterns = {q: queue_matcher(q) for q in queues if is_queue_pattern(q)}
        names = {q: served_queue_name(q) for q in queues if q not in self._patterns}
        if any(q != name for q, name in names.items()):  # (a literal '*' written '\\*')
            self._sorted = [names.get(q, q) for q in self._sorted]
            self._pool = [names.get(q, q) for q in self._pool]
        self._last: dict[str, str] = {}
        """For each pattern, the queue of it that last gave tasks: the next round of the
        pattern starts after it."""
        self._new: dict[str, list[str]] = {}
        """For each pattern, queues just found: its next round starts with them."""

    def __call__(self) -> list[str]:
        if self._strict or len(self._sorted) == 1:
            order = self._sorted
        else:
            pool = self._pool[:]
            random.shuffle(pool)
            order = list(dict.fromkeys(pool))
        if not self._patterns:
            return order
        out: list[str] = []
        for entry in order:
            if entry in self._patterns:
                out += self._turn(entry)
            else:
                out.append(entry)
        return out

    def _turn(self, pattern: str) -> list[str]:
        """The queues of ``pattern``, starting after the one that last gave tasks (those just
        found first, once)."""
        queues = list(self._matched.get(pattern, ()))
        last = self._last.get(pattern)
        if last is not None:
            start = bisect_right(queues, last)
            queues = queues[start:] + queues[:start]
        new = self._new.pop(pattern, None)
        if new:
            queues = list(dict.fromkeys([q for q in new if q in queues] + queues))
        return queues

    def took(self, queue: str) -> None:
        """``queue`` just gave tasks: if a pattern serves it, that pattern's next round
        starts after it."""
        pattern = self._pattern_of(queue)
        if pattern is not None:
            self._last[pattern] = queue

    def found(self, queues: Sequence[str]) -> None:
        """``queues`` were just matched: their pattern's next round tries them first, so the
        first task of a new queue does not wait for a round over all the others."""
        for queue in queues:
            pattern = self._pattern_of(queue)
            if pattern is not None:
                self._new.setdefault(pattern, []).append(queue)

    def _pattern_of(self, queue: str) -> str | None:
        """The pattern serving ``queue`` (the first that matches), None for a configured
        queue."""
        if not self._patterns or queue in self._norm:
            return None
        for pattern, matcher in self._patterns.items():
            if matcher.fullmatch(queue):
                return pattern
        return None
