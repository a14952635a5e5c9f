"""The script calls of the task transitions: which script, which keys, which arguments.

Built here once and run by the broker, its maintenance ops and the scheduler's ops (a firing
wraps the same store call in a claim), one ``ScriptCall`` each.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, NamedTuple

from .. import _defaults
from . import _keys as K
from ._protocol import NewTask, Outcome

STATS_TTL_MS = 90 * K.DAY_MS  # daily counters expire 90 days after their first increment
ARCHIVE_MAX_SIZE = _defaults.ARCHIVE_MAX_SIZE
ARCHIVE_MAX_AGE_MS = _defaults.ARCHIVE_MAX_AGE_MS
EVENT_RESULT_MAX = 64 * 1024  # larger results are not sent with the completion event
EXPIRED_PER_DEQUEUE = 1000  # expired tasks one dequeue archives before it hands back (wakes)
ARCHIVE_CAPS = (ARCHIVE_MAX_SIZE, ARCHIVE_MAX_AGE_MS)  # what scripts archiving expired tasks take
DONE_BATCH_MAX = 100  # "done" outcomes of one queue written by one done_batch call, at most


class ScriptCall(NamedTuple):
    """One call of a Lua script of ``lua/``, by name."""

    name: str
    keys: Sequence[str]
    args: Sequence[Any]


def store_call(task: NewTask, now: int) -> ScriptCall:
    """``schedule``, ``add_to_group`` or ``enqueue``, as the task's time and group say."""
    msg = task.msg
    # The producer's enqueue time decides pending vs scheduled, so the state the client
    # reports is the state stored even if time passed between the two reads of the clock.
    now = msg.enqueued_at_ms or now
    queue = msg.queue
    qk = _queue_keys(queue)
    task_key = qk.task_prefix + msg.id
    if task.unique is None:
        lock = qk.unused_lock
    else:  # the lock's name is this layout's: the message carries it (the worker releases it)
        lock = msg.unique_key = qk.unique(*task.unique)
    encoded = msg.encode()
    if task.process_at_ms > now:
        return ScriptCall("schedule", [task_key, qk.scheduled, lock, qk.registered],
                          [msg.id, encoded, task.payload, task.process_at_ms,
                           task.unique_ttl_ms, msg.group, _WAKE, queue])
    if msg.group:
        return ScriptCall("add_to_group",
                          [task_key, qk.group(msg.group), qk.groups, lock, qk.registered],
                          [msg.id, encoded, task.payload, now, task.unique_ttl_ms, msg.group])
    return ScriptCall("enqueue", [task_key, qk.pending, lock, qk.waiters, qk.registered],
                      [msg.id, encoded, task.payload, now, task.unique_ttl_ms, _WAKE, queue])


_queue_keys = K.queue_keys  # (one name lookup fewer on every store)
_WAKE = K.WAKE_CHANNEL


def batch_call(run: Sequence[NewTask], now: int) -> ScriptCall:
    """One ``enqueue_batch`` call storing a run of ready-now tasks of one queue."""
    queue = run[0].msg.queue
    qk = K.queue_keys(queue)
    keys: list[str] = [qk.pending, qk.waiters, qk.registered]
    args: list[Any] = [now, K.WAKE_CHANNEL, queue]
    for task in run:
        msg = task.msg
        if task.unique is None:
            lock = qk.unused_lock
        else:
            lock = msg.unique_key = qk.unique(*task.unique)
        keys += (qk.task(msg.id), lock)
        args += (msg.id, msg.encode(), task.payload, task.unique_ttl_ms)
    return ScriptCall("enqueue_batch", keys, args)


#: Builds the call writing one outcome (``finish_call``), and the call writing a run of "done"
#: outcomes of one queue (``done_batch_call``): what each layout gives ``finish_calls``.
OneCall = Callable[[Outcome, str, int], ScriptCall]
DoneBatchCall = Callable[[str, Sequence[Outcome], str, int], ScriptCall]


def finish_calls(outcomes: Sequence[Outcome], owner: str, now: int, one: OneCall,
                 done_batch: DoneBatchCall) -> list[tuple[ScriptCall, list[int]]]:
    """The calls writing ``outcomes`` of tasks leased to ``owner``, each with the positions of
    the outcomes it writes: the "done" outcomes of a queue together (``done_batch``, up to
    DONE_BATCH_MAX a call: one script call and one counter bump for many tasks), every other
    outcome, and a queue's lone "done", by ``one``. Their replies: ``finish_results``."""
    calls: list[tuple[ScriptCall, list[int]]] = []
    done: dict[str, list[int]] = {}
    for i, o in enumerate(outcomes):
        if o.kind == "done":
            done.setdefault(o.queue, []).append(i)
        else:
            calls.append((one(o, owner, now), [i]))
    for queue, positions in done.items():
        for start in range(0, len(positions), DONE_BATCH_MAX):
            part = positions[start:start + DONE_BATCH_MAX]
            call = (one(outcomes[part[0]], owner, now) if len(part) == 1 else
                    done_batch(queue, [outcomes[i] for i in part], owner, now))
            calls.append((call, part))
    return calls


def finish_results(calls: Sequence[tuple[ScriptCall, list[int]]], replies: Sequence[Any],
                   error: Callable[[str, Exception], Exception]) -> list[bool | Exception]:
    """One result per outcome of ``finish_calls``: whether it was written (False: the lease
    was lost), or the error of its call (``error(script, reply)``)."""
    results: list[bool | Exception] = [False] * sum(len(p) for _, p in calls)
    for (call, positions), reply in zip(calls, replies, strict=True):
        if isinstance(reply, Exception):
            failed = error(call.name, reply)
            for i in positions:
                results[i] = failed
        elif len(positions) == 1:
            results[positions[0]] = bool(reply)
        else:
            for i, flag in zip(positions, reply, strict=True):
                results[i] = bool(flag)
    return results


def done_batch_call(queue: str, outcomes: Sequence[Outcome], owner: str,
                    now: int) -> ScriptCall:
    """One ``done_batch`` call writing "done" outcomes of ``queue`` (see ``done``)."""
    qk = K.queue_keys(queue)
    keys = [qk.active, qk.lease, qk.processed, qk.processed_day(K.day_string(now)), qk.marks]
    args: list[Any] = [owner, now + STATS_TTL_MS, EVENT_RESULT_MAX, now]
    for o in outcomes:
        keys.append(qk.task(o.task_id))
        args += (o.task_id, o.result or b"", "" if o.result is None else o.result_enc, o.error,
                 "1" if o.retention_ms else "0")
    return ScriptCall("done_batch", keys, args)


def finish_call(o: Outcome, owner: str, now: int, lease_cutoff: int | str = "") -> ScriptCall:
    """The script writing outcome ``o`` of a task leased to ``owner`` (any owner, when
    ``lease_cutoff`` is set: recovery of a lease that ended by then)."""
    qk = K.queue_keys(o.queue)
    day = K.day_string(now)
    stats_expiry = now + STATS_TTL_MS
    task_key = qk.task(o.task_id)
    if o.kind == "done":
        # A result too large for the event is not published (the event says so): only a
        # workflow step's outbox record takes it (the script decides, asyncq_result_too_big).
        return ScriptCall("done",
                          [task_key, qk.active, qk.lease, qk.processed, qk.processed_day(day),
                           qk.marks],
                          [o.task_id, owner, stats_expiry, o.result or b"",
                           "" if o.result is None else o.result_enc, o.error,
                           EVENT_RESULT_MAX, "1" if o.retention_ms else "0", now])
    if o.kind == "complete":
        return ScriptCall("mark_complete",
                          [task_key, qk.active, qk.lease, qk.completed, qk.processed,
                           qk.processed_day(day)],
                          [o.task_id, owner, stats_expiry, now, now + o.retention_ms,
                           "" if o.result is None else o.result_enc, o.result or b"",
                           EVENT_RESULT_MAX])
    if o.kind == "requeue":
        return ScriptCall("requeue", [task_key, qk.active, qk.lease, qk.pending, qk.waiters],
                          [o.task_id, owner, now, K.WAKE_CHANNEL, o.queue])
    failure_keys = [qk.processed, qk.processed_day(day), qk.failed, qk.failed_day(day)]
    if o.kind == "expire":
        return ScriptCall("expire", [task_key, qk.active, qk.lease],
                          [o.task_id, owner, o.error, now, *ARCHIVE_CAPS, lease_cutoff])
    if o.kind == "retry":
        return ScriptCall("retry", [task_key, qk.active, qk.lease, qk.retry, *failure_keys],
                          [o.task_id, owner, o.retry_at_ms, o.error, now,
                           "1" if o.is_failure else "0", stats_expiry, lease_cutoff,
                           o.traceback, o.expires_at_ms, *ARCHIVE_CAPS])
    return ScriptCall("archive", [task_key, qk.active, qk.lease, qk.archived, *failure_keys,
                                  qk.archive_limits],
                      [o.task_id, owner, o.error, now, stats_expiry, lease_cutoff,
                       ARCHIVE_MAX_SIZE, now - ARCHIVE_MAX_AGE_MS, qk.task_prefix,
                       o.traceback])
