"""One run of a task in the worker: why a run is stopped (``Stop``), the record of a task the
processor holds (``Buffered`` waiting for a slot, ``Running`` with its handler), and a run's
time limit — when it must end (``limit_of``) and the timers that stop it then
(``DeadlineTimers``).

The processor (``_processor``) keeps these records; how a run ends is decided in ``_outcomes``.
"""

from __future__ import annotations

import asyncio
import enum
from collections.abc import Callable, Mapping
from types import MappingProxyType
from typing import Any

from .._broker import RawTask
from .._defaults import DEFAULT_TIMEOUT_MS
from .._model._message import NO_TIMEOUT, TaskMessage
from .._model._rules import HandlerRules
from .._model._task import Task


class Stop(enum.StrEnum):
    """Why the worker stopped a run on purpose (``Running.reason``); a run the worker did not
    stop has no reason. What each one means for the task is decided in ``_outcomes``."""

    TIMEOUT = "timeout"
    """It ran longer than its timeout: a failure (retried while retries are left)."""
    DEADLINE = "deadline"
    """The deadline it was enqueued with passed: a failure (retried while retries are left)."""
    CANCEL = "cancel"
    """Cancelled on request (``Client.cancel``, the inspector): archived."""
    SHUTDOWN = "shutdown"
    """The worker is shutting down: requeued, not a failure."""
    LEASE_LOST = "lease"
    """Its lease was lost: the task is someone else's now, nothing is written."""


class Buffered:
    """A leased task waiting for a free slot (prefetch); its lease is in the lease table."""

    __slots__ = ("queue", "raw")

    def __init__(self, queue: str, raw: RawTask) -> None:
        self.queue = queue
        self.raw = raw


class Running:
    """A leased task and its handler; ``reason`` is set when the worker stops it on purpose.

    Its lease is in the worker's lease table."""

    __slots__ = ("atask", "deadline_ms", "grace_timer", "id", "msg", "queue", "reason",
                 "rules", "started_ms", "task", "timer", "trace")

    def __init__(self, msg: TaskMessage, task: Task, started_ms: int, deadline_ms: int,
                 rules: HandlerRules | None = None) -> None:
        self.id = msg.id
        self.queue = msg.queue
        self.msg = msg
        #: The task options its handler was registered with (already applied to ``msg``;
        #: kept for its retry policy).
        self.rules = rules
        self.task = task
        self.started_ms = started_ms
        self.deadline_ms = deadline_ms
        self.reason: Stop | None = None
        self.atask: asyncio.Task[Any] | None = None
        """The handler's asyncio task; owned by the processor, which ends every run."""
        self.timer: asyncio.TimerHandle | None = None
        self.grace_timer: asyncio.TimerHandle | None = None
        #: trace_id/span_id of its run when tracing is on, for the worker's lines about it
        self.trace: Mapping[str, Any] = _NO_TRACE


_NO_TRACE: Mapping[str, Any] = MappingProxyType({})  # (shared: one dict fewer per run)


# -- the time limit of a run


def compute_deadline(now_ms: int, msg: TaskMessage) -> int:
    """When a run must end: now+timeout, the deadline, or the earlier of both; 0 when nothing
    limits it (``timeout=0`` without a deadline, stored as NO_TIMEOUT).

    Neither (only possible for messages written by hand) means the default task timeout.
    """
    return limit_of(now_ms, msg)[0]


def limit_of(now_ms: int, msg: TaskMessage) -> tuple[int, Stop | None]:
    """``compute_deadline`` and which limit it is: ``Stop.TIMEOUT`` or ``Stop.DEADLINE`` (None
    when nothing limits the run)."""
    timeout = msg.timeout_ms if msg.timeout_ms > 0 else 0
    if timeout and msg.deadline_ms:
        if now_ms + timeout < msg.deadline_ms:
            return now_ms + timeout, Stop.TIMEOUT
        return msg.deadline_ms, Stop.DEADLINE
    if timeout:
        return now_ms + timeout, Stop.TIMEOUT
    if msg.deadline_ms:
        return msg.deadline_ms, Stop.DEADLINE
    if msg.timeout_ms == NO_TIMEOUT:
        return 0, None
    return now_ms + DEFAULT_TIMEOUT_MS, Stop.TIMEOUT


NEAR_S = 2.0  # a deadline closer than this gets its timer at once
SWEEP_S = 1.0  # how often far deadlines are looked at (< NEAR_S: none is ever missed)


class DeadlineTimers:
    """Calls ``fire(run_id, limit)`` when a run's deadline passes, unless ``disarm`` came
    first, without a loop timer per run.

    A run whose deadline is near gets its own timer at once. One whose deadline is far away
    (the 30-minute default timeout) is only noted; a sweep once a second gives it a timer when
    its deadline comes near. Most runs end long before and never cost a timer (a timer is an
    object, a heap push and a cancellation per task).
    """

    def __init__(self, fire: Callable[[str, Stop], object]) -> None:
        self._fire = fire
        self._far: dict[str, tuple[float, Stop, Running]] = {}
        self._sweep: asyncio.TimerHandle | None = None

    def arm(self, run: Running, delay_s: float, limit: Stop) -> None:
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

    def rearm(self, run: Running, delay_s: float | None, limit: Stop | None) -> None:
        """Stop ``run`` ``delay_s`` seconds from now instead (None: not at all)."""
        self.disarm(run)
        run.timer = None
        if delay_s is not None and limit is not None:
            self.arm(run, max(delay_s, 0.0), limit)

    def _sweep_far(self) -> None:
        loop = asyncio.get_running_loop()
        now = loop.time()
        for run_id, (at, limit, run) in list(self._far.items()):
            if at - now <= NEAR_S:
                del self._far[run_id]
                run.timer = loop.call_later(max(0.0, at - now), self._fire, run_id, limit)
        self._sweep = loop.call_later(SWEEP_S, self._sweep_far) if self._far else None


# -- a limit that counts from when the handler starts


def limit_span(msg: TaskMessage) -> tuple[int, int]:
    """``(timeout, deadline)`` in ms that limit a run of ``msg`` (0: none): ``limit_of`` from
    any start is ``min(start + timeout, deadline)`` of those that are set."""
    if msg.timeout_ms > 0:
        return msg.timeout_ms, msg.deadline_ms
    if msg.deadline_ms or msg.timeout_ms == NO_TIMEOUT:
        return 0, msg.deadline_ms
    return DEFAULT_TIMEOUT_MS, 0


class LateStarts:
    """Moves the time limit of a run whose handler starts after the run did, so that it counts
    from the handler's start: a process-run handler waits for a free child, or for a fresh one
    to start and import its module (the process pool calls ``hold``, then ``restart``). Only
    the relative limit moves; a deadline the task was enqueued with stays where it is."""

    def __init__(self, running: Mapping[str, Running], timers: DeadlineTimers,
                 now_ms: Callable[[], int]) -> None:
        self._running = running
        self._timers = timers
        self._now_ms = now_ms

    def _live(self, task_id: str) -> Running | None:
        run = self._running.get(task_id)
        return run if run is not None and run.reason is None else None

    def span(self, task_id: str) -> tuple[int, int]:
        """``limit_span`` of the run: how its child computes its deadline when the handler
        starts; (0, 0) for a run no longer held."""
        run = self._running.get(task_id)
        return (0, 0) if run is None else limit_span(run.msg)

    def hold(self, task_id: str, budget_s: float | None) -> None:
        """The run's handler has not started: its limit stops counting; it is stopped anyway
        ``budget_s`` seconds from now (None: never), or at its enqueued deadline."""
        run = self._live(task_id)
        if run is None or limit_of(0, run.msg)[1] is None:  # (no limit at all)
            return
        now = self._now_ms()
        at, limit = (0, None) if budget_s is None else (now + round(budget_s * 1000),
                                                        Stop.TIMEOUT)
        cap = run.msg.deadline_ms
        if cap and (not at or cap < at):
            at, limit = cap, Stop.DEADLINE
        self._timers.rearm(run, (at - now) / 1000 if limit else None, limit)

    def restart(self, task_id: str) -> None:
        """The run's handler starts now: its limit counts from now."""
        run = self._live(task_id)
        if run is None:
            return
        now = self._now_ms()
        at, limit = limit_of(now, run.msg)
        run.deadline_ms = run.task._deadline_ms = at
        self._timers.rearm(run, (at - now) / 1000 if limit else None, limit)
