"""Pickup of tasks by idle asyncq workers in asynq's layout: one-hop hand-offs and wake-ups.

A dequeue that leaves slots free sets the queue's waiters flag and registers the worker as idle
(``asynq_dequeue.lua``); asyncq's scripts that make a task pending (store, requeue, forward)
then lease the next task to that worker and publish it on the worker's shard channel
``asynq:{q}:asyncq:to:<owner>`` in the same script (``asynq_handoff`` in ``_asynq_lib.lua``),
or, with no idle worker registered, publish the queue on ``asynq:asyncq:wake``. Keys and
channels Go never reads; the task ends leased exactly as a dequeue leaves it.

Go's enqueue wakes nobody: a task a Go client enqueued waits for the idle worker's next poll
(``idle_poll_interval``, 2 s by default), or is taken at once by a worker that is busy anyway.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Collection, Sequence, Set

from ..._errors import DecodeError
from ..._log import get_logger
from .._listen import Listeners
from .._messages import CancelRequest, Handoff, QueuesAdded, QueueWake, WorkerSignal
from .._runner import ScriptRunner
from .._shard_listen import listen_shards
from . import _codec
from . import _keys as K

#: Hand-offs younger than this (ms) are left to their message by the owner's dequeue.
HANDOFF_GRACE_MS = 1000


def decode_handoff(queue: str, data: bytes) -> Handoff:
    """A task handed off in one hop (``asynq_handoff``): '<id>\\n<pending_since ns>\\n<lease end
    ms>\\n<length of msg>\\n' then msg (the TaskMessage) and asyncq's message. Raises
    ValueError on a malformed message."""
    head = data.split(b"\n", 4)
    if len(head) != 5:
        raise ValueError("hand-off message without its header fields")
    size = int(head[3])
    rest = head[4]
    if len(rest) < size:
        raise ValueError("hand-off message shorter than its task message")
    raw = _codec.raw_task(head[0].decode(), rest[:size], rest[size:] or None, head[1].decode())
    if isinstance(raw.msg, DecodeError):
        raise ValueError(f"hand-off message with an undecodable TaskMessage: {raw.msg}")
    return Handoff(queue, raw, int(head[2]))


async def handoffs(runner: ScriptRunner, queues: Sequence[str], owner: str,
                   reply_timeout: float, idle: float | None) -> AsyncIterator[Handoff | None]:
    """The tasks handed off to ``owner`` in ``queues``: None once subscribed, then each one
    decoded (a malformed message is logged and skipped: the owner's next dequeue returns its
    task)."""
    log = get_logger("listen")
    channels = {K.extra_keys(q).handoff_channel(owner): q for q in queues}
    async for item in listen_shards(runner, list(channels), reply_timeout, idle):
        if not isinstance(item, tuple):
            yield None
            continue
        queue = channels[item[0]]
        try:
            yield decode_handoff(queue, item[1])
        except (ValueError, UnicodeDecodeError) as exc:
            log.warning("malformed hand-off message ignored", queue=queue, error=str(exc))


async def leave_idle(runner: ScriptRunner, queues: Sequence[str], owner: str,
                     lease_ms: int) -> None:
    """Withdraw ``owner``'s idle registrations (it stops fetching)."""
    await runner.commands("leaving the idle workers", [
        ("ZREM", K.extra_keys(q).idle, f"{lease_ms}:{owner}") for q in queues])


async def signals(listeners: Listeners, queues: Collection[str], *,
                  new_queues: bool = False) -> AsyncIterator[WorkerSignal | None]:
    """Cancel requests published on ``asynq:cancel`` (by Go's Inspector or asyncq), the
    wake-ups of ``queues`` on ``asynq:asyncq:wake`` (a set given is read at each message) and
    with ``new_queues`` the queues asyncq announced as new; None once subscribed."""
    wanted = queues if isinstance(queues, Set) else frozenset(queues)
    channels = [K.CANCEL_CHANNEL, K.WAKE_CHANNEL]
    if new_queues:
        channels.append(K.NEW_QUEUES_CHANNEL)
    async for item in listeners.listen(channels):
        if item is None:
            yield None
        elif item[0] == K.CANCEL_CHANNEL:
            yield CancelRequest(item[1])
        elif item[0] == K.NEW_QUEUES_CHANNEL:
            yield QueuesAdded(tuple(item[1].split("\n")))
        elif item[1] in wanted:
            yield QueueWake(item[1])
