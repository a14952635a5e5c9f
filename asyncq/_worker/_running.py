"""The records of the tasks a worker holds: prefetched (waiting for a slot) and running."""

from __future__ import annotations

import asyncio
from typing import Any

from .._broker import RawTask
from .._model._message import NO_TIMEOUT, TaskMessage
from .._model._task import Task


class Buffered:
    """A leased task waiting for a free slot (prefetch); its lease is in the lease table."""

    __slots__ = ("queue", "raw")

    def __init__(self, queue: str, raw: RawTask) -> None:
        self.queue = queue
        self.raw = raw


class Running:
    """A leased task and its handler: reason is set when the worker cancels it on purpose.

    Its lease is in the worker's lease table."""

    __slots__ = ("atask", "deadline_ms", "grace_timer", "id", "msg", "queue", "reason",
                 "started_ms", "task", "timer", "trace")

    def __init__(self, msg: TaskMessage, task: Task, started_ms: int, deadline_ms: int) -> None:
        self.id = msg.id
        self.queue = msg.queue
        self.msg = msg
        self.task = task
        self.started_ms = started_ms
        self.deadline_ms = deadline_ms
        self.reason: str | None = None  # "deadline" | "cancel" | "lease" | "shutdown"
        self.atask: asyncio.Task[Any] | None = None
        self.timer: asyncio.TimerHandle | None = None
        self.grace_timer: asyncio.TimerHandle | None = None
        #: trace_id/span_id of its run when tracing is on, for the worker's lines about it
        self.trace: dict[str, Any] = {}


def compute_deadline(now_ms: int, msg: TaskMessage) -> int:
    """When a run must end: now+timeout, the deadline, or the earlier of both; 0 when nothing
    limits it (``timeout=0`` without a deadline, stored as NO_TIMEOUT).

    Neither (only possible for messages written by hand) means 30 minutes.
    """
    return limit_of(now_ms, msg)[0]


def limit_of(now_ms: int, msg: TaskMessage) -> tuple[int, str]:
    """``compute_deadline`` and which limit it is: "timeout" or "deadline" ("" for none)."""
    timeout = msg.timeout_ms if msg.timeout_ms > 0 else 0
    if timeout and msg.deadline_ms:
        if now_ms + timeout < msg.deadline_ms:
            return now_ms + timeout, "timeout"
        return msg.deadline_ms, "deadline"
    if timeout:
        return now_ms + timeout, "timeout"
    if msg.deadline_ms:
        return msg.deadline_ms, "deadline"
    if msg.timeout_ms == NO_TIMEOUT:
        return 0, ""
    return now_ms + 30 * 60 * 1000, "timeout"
