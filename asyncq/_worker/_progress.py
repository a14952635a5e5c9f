"""Progress reports of running tasks (``Task.set_progress``), coalesced: at most one write per
``PROGRESS_INTERVAL`` per task, the latest report winning, and the last one written before the
run's outcome.

A handler's report costs a validation and a call to ``ProgressReports.report``; nothing is
made for a task that never reports, and the processor pays one dict lookup per outcome. The
first report of a run is written at once; a later one is written when the task's previous
write started at least ``PROGRESS_INTERVAL`` ago and none is in flight, else it waits (a newer
report replaces it) for the write in flight to end or for a timer. When the run ends,
``settle`` writes what is left and only then hands the outcome over (``then``): the outcome's
script runs after the last progress script, so a waiter sees the final report before the
result. A sync handler's thread reports through ``call_soon_threadsafe``, at most one callback
waiting per task however often it reports; reports are numbered as they are made, so one a
thread made before a report on the loop never replaces it (the last report made wins).

Each write is ``progress.lua``: it stores the report only while the task is active under this
worker; refused, the run's next report raises LeaseExpiredError. A failed write (Redis down)
is logged, never raised to the handler: a progress report is advisory.
"""

from __future__ import annotations

import asyncio
import itertools
import threading
from collections.abc import Callable
from typing import Any

import anyio
import orjson

from .._broker import Broker, Capability
from .._clock import Clock
from .._errors import BrokerError, LeaseExpiredError
from .._log import get_logger
from .._model._task import Task
from .._service._background import TaskSet

#: Seconds between the starts of two progress writes of one task (at most 10 a second).
PROGRESS_INTERVAL = 0.1
#: Longest a run's outcome waits for its last progress report to be written (Redis slow or
#: down): then the outcome goes ahead without it.
FINAL_WRITE_TIMEOUT = 2.0

Report = tuple[float, "str | None", "bytes | None"]
"""(fraction, message, JSON data)"""


class _Run:
    """The progress state of one running task that reported."""

    __slots__ = ("id", "inflight", "latest", "lost", "made", "queue", "started_at", "then",
                 "timer")

    def __init__(self, queue: str, task_id: str) -> None:
        self.queue = queue
        self.id = task_id
        self.latest: Report | None = None  # the report not written yet
        self.started_at = -1e18  # (loop time) when the last write started
        self.inflight = False
        self.timer: asyncio.TimerHandle | None = None
        self.lost = False  # a write was refused: the task is not ours any more
        self.then: Callable[[], None] | None = None  # the outcome's submission, once settled
        self.made = -1  # the order number of the newest report taken (see ProgressReports)


def encode_report(report: Report, at: int) -> bytes:
    """The JSON object stored and published (``asyncq._model._info.Progress`` decodes it);
    ``at``: when it is written (Unix ms)."""
    value, message, data = report
    doc: dict[str, Any] = {"v": value, "at": at}
    if message is not None:
        doc["m"] = message
    if data is not None:
        doc["d"] = orjson.Fragment(data)
    return orjson.dumps(doc)


class ProgressReports:
    """The progress writes of one worker's running tasks.

    ``running(task)`` tells whether ``task`` is a run the processor still holds (unstopped);
    ``bind(loop)`` gives the worker's event loop (the processor calls it as a run starts)."""

    def __init__(self, broker: Broker, owner: str, clock: Clock,
                 running: Callable[[Task], bool], *,
                 interval: float = PROGRESS_INTERVAL, observer: object = None) -> None:
        self._broker = broker
        # (an optional ``progress_written(queue, stored)`` of the worker's metrics)
        self._observed: Callable[[str, bool], None] | None = getattr(
            observer, "progress_written", None)
        self._owner = owner
        self._clock = clock
        self._running = running
        self.interval = interval
        self.loop: asyncio.AbstractEventLoop | None = None
        self._loop_thread: int | None = None
        self.runs: dict[str, _Run] = {}
        """Tasks that reported, until their outcome was handed over (or their lease lost)."""
        self._posted: dict[str, tuple[int, float, str | None, bytes | None]] = {}
        # Every report is numbered as it is made, on any thread: a thread's report taken in on
        # the loop after a later one made there is older, and dropped (the last made wins).
        self._order = itertools.count()
        self._lock = threading.Lock()  # (guards _posted, written by threads)
        self._writes = TaskSet(self._write_failed)
        self._settled = asyncio.Event()
        self._settled.set()
        self._settling = 0
        self._log = get_logger("progress", server_id=owner)
        self._warned: set[str] = set()
        self._stores = Capability.PROGRESS in broker.capabilities
        self.writes = 0
        """Progress scripts run so far (stored or refused)."""

    @property
    def settling(self) -> int:
        """Outcomes waiting for their run's last progress write."""
        return self._settling

    # -- reports

    def report(self, task: Task, value: float, message: str | None,
               data: bytes | None) -> None:
        """``Task.set_progress``'s sink: on the loop's thread or any other."""
        if not self._running(task):
            raise RuntimeError(f"cannot report progress: task {task.id!r} is no longer "
                               "running (its handler returned or was stopped)")
        if not self._stores:
            self._not_stored()
            return
        task_id = task.id or ""
        run = self.runs.get(task_id)
        if run is not None and run.lost:
            raise LeaseExpiredError(f"task {task_id!r} is no longer leased to this worker: "
                                    "its progress is not recorded (it may run again elsewhere)")
        if threading.get_ident() == self._loop_thread:
            if run is None:
                run = self.runs[task_id] = _Run(task.queue, task_id)
            run.latest = (value, message, data)
            run.made = next(self._order)
            if not (run.inflight or run.timer is not None):
                self._schedule(run)
            return
        loop = self.loop
        if loop is None:
            raise RuntimeError("cannot report progress: the worker's event loop is unknown")
        with self._lock:
            first = task_id not in self._posted
            self._posted[task_id] = (next(self._order), value, message, data)
        if first:
            loop.call_soon_threadsafe(self._take_posted, task)

    def _not_stored(self) -> None:
        """The broker keeps no progress (Go asynq's layout): said once, the reports dropped."""
        if "capability" not in self._warned:
            self._warned.add("capability")
            self._log.warning("progress reports are not stored by this broker (Go asynq's "
                              "layout): they are dropped")

    def bind(self, loop: asyncio.AbstractEventLoop) -> None:
        """The worker's loop, as a run starts (called on that loop's thread)."""
        if self.loop is not loop:
            self.loop = loop
            self._loop_thread = threading.get_ident()

    def _take_posted(self, task: Task) -> None:
        """On the loop: the latest report a thread posted."""
        with self._lock:
            item = self._posted.pop(task.id or "", None)
        if item is None or not self._running(task):
            return
        run = self.runs.get(task.id or "")
        if run is None:
            run = self.runs[task.id or ""] = _Run(task.queue, task.id or "")
        if run.lost or item[0] < run.made:  # (a later report was made on the loop since)
            return
        run.made = item[0]
        run.latest = item[1:]
        if not (run.inflight or run.timer is not None):
            self._schedule(run)

    def _schedule(self, run: _Run) -> None:
        """Write ``run``'s latest report now, or when its interval has passed. (Nothing in
        flight and no timer set: else the write's end or the timer writes it.)"""
        loop = asyncio.get_running_loop()
        wait = run.started_at + self.interval - loop.time()
        if wait <= 0:
            self._write(run)
        else:
            run.timer = loop.call_later(wait, self._due, run)

    def _due(self, run: _Run) -> None:
        run.timer = None
        if not run.inflight and run.latest is not None and not run.lost:
            self._write(run)

    def _write(self, run: _Run) -> None:
        report, run.latest = run.latest, None
        assert report is not None
        run.inflight = True
        run.started_at = asyncio.get_running_loop().time()
        self._writes.spawn(self._send(run, report))

    async def _send(self, run: _Run, report: Report) -> None:
        try:
            self.writes += 1
            stored = await self._broker.set_progress(run.queue, run.id, self._owner,
                                                     encode_report(report, self._clock.now_ms()))
            if self._observed is not None:
                self._observed(run.queue, bool(stored))
            if not stored:
                run.lost = True
                run.latest = None
                self._log.info("progress not recorded: the task is no longer leased to this "
                               "worker", task_id=run.id, queue=run.queue)
        except BrokerError as exc:
            self._warn(run, exc)
        finally:
            run.inflight = False
            self._next(run)

    def _next(self, run: _Run) -> None:
        """After a write: write the report that waited, or hand the outcome over."""
        if run.then is not None:  # settled: the last report goes at once
            if run.latest is not None and not run.lost:
                self._write(run)
            else:
                self._hand_over(run)
        elif run.latest is not None and not run.lost and run.timer is None:
            self._schedule(run)

    def _warn(self, run: _Run, exc: BrokerError) -> None:
        """A failed write is logged (a warning once per kind of error, then at debug)."""
        text = str(exc)
        if text in self._warned:
            self._log.debug("progress write failed", task_id=run.id, error=text)
            return
        if len(self._warned) < 100:
            self._warned.add(text)
        self._log.warning("progress write failed; the handler goes on (a progress report is "
                          "advisory)", task_id=run.id, queue=run.queue, error=text)

    def _write_failed(self, exc: BaseException) -> None:
        self._log.error("progress write failed unexpectedly", exc_info=exc)

    # -- the end of a run

    def settle(self, task_id: str, then: Callable[[], None]) -> None:
        """The run of ``task_id`` ended with an outcome: write its last report (at once,
        whatever the interval), then call ``then`` (the outcome's submission) — at the latest
        after FINAL_WRITE_TIMEOUT."""
        run = self.runs.get(task_id)
        if run is None:
            then()
            return
        if run.timer is not None:
            run.timer.cancel()
            run.timer = None
        run.then = then
        self._settling += 1
        self._settled.clear()
        # (the timeout: the outcome must not wait on a Redis that does not answer)
        run.timer = asyncio.get_running_loop().call_later(FINAL_WRITE_TIMEOUT,
                                                          self._hand_over, run)
        if not run.inflight:
            self._next(run)

    def _hand_over(self, run: _Run) -> None:
        then, run.then = run.then, None
        if then is None:
            return  # (handed over already: the timeout or the last write came second)
        if run.timer is not None:
            run.timer.cancel()
            run.timer = None
        run.latest = None
        if self.runs.get(run.id) is run:
            del self.runs[run.id]
        self._settling -= 1
        if not self._settling:
            self._settled.set()
        then()

    def drop(self, task_id: str) -> None:
        """The run's lease was lost: nothing more is written for it."""
        run = self.runs.pop(task_id, None)
        if run is not None:
            run.lost = True
            run.latest = None
            if run.timer is not None and run.then is None:
                run.timer.cancel()
                run.timer = None

    async def close(self, timeout: float) -> None:
        """Wait (at most ``timeout`` s) for outcomes waiting on a last write to be handed
        over, then stop the writes still running."""
        if self._settling:
            with anyio.move_on_after(timeout):
                await self._settled.wait()
        for run in list(self.runs.values()):
            if run.then is not None:
                self._hand_over(run)
        await self._writes.close(0)
