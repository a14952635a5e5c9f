"""Task events in asynq's layout: ``listen_events`` and ``set_listening`` of wire=asynq.

asyncq's transition scripts (``lua/asynq_*.lua``) publish every state change they make, in
asyncq's event format, on the queue's shard channel ``asynq:{q}:asyncq:events`` while some
client keeps ``asynq:{q}:asyncq:listening`` alive: keys and channels Go never reads.

Go's scripts publish nothing, so a task a Go server finishes (or Go's Inspector deletes) ends
without an event. For the waits of ``Client.wait``/``result``, this source rechecks: every task
a wait read in a state that is not final (``note``, fed by ``TaskReads``) is read again every
``RECHECK_INTERVAL`` seconds while its queue is listened to, and a final state found — or the
task gone — is told as an event (after a barrier on the subscription, so an event asyncq
published is always heard first and never doubled). What a waiter then sees: the task's
completion (with the result when Go kept one: a retention) or archiving, else — Go keeps
nothing of a task without a retention — a ``deleted`` event whose error says the outcome is
unknown.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import time
from collections import Counter, OrderedDict
from collections.abc import AsyncGenerator, AsyncIterator, Sequence
from datetime import UTC, datetime
from typing import Any, cast

from ..._clock import Clock, ms_to_datetime
from ..._log import get_logger
from ..._model._events import TaskEvent, decode_event
from ..._model._info import TaskState
from .._runner import ScriptRunner
from .._shard_listen import Flush, listen_shards
from .._values import EventFlush
from . import _keys as K
from ._reads import Read, read_tasks

#: Seconds between rechecks of the tasks waited for (a Go server finishing one publishes
#: nothing): the longest a waiter waits for a Go-finished task beyond its end, plus one read.
RECHECK_INTERVAL = 1.0
#: Most tasks read per recheck (the least recently read first).
RECHECK_BATCH = 500
#: Most tasks rechecked per broker; beyond it the oldest noted are dropped.
WATCH_MAX = 10_000
#: A task noted longer ago than this (seconds) is rechecked no more.
WATCH_HORIZON = 24 * 3600.0
#: Final events remembered, so a recheck never repeats one asyncq published.
HEARD_MAX = 10_000

GONE = ("it ended without an asyncq event — a Go asynq server ran it (Go keeps nothing of a "
        "task without a retention) or Go's Inspector deleted it: its outcome is unknown")

_FINAL_STATES = frozenset({"completed", "archived"})
_FINAL_EVENTS = frozenset({TaskState.COMPLETED, TaskState.ARCHIVED, TaskState.DELETED})


class EventSource:
    """The task events of wire=asynq for one broker, and the recheck of waited-for tasks."""

    def __init__(self, runner: ScriptRunner, clock: Clock, ping_interval: float,
                 reply_timeout: float) -> None:
        self._runner = runner
        self._clock = clock
        self.idle = ping_interval or None
        self.reply_timeout = reply_timeout
        self._log = get_logger("listen")
        self._bad_events = 0
        self._listened: Counter[str] = Counter()
        #: Tasks to recheck: (queue, id) -> (last state read, type, when noted); the next to
        #: read first.
        self._watched: OrderedDict[tuple[str, str], tuple[str, str, float]] = OrderedDict()
        #: Final events heard lately: (queue, id) -> its number (``_seq`` counts them).
        self._heard: OrderedDict[tuple[str, str], int] = OrderedDict()
        self._seq = 0

    # -- what waits read

    def position(self) -> int:
        """How many final events were heard so far: a wait reads it before reading tasks."""
        return self._seq

    def note(self, queue: str, task_id: str, read: Read, since: int) -> None:
        """A wait read this task after ``position()`` was ``since``: recheck it while it is
        not final and its queue is listened to (not when its final event came meanwhile)."""
        key = (queue, task_id)
        rec = read.record
        if (rec is None or rec.state in _FINAL_STATES or not self._listened[queue]
                or self._heard.get(key, 0) > since):
            self._watched.pop(key, None)
            return
        self._watched[key] = (rec.state, read.type, time.monotonic())
        self._watched.move_to_end(key)
        while len(self._watched) > WATCH_MAX:
            self._watched.popitem(last=False)

    # -- the flag

    async def set_listening(self, queues: Sequence[str], ttl_ms: int) -> None:
        await self._runner.commands("flagging event listeners", [
            ("SET", K.extra_keys(q).listening, "1", "PX", ttl_ms) for q in queues])

    # -- the subscription

    async def listen(self, queues: Sequence[str]) -> AsyncIterator[TaskEvent | EventFlush]:
        """The task events of ``queues``, decoded, after an EventFlush once subscribed; plus
        the events the recheck finds. Raises BrokerError when the connection fails."""
        channels = {K.extra_keys(q).events: q for q in queues}
        by_queue = {q: ch for ch, q in channels.items()}
        for q in set(queues):
            self._listened[q] += 1
        shards = listen_shards(self._runner, list(channels), self.reply_timeout, self.idle)
        # The subscription is driven one step at a time by its own task, so the recheck can run
        # beside it; the next step starts only once the last item was taken by the caller.
        step: asyncio.Future[Any] = asyncio.ensure_future(anext(shards))
        recheck: asyncio.Future[tuple[int, list[TaskEvent]]] | None = None
        flush: Flush | None = None
        try:
            while True:
                waiting = {step} if recheck is None else {step, recheck}
                done, _ = await asyncio.wait(waiting, return_when=asyncio.FIRST_COMPLETED)
                if step in done:
                    item = step.result()
                    if isinstance(item, tuple):
                        event = self._decode(channels.get(item[0]) or item[0], item[1])
                        if event is not None:
                            if event.state in _FINAL_EVENTS:
                                self._heard_final(event.queue, event.id)
                            yield event
                    else:
                        flush = item
                        recheck = asyncio.ensure_future(self._recheck(queues, flush, by_queue))
                        yield functools.partial(_flush_queue, flush, by_queue)
                    step = asyncio.ensure_future(anext(shards))
                if recheck is not None and recheck.done():
                    assert flush is not None
                    mark, found = recheck.result()  # (a BrokerError ends the listening)
                    recheck = asyncio.ensure_future(self._recheck(queues, flush, by_queue))
                    for event in found:
                        key = (event.queue, event.id)
                        self._watched.pop(key, None)
                        # Not when its own final event was heard since the read began.
                        if self._heard.get(key, 0) <= mark:
                            self._heard_final(event.queue, event.id)
                            yield event
        finally:
            for fut in (step, recheck):
                if fut is not None:
                    fut.cancel()
                    with contextlib.suppress(Exception, asyncio.CancelledError):
                        await fut
            with contextlib.suppress(Exception, asyncio.CancelledError):
                await cast(AsyncGenerator[Any, None], shards).aclose()
            for q in set(queues):
                self._listened[q] -= 1
                if self._listened[q] <= 0:
                    del self._listened[q]
                    for key in [k for k in self._watched if k[0] == q]:
                        del self._watched[key]

    def _decode(self, queue: str, data: bytes) -> TaskEvent | None:
        try:
            return decode_event(queue, data)
        except ValueError as exc:
            self._bad_events += 1
            if self._bad_events == 1:
                self._log.warning("undecodable task event ignored", queue=queue, error=str(exc))
            return None

    def _heard_final(self, queue: str, task_id: str) -> None:
        key = (queue, task_id)
        self._watched.pop(key, None)
        self._seq += 1
        self._heard[key] = self._seq
        self._heard.move_to_end(key)
        while len(self._heard) > HEARD_MAX:
            self._heard.popitem(last=False)

    # -- the recheck

    async def _recheck(self, queues: Sequence[str], flush: Flush,
                       by_queue: dict[str, str]) -> tuple[int, list[TaskEvent]]:
        """Every ``RECHECK_INTERVAL``, read the tasks due for a recheck in ``queues`` until some
        are found final; once every event published before that read has been taken (the
        flush barrier), returns ``position()`` before the read and the final states found, as
        events (the caller drops those whose own event it heard since). It keeps rechecking
        while the listener's reader is busy elsewhere: a task noted meanwhile is not left to
        wait for the reader's next turn."""
        while True:
            mark, found = await self._recheck_once(queues, flush, by_queue)
            if found:
                return mark, found

    async def _recheck_once(self, queues: Sequence[str], flush: Flush,
                            by_queue: dict[str, str]) -> tuple[int, list[TaskEvent]]:
        await asyncio.sleep(RECHECK_INTERVAL)
        mark = self._seq
        wanted = set(queues)
        horizon = time.monotonic() - WATCH_HORIZON
        keys: list[tuple[str, str]] = []
        for key, (_, _, since) in list(self._watched.items()):
            if since < horizon:
                del self._watched[key]
            elif key[0] in wanted:
                keys.append(key)
                if len(keys) >= RECHECK_BATCH:
                    break
        if not keys:
            return mark, []
        reads = await read_tasks(self._runner, keys, self._clock.now_ms())
        for queue in {q for q, _ in keys}:
            await flush(by_queue[queue])
        found: list[TaskEvent] = []
        for key, read in zip(keys, reads, strict=True):
            last = self._watched.get(key)
            if last is None:
                continue  # (its final event was heard meanwhile)
            event = _final_event(key[0], key[1], last[0], last[1], read, self._clock.now_ms())
            if event is None:
                self._watched[key] = (read.record.state if read.record else last[0], last[1],
                                      last[2])
                self._watched.move_to_end(key)  # (read last: rechecked last)
            else:
                found.append(event)
        return mark, found


def _final_event(queue: str, task_id: str, previous: str, task_type: str, read: Read,
                 now_ms: int) -> TaskEvent | None:
    """The event telling a final state a recheck found (None: the task is not final)."""
    rec = read.record
    try:
        before: TaskState | None = TaskState(previous)
    except ValueError:
        before = None
    kind = task_type or None
    if rec is None:
        return TaskEvent(id=task_id, queue=queue, type=kind, previous=before,
                         state=TaskState.DELETED, at=_at(now_ms), last_error=GONE)
    if rec.state == "completed":
        return TaskEvent(id=task_id, queue=queue, type=read.type or kind, previous=before,
                         state=TaskState.COMPLETED, at=_at(rec.completed_at_ms or now_ms),
                         retried=rec.retried, result=rec.result,
                         result_encoding="j" if rec.result_enc == "j" else "b",
                         result_kept=True)
    if rec.state == "archived":
        return TaskEvent(id=task_id, queue=queue, type=read.type or kind, previous=before,
                         state=TaskState.ARCHIVED, at=_at(rec.failed_at_ms or now_ms),
                         retried=rec.retried, last_error=rec.error or None)
    return None


def _at(ms: int) -> datetime:
    try:
        return ms_to_datetime(ms)
    except (OverflowError, OSError, ValueError):
        return datetime.now(UTC)


async def _flush_queue(flush: Flush, by_queue: dict[str, str], queue: str) -> None:
    await flush(by_queue[queue])
