"""Notifier: tells ``on_state_change`` of every transition this worker makes.

It can never break the worker: events go through a bounded queue (when it is full they are
dropped and counted) consumed by one task; an async callback gets ``callback_timeout`` seconds
per event, a sync one runs in a worker thread so a slow callback never blocks the event loop;
what a callback raises is logged once per exception type.
"""

from __future__ import annotations

import asyncio
import inspect
from datetime import datetime

import anyio

from .._broker import Outcome
from .._clock import Clock, ms_to_datetime
from .._log import get_logger
from .._model._events import TaskEvent
from .._model._info import TaskState
from .._model._message import TaskMessage
from ._config import StateChangeCallback

QUEUE_SIZE = 10_000
CALLBACK_TIMEOUT = 5.0


class Notifier:
    def __init__(self, callback: StateChangeCallback, clock: Clock) -> None:
        self._callback = callback
        self._async = inspect.iscoroutinefunction(callback)
        self._clock = clock
        self._events: asyncio.Queue[TaskEvent] = asyncio.Queue(QUEUE_SIZE)
        self._running: dict[str, tuple[str, int]] = {}  # task id -> (type, retried)
        self._failed_kinds: set[type[BaseException]] = set()
        self._log = get_logger("notifier")
        self.dropped = 0
        self.delivered = 0

    def _now(self) -> datetime:
        return ms_to_datetime(self._clock.now_ms())

    def _put(self, event: TaskEvent) -> None:
        try:
            self._events.put_nowait(event)
        except asyncio.QueueFull:
            self.dropped += 1
            if self.dropped == 1:
                self._log.warning("state-change events dropped: the callback is too slow",
                                  queue_size=QUEUE_SIZE)

    def started(self, msg: TaskMessage, retried: int) -> None:
        """A leased task starts running (pending -> active)."""
        self._running[msg.id] = (msg.type, retried)
        self._put(TaskEvent(id=msg.id, queue=msg.queue, type=msg.type,
                            previous=TaskState.PENDING, state=TaskState.ACTIVE,
                            at=self._now(), retried=retried))

    def written(self, outcome: Outcome) -> None:
        """An outcome of this worker was written."""
        task_type, retried = self._running.pop(outcome.task_id, (None, 0))
        kind = outcome.kind
        state = {"done": TaskState.COMPLETED, "complete": TaskState.COMPLETED,
                 "retry": TaskState.RETRY, "archive": TaskState.ARCHIVED,
                 "requeue": TaskState.PENDING}[kind]
        reason = None
        if kind == "done" and outcome.error:
            state, reason = TaskState.DELETED, "revoked"
        failed = kind in ("retry", "archive")
        if kind == "retry" and outcome.is_failure:
            retried += 1
        self._put(TaskEvent(
            id=outcome.task_id, queue=outcome.queue, type=task_type, previous=TaskState.ACTIVE,
            state=state, at=self._now(), retried=retried,
            last_error=outcome.error or None if failed or reason else None,
            next_process_at=ms_to_datetime(outcome.retry_at_ms) if kind == "retry" else None,
            result=outcome.result if state is TaskState.COMPLETED else None,
            result_encoding="j" if outcome.result_enc == "j" else "b",
            result_kept=kind == "complete", reason=reason))

    async def run(self) -> None:
        """Deliver events until cancelled."""
        while True:
            event = await self._events.get()
            try:
                if self._async:
                    with anyio.fail_after(CALLBACK_TIMEOUT):
                        await self._callback(event)  # type: ignore[misc]
                else:
                    await anyio.to_thread.run_sync(self._callback, event, abandon_on_cancel=True)
                self.delivered += 1
            except Exception as exc:
                if type(exc) not in self._failed_kinds:
                    self._failed_kinds.add(type(exc))
                    self._log.warning("on_state_change callback failed", task_id=event.id,
                                      error=f"{type(exc).__name__}: {exc}")
