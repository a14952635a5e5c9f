"""Exponential backoff with full jitter, for loops that retry Redis after an error."""

from __future__ import annotations

import random


class Backoff:
    """Delays doubling from ``base`` up to ``cap`` seconds, with jitter; reset on success."""

    def __init__(self, base: float = 0.1, cap: float = 5.0) -> None:
        self.base = base
        self.cap = cap
        self.failures = 0

    def next_delay(self) -> float:
        """The next delay to sleep, and count one more failure."""
        ceiling = min(self.cap, self.base * (2 ** min(self.failures, 30)))
        self.failures += 1
        return random.uniform(ceiling / 2, ceiling)

    def reset(self) -> None:
        self.failures = 0
