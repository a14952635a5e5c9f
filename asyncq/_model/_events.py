"""Task events: what a transition script publishes when a task changes state, decoded."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

import orjson

from .._clock import ms_to_datetime, stored_datetime
from ._info import TaskState, decode_progress
from ._payload import Encoding, decode_json

#: The states after which a task does not change any more (until an operator runs it again).
FINAL_STATES = frozenset({TaskState.COMPLETED, TaskState.ARCHIVED, TaskState.DELETED})


@dataclass(frozen=True, slots=True)
class TaskEvent:
    """One state change of one task, told by the Redis script that made it.

    ``previous`` is None for a task just created. ``result`` is set on a completion whose
    result was at most 64 KiB (``result_too_large`` says a larger one was left in the task,
    where ``Client.wait``/``Inspector.task_info`` read it while its retention lasts).
    ``reason`` says why asyncq rather than a person deleted or archived a task: ``"revoked"``
    (its handler raised RevokeTask), ``"aggregated"`` (merged into a group's task),
    ``"cancelled"`` (deleted by a cancel before it ran) or ``"expired"`` (archived unrun: not
    started by its expiry).

    A progress report (``Task.set_progress``) is an event too, which changes no state:
    ``previous`` and ``state`` are both ACTIVE and ``progress`` is set (a fraction 0.0-1.0),
    with ``progress_message`` and ``progress_data`` as the handler gave them."""

    id: str
    queue: str
    type: str | None
    previous: TaskState | None
    state: TaskState
    at: datetime
    retried: int = 0
    last_error: str | None = None
    next_process_at: datetime | None = None
    result: bytes | None = None
    result_encoding: Encoding = "b"
    result_kept: bool = False
    result_too_large: bool = False
    group: str | None = None
    reason: str | None = None
    progress: float | None = None
    progress_message: str | None = None
    progress_data: Any = None

    @property
    def final(self) -> bool:
        """True for completed, archived and deleted: the task does not change any more."""
        return self.state in FINAL_STATES

    def result_json(self) -> Any:
        """The result as the handler returned it (None when there is none)."""
        if self.result is None:
            return None
        return decode_json(self.result, self.result_encoding)


@dataclass(frozen=True, slots=True)
class EventsLost:
    """Yielded by ``Client.events()`` after its connection to Redis broke and came back:
    events of ``queues`` between ``since`` and ``until`` may be missing. Read the current
    state (``Inspector``) of anything you track there."""

    queues: tuple[str, ...]
    since: datetime
    until: datetime


def decode_event(queue: str, data: bytes) -> TaskEvent:
    """Decode one published event (a JSON header, a newline, then the result bytes); raise
    ValueError when it is not one."""
    head, _, body = data.partition(b"\n")
    try:
        doc = orjson.loads(head)
    except orjson.JSONDecodeError as exc:
        raise ValueError(f"task event is not valid JSON: {exc}") from exc
    if not isinstance(doc, dict):
        raise ValueError("task event is not a JSON object")
    try:
        previous = TaskState(doc["from"]) if doc.get("from") else None
        state = TaskState(doc["to"])
        task_id = str(doc["id"])
        at = ms_to_datetime(int(doc["at"]))
    except (KeyError, TypeError, ValueError) as exc:
        raise ValueError(f"task event lacks a valid field: {exc}") from exc
    if doc.get("p"):  # a progress report: the stored report is the body
        report = decode_progress(body)
        if report is None:
            raise ValueError("progress event without a valid report")
        return TaskEvent(
            id=task_id, queue=queue, type=doc.get("type"), previous=previous, state=state,
            at=at, retried=int(doc.get("retried") or 0), progress=report.value,
            progress_message=report.message, progress_data=report.data)
    renc = doc.get("renc") or ""
    nxt = doc.get("next")
    completed = state is TaskState.COMPLETED
    big = bool(doc.get("big"))
    return TaskEvent(
        id=task_id, queue=queue, type=doc.get("type"), previous=previous, state=state, at=at,
        retried=int(doc.get("retried") or 0), last_error=doc.get("error") or None,
        next_process_at=stored_datetime(int(nxt)) if isinstance(nxt, int | float) else None,
        result=body if completed and renc and not big else None,
        result_encoding="j" if renc == "j" else "b",
        result_kept=bool(doc.get("kept")), result_too_large=big,
        group=doc.get("group") or None, reason=doc.get("reason") or None,
    )
