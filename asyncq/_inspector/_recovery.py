"""An operator's way out for a stranded running task: ``Inspector.recover_task``.

A task stays "active" while a worker holds its lease. When that worker is gone (its server
state expired) or the lease ran out, the operator can send the task back at once instead of
waiting for some worker's recoverer: it is retried now (counted as a failure, like a recovered
lease) or archived when its retries are used up.
"""

from __future__ import annotations

from .._broker import InspectOps, Outcome
from .._clock import Clock
from .._errors import DecodeError, TaskNotFoundError, TaskStateError
from .._model._message import decode_message
from .._model._records import RulesLookup
from .._model._rules import effective


async def recover_task(ops: InspectOps, clock: Clock, queue: str, task_id: str,
                       rules: RulesLookup) -> str:
    """Send an active task whose lease expired or whose worker is gone back to retry (or to
    the archive, its retries used up); returns "retry" or "archive".

    TaskNotFoundError when there is no such task; TaskStateError when it is not active, or its
    lease is live and its worker alive (cancel it instead).
    """
    rec = await ops.task(queue, task_id)
    if rec is None:
        raise TaskNotFoundError(f"task {task_id!r} not found in queue {queue!r}")
    if rec.state != "active":
        raise TaskStateError(f"task {task_id!r} is {rec.state}, not active: nothing to recover")
    owner = await ops.task_owner(queue, task_id) or ""
    now = clock.now_ms()
    expired = rec.score is None or rec.score <= now
    gone = not owner or not await ops.server_alive(owner)
    if not expired and not gone:
        raise TaskStateError(
            f"task {task_id!r} is running on live worker {owner!r} (its lease is renewed): "
            "cancel it instead")
    why = "its lease expired" if expired else f"its worker {owner!r} is gone"
    error = f"LeaseExpiredError: recovered by an operator: {why}"
    try:
        msg = decode_message(rec.msg)
        max_retry = effective(msg, rules(queue, msg.type))[0]
    except DecodeError as exc:
        max_retry, error = 0, f"{error}; {exc}"
    outcome = (Outcome("retry", queue, task_id, retry_at_ms=now, error=error)
               if rec.retried < max_retry else Outcome("archive", queue, task_id, error=error))
    # An expired lease is taken from whoever holds it, unless renewed meanwhile; a live lease
    # of a gone worker only while that worker still holds it.
    settled = await ops.recover_task(outcome, "" if expired else owner, now if expired else "")
    if not settled:
        raise TaskStateError(f"task {task_id!r} changed meanwhile (finished, or its lease was "
                             "renewed): look again")
    return outcome.kind
