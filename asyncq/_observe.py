"""The seam worker metrics plug into: nothing here imports a metrics library.

A worker given ``metrics=`` calls these at each step of a run; without it the worker pays one
``is None`` check per step.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Literal, Protocol

#: How a run ended, as metrics label it.
RunOutcome = Literal["succeeded", "retried", "archived", "cancelled", "revoked",
                     "lease_lost", "requeued"]


class RunObserver(Protocol):
    def bind(self, *, concurrency: int, in_flight: Callable[[], int],
             prefetched: Callable[[], int]) -> None:
        """Called once when the worker starts: its concurrency and live counts."""
        ...

    def started(self, queue: str, task_type: str, wait_s: float | None) -> None:
        """A handler started; ``wait_s``: since the task became pending, when known."""
        ...

    def finished(self, queue: str, task_type: str, outcome: RunOutcome, failed: bool,
                 run_s: float) -> None:
        """A run's outcome was decided (``failed``: the handler's failure caused it)."""
        ...

    def redis_error(self, operation: str) -> None:
        """A Redis call of the worker failed (it will be retried)."""
        ...

    def lease_renewals_failed(self, count: int) -> None:
        """Leases the worker could not renew."""
        ...

    # Optional too, each looked up once: ``bind_loop(blocked)`` (a function giving the seconds
    # since the loop last turned), ``loop_lagged(lag_s)`` (every tick of the loop watch) and
    # ``loop_stalled()`` (a turn longer than stall_warning; called from the watch thread).

    # Optional too: ``thread_left_behind(queue, task_type)``, a sync handler's thread still
    # running after its task ended (timed out, cancelled); the worker looks it up once; and
    # ``thread_returned(queue, task_type)`` when such a thread returns at last.
    # And ``process_over_memory(queue, task_type)``: a handler child replaced after a task
    # because its resident memory passed max_memory_per_child.
    # And ``progress_written(queue, stored)``: a progress report written (or refused).
    # And ``bind_queues(served)``: the configured queue names and patterns, once at start.

    def limit_deferred(self, queue: str, task_type: str) -> None:
        """A leased task was deferred, not run: a rate or concurrency limit refused it. (An
        observer without this method is fine: the worker looks it up once.)"""
        ...
