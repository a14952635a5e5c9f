"""The record of one task a worker is running."""

from __future__ import annotations

import asyncio
from typing import Any

from .._message import TaskMessage
from .._task import Task


class Running:
    """A leased task and its handler: reason is set when the worker cancels it on purpose.

    Its lease is in the worker's lease table."""

    __slots__ = ("atask", "deadline_ms", "grace_timer", "id", "msg", "queue", "reason",
                 "started_ms", "task", "timer")

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


def compute_deadline(now_ms: int, msg: TaskMessage) -> int:
    """When a run must end: now+timeout, the deadline, or the earlier of both.

    Neither (only possible for messages written by hand) means 30 minutes.
    """
    if msg.timeout_ms and msg.deadline_ms:
        return min(now_ms + msg.timeout_ms, msg.deadline_ms)
    if msg.timeout_ms:
        return now_ms + msg.timeout_ms
    if msg.deadline_ms:
        return msg.deadline_ms
    return now_ms + 30 * 60 * 1000
