"""TaskInfo from a stored task record: shared by the Inspector and the client's waits."""

from __future__ import annotations

from collections.abc import Callable

from .._errors import DecodeError
from ._info import TaskInfo, TaskState, decode_progress, task_info
from ._message import TaskMessage, decode_message
from ._rules import HandlerRules
from ._stored import TaskRecord

RulesLookup = Callable[[str, str], HandlerRules | None]
"""``rules(queue, task_type)``: the registration of the handler of that type, when known."""


def record_info(rec: TaskRecord, now: int, rules: RulesLookup | None = None) -> TaskInfo:
    """Decode a task record read at ``now`` (Unix ms); DecodeError when it is not valid.
    ``rules`` gives the handler registrations that decide the values that apply."""
    if not rec.msg and rec.state == "completed":
        # A completion mark (a task that returned nothing): that it succeeded, and when.
        return task_info(TaskMessage(id=rec.id, type="", queue=rec.queue), b"",
                         TaskState.COMPLETED, completed_at_ms=rec.completed_at_ms)
    msg = decode_message(rec.msg)
    try:
        state = TaskState(rec.state)
    except ValueError:
        raise DecodeError(f"task {rec.id!r} has an unknown state {rec.state!r}") from None
    next_at = 0
    if state in (TaskState.SCHEDULED, TaskState.RETRY):
        next_at = rec.score or 0
    elif state is TaskState.PENDING:
        next_at = now
    orphaned = state is TaskState.ACTIVE and (rec.score is None or rec.score <= now)
    return task_info(
        msg, rec.payload, state, retried=rec.retried, last_error=rec.error,
        last_failed_at_ms=rec.failed_at_ms, next_process_at_ms=next_at,
        is_orphaned=orphaned, completed_at_ms=rec.completed_at_ms, result=rec.result,
        result_encoding=rec.result_enc, started_at_ms=rec.started_at_ms,
        last_traceback=rec.traceback, rules=None if rules is None else rules(msg.queue, msg.type),
        progress=decode_progress(rec.progress),
        limited_by=rec.limited_by if state is TaskState.SCHEDULED else (),
    )
