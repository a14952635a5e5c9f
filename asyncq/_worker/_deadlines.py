"""DeadlineTimers: each running handler is stopped at its deadline (its timeout, or the task's
deadline), without a loop timer per run.

A run whose deadline is near gets its own timer at once. One whose deadline is far away (the
30-minute default timeout) is only noted; a sweep once a second gives it a timer when its
deadline comes near. Most runs end long before and never cost a timer (a timer is an object,
a heap push and a cancellation per task).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable

from ._running import Running

NEAR_S = 2.0  # a deadline closer than this gets its timer at once
SWEEP_S = 1.0  # how often far deadlines are looked at (< NEAR_S: none is ever missed)


class DeadlineTimers:
    """Calls ``fire(run_id, limit)`` when a run's deadline passes, unless ``disarm`` came
    first."""

    def __init__(self, fire: Callable[[str, str], object]) -> None:
        self._fire = fire
        self._far: dict[str, tuple[float, str, Running]] = {}
        self._sweep: asyncio.TimerHandle | None = None

    def arm(self, run: Running, delay_s: float, limit: str) -> None:
        """Stop ``run`` (for ``limit``) ``delay_s`` seconds from now."""
        loop = asyncio.get_running_loop()
        if delay_s <= NEAR_S:
            run.timer = loop.call_later(delay_s, self._fire, run.id, limit)
            return
        self._far[run.id] = (loop.time() + delay_s, limit, run)
        if self._sweep is None:
            self._sweep = loop.call_later(SWEEP_S, self._sweep_far)

    def disarm(self, run: Running) -> None:
        """The run ended: it will not be stopped."""
        if run.timer is not None:
            run.timer.cancel()
        else:
            self._far.pop(run.id, None)

    def _sweep_far(self) -> None:
        loop = asyncio.get_running_loop()
        now = loop.time()
        for run_id, (at, limit, run) in list(self._far.items()):
            if at - now <= NEAR_S:
                del self._far[run_id]
                run.timer = loop.call_later(max(0.0, at - now), self._fire, run_id, limit)
        self._sweep = loop.call_later(SWEEP_S, self._sweep_far) if self._far else None
