"""Reading tasks of asynq's layout as ``TaskRecord`` values: what ``Client.wait``/``result``
read when a wait starts (``broker.inspect.tasks``) and what the event source rechecks.

A task hash gives its state and ``msg`` (the TaskMessage: retries, last error and failure,
completion time), the result Go's ResultWriter or asyncq wrote, and the asyncq-only fields
(asyncq's own message, started_at, traceback); a task without a hash may have left a completion
mark (``asynq:{q}:asyncq:marks``, written by ``asynq_done.lua``). Reads are plain commands,
pipelined: nothing is written.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, NamedTuple, Protocol

from ... import _defaults
from ..._clock import Clock
from ..._errors import DecodeError
from .._replies import text
from .._runner import ScriptRunner
from .._values import TaskRecord
from . import _codec
from . import _keys as K

_FIELDS = (K.F_MSG, K.F_STATE, K.F_AMSG, K.F_RESULT, K.F_RESULT_ENC, K.F_STARTED_AT,
           K.F_TRACEBACK, K.F_ERROR)
_PER_TASK = 5  # commands per task read: the hash fields, then three scores and the mark
#: How long a completion mark answers (ms): a task that returned nothing, without a retention.
MARK_KEEP_MS = round(_defaults.COMPLETION_MARK * 1000)


class Read(NamedTuple):
    """One task as read: its record (None: no such task, nor a mark) and its type ('' unknown)."""

    record: TaskRecord | None
    type: str


async def read_tasks(runner: ScriptRunner, keys: Sequence[tuple[str, str]],
                     now_ms: int) -> list[Read]:
    """The records of ``keys`` ((queue, task id) pairs), in order, read at ``now_ms``."""
    if not keys:
        return []
    commands: list[tuple[Any, ...]] = []
    for queue, task_id in keys:
        qk = K.queue_keys(queue)
        commands += [("HMGET", qk.task(task_id), *_FIELDS), ("ZSCORE", qk.lease, task_id),
                     ("ZSCORE", qk.scheduled, task_id), ("ZSCORE", qk.retry, task_id),
                     ("ZSCORE", K.extra_keys(queue).marks, task_id)]
    replies = await runner.commands("reading tasks", commands)
    return [_read(queue, task_id, replies[i * _PER_TASK:(i + 1) * _PER_TASK], now_ms)
            for i, (queue, task_id) in enumerate(keys)]


def _ms(score: Any) -> int:
    """A score or field in Unix s (bytes or float) as Unix ms."""
    return int(float(score) * 1000)


def _read(queue: str, task_id: str, replies: list[Any], now_ms: int) -> Read:
    fields, lease, scheduled, retry, mark = replies
    msg, state_b, amsg, result, renc, started, traceback, error = fields
    if msg is None:
        if mark is None or int(float(mark)) < now_ms - MARK_KEEP_MS:
            return Read(None, "")
        # A completion mark: that it succeeded, and when (see asynq_mark in _asynq_lib.lua).
        return Read(TaskRecord(task_id, b"", b"", "completed", 0, "", 0, int(float(mark)), None,
                               None, queue=queue), "")
    state = text(state_b) if state_b is not None else ""
    try:
        task = _codec.decode(msg)
        json_msg = amsg or _codec.to_asyncq(task).encode()
    except DecodeError:
        # (An empty message: the reader's decode raises the DecodeError saying so. The
        # reason it was archived for, when it was, is in asyncq's own field.)
        return Read(TaskRecord(task_id, b"", b"", state, 0, _codec.stored_error("", error), 0,
                               0, None, None, queue=queue), "")
    score = {"active": lease, "scheduled": scheduled, "retry": retry}.get(state)
    return Read(TaskRecord(
        id=task_id, msg=json_msg, payload=task.payload,
        state=state, retried=task.retried, error=_codec.stored_error(task.error_msg, error),
        failed_at_ms=task.last_failed_at * 1000, completed_at_ms=task.completed_at * 1000,
        result=result, score=None if score is None else _ms(score),
        result_enc="j" if renc == b"j" else "b",
        started_at_ms=int(started) if started and started.isdigit() else 0, queue=queue,
        traceback=text(traceback) if traceback else ""), task.type)


class Watcher(Protocol):
    """Told of every task a wait read (the event source, ``_events.EventSource``)."""

    def position(self) -> int:
        """A mark of the final events heard so far (read it before reading tasks)."""
        ...

    def note(self, queue: str, task_id: str, read: Read, since: int) -> None:
        """A task as read after ``since`` (a ``position``)."""
        ...


class TaskReads:
    """The task reads of wire=asynq's ``inspect``: ``tasks``, which ``Client.wait``/``result``
    read (each read also goes to ``watcher``, so the event source can recheck tasks that a Go
    server may finish without an event)."""

    def __init__(self, runner: ScriptRunner, clock: Clock, watcher: Watcher) -> None:
        self._runner = runner
        self._clock = clock
        self._watcher = watcher

    async def tasks(self, keys: Sequence[tuple[str, str]]) -> list[TaskRecord | None]:
        since = self._watcher.position()
        reads = await read_tasks(self._runner, keys, self._clock.now_ms())
        for (queue, task_id), read in zip(keys, reads, strict=True):
            self._watcher.note(queue, task_id, read, since)
        return [read.record for read in reads]
