"""Pickup of tasks by idle asyncq workers in asynq's layout: one-hop hand-offs and wake-ups.

A dequeue that leaves slots free sets the queue's waiters flag and registers the worker as idle
(``asynq_dequeue.lua``); asyncq's scripts that make a task pending (store, requeue, forward)
then lease the next task to that worker and publish it on the worker's shard channel
``asynq:{q}:asyncq:to:<owner>`` in the same script (``asynq_handoff`` in ``_asynq_lib.lua``),
or, with no idle worker registered, publish the queue on ``asynq:asyncq:wake``. Keys and
channels Go never reads; the task ends leased exactly as a dequeue leaves it.

Go's enqueue wakes nobody: it only LPUSHes the id onto ``asynq:{q}:pending``. For those tasks
an idle worker keeps a blocked wait on that list (``pending_appears``): ``BLMOVE pending
pending LEFT LEFT`` returns as soon as the list holds an id, having put the head back where it
was, and the worker's next dequeue leases the task as usual. Nothing ever leaves ``pending``
(a worker that dies between the wake-up and its dequeue loses nothing, and every worker blocked
on the list wakes). What others see of that no-op move: the list is "modified" (a WATCH on it
fails; neither Go's asynq nor asyncq watches it), keyspace events ``lpop`` and ``lpush`` fire
when enabled, and replicas and the AOF get one ``LMOVE`` per wake-up. On Redis < 6.2 (no
BLMOVE) the wait ends at once (the worker says so) and such tasks wait for its idle poll.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncGenerator, AsyncIterator, Collection, Sequence, Set

from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import RedisError, ResponseError

from ..._errors import DecodeError
from ..._log import get_logger
from .._listen import Listeners
from .._messages import CancelRequest, Handoff, QueuesAdded, QueueWake, WorkerSignal
from .._redis_errors import broker_error
from .._runner import ScriptRunner
from .._shard_listen import listen_shards
from . import _codec
from . import _keys as K

#: How long one blocked wait on a pending list lasts (s) before it is sent again: a quiet
#: queue costs one BLMOVE per this many seconds, and a dead connection is noticed at the latest
#: this long (plus the reply timeout) after it died.
PENDING_BLOCK_S = 20

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


async def pending_appears(runner: ScriptRunner, queue: str,
                          reply_timeout: float) -> AsyncGenerator[None]:
    """Yield each time Go's pending list of ``queue`` holds a task (at once if it holds one
    now), taking nothing: a blocked ``BLMOVE pending pending LEFT LEFT`` on a connection of its
    own (to the queue's master on a cluster), opened at the first wait and closed when the
    iteration ends. Between two items nothing waits: a caller pulls the next one only while it
    is idle. Ends when Redis lacks BLMOVE (< 6.2); BrokerError when the connection fails."""
    key = K.queue_keys(queue).pending
    conn = await runner.own_connection(key)
    try:
        while True:
            try:
                await conn.send_command("BLMOVE", key, key, "LEFT", "LEFT", PENDING_BLOCK_S)
                reply = await conn.read_response(timeout=PENDING_BLOCK_S + reply_timeout)
            except ResponseError as exc:
                if "unknown command" in str(exc).lower():
                    return  # (Redis < 6.2, or BLMOVE renamed away)
                runner.connection_broke()  # a cluster's slot moved: read the slots again
                raise broker_error(f"waiting for pending tasks failed: {exc}", exc) from exc
            except (RedisError, TimeoutError) as exc:
                if isinstance(exc, RedisConnectionError | TimeoutError):
                    runner.connection_broke()
                raise broker_error(f"waiting for pending tasks failed: {exc!r}", exc) from exc
            if reply is not None:
                yield
    finally:
        with contextlib.suppress(Exception):
            await conn.disconnect()
