"""Pending watch: an idle worker starts at once a task that no wake-up announces (one a Go
client enqueued, in asynq's layout), instead of at its next idle poll.

While the fetch loop is idle, each queue has one blocked wait (``Broker.watch_pending``) that
ends the moment the queue holds a pending task; the fetch loop then dequeues at once. After a
wake-up a queue's wait is sent again only once a fetch round drained every queue, so a busy
worker sends none. A queue whose wake-ups led twice in a row to a dequeue that leased nothing
(a paused queue, say: its pending tasks cannot be taken) waits one
``idle_poll_interval`` before it waits again, so it costs at most one wait and one dequeue per
poll, never a busy loop; once one of its dequeues leases a task it waits at once again. (The
first empty dequeue does not back off: another worker woken by the same task took it.)

At most ``MAX_WATCHED_QUEUES`` queues are watched (one connection each); the rest, logged at
start, are picked up at the idle poll as before. A broker that needs no watch (asyncq's own
layout) makes this a no-op.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Sequence

import anyio

from .._broker import Broker
from .._errors import BrokerError
from .._log import get_logger
from .._service._outage import QueueOutages

#: Most queues one worker watches (a connection each); beyond it, the idle poll.
MAX_WATCHED_QUEUES = 32

#: Wake-ups in a row followed by a dequeue that leased nothing before a queue backs off.
USELESS_WAKES = 2


class PendingWatch:
    """The blocked waits of one worker's queues, armed by its fetch loop (``drained``) and
    judged by its dequeues (``dequeued``)."""

    def __init__(self, broker: Broker, wake: asyncio.Event, poll: float) -> None:
        self._broker = broker
        self._wake = wake
        self._poll = poll
        self._drain = asyncio.Event()
        """Set at the next fetch round that drains every queue (then replaced)."""
        self._woken: set[str] = set()
        """Queues woken by their wait whose dequeue has not run since."""
        self._useless: dict[str, int] = {}
        """Per queue, the wake-ups in a row whose dequeue leased nothing."""
        self._log = get_logger("pickup")
        self.outages = QueueOutages(self._log, "wait for pending tasks")
        self.unavailable = False
        """True once the broker said it cannot wait so (Redis < 6.2): the idle poll is all."""
        self.watching: list[str] = []
        """The queues with a blocked wait (the first ``MAX_WATCHED_QUEUES`` served)."""

    # -- the fetch loop's side

    def drained(self) -> None:
        """A fetch round found every queue empty: the queues woken since may wait again."""
        event, self._drain = self._drain, asyncio.Event()
        event.set()

    def dequeued(self, queue: str, leased: int) -> None:
        """A dequeue of ``queue`` leased ``leased`` tasks."""
        if leased:
            self._useless.pop(queue, None)
        elif queue in self._woken:
            self._useless[queue] = self._useless.get(queue, 0) + 1
        self._woken.discard(queue)

    # -- the waits

    async def run(self, queues: Sequence[str]) -> None:
        """Wait on each of ``queues`` (the first ``MAX_WATCHED_QUEUES``) until cancelled."""
        probe = None if self.unavailable or not queues else self._broker.watch_pending(queues[0])
        if probe is None:
            self.watching = []
            await anyio.sleep_forever()
            return
        await probe.aclose()  # (never started: nothing was sent)
        self.watching = list(queues[:MAX_WATCHED_QUEUES])
        if len(queues) > MAX_WATCHED_QUEUES:
            self._log.info("too many queues to wait on each: the rest are picked up at the "
                           "idle poll", watched=MAX_WATCHED_QUEUES,
                           polled=len(queues) - MAX_WATCHED_QUEUES)
        async with anyio.create_task_group() as tg:
            for queue in self.watching:
                tg.start_soon(self._watch, queue)
        await anyio.sleep_forever()  # every wait ended (no BLMOVE): nothing more to do

    async def _watch(self, queue: str) -> None:
        """One queue's wait, reconnecting with backoff after a failure."""
        while not self.unavailable:
            waits = self._broker.watch_pending(queue)
            if waits is None:
                return
            try:
                async with contextlib.aclosing(waits):
                    async for _ in waits:
                        self.outages.succeeded(queue)
                        self._woken.add(queue)
                        self._wake.set()
                        await self._armed(queue)
                if not self.unavailable:
                    self.unavailable = True
                    self.watching = []
                    self._log.warning("Redis cannot wait for pending tasks (no BLMOVE: Redis "
                                      "< 6.2): tasks Go enqueues are picked up at the idle poll")
            except BrokerError as exc:
                await anyio.sleep(self.outages.failed(queue, exc))
            except Exception as exc:  # a bug must not stop the worker: the idle poll remains
                await anyio.sleep(self.outages.failed(queue, exc, exc_info=True))

    async def _armed(self, queue: str) -> None:
        """Until ``queue`` may wait again: the fetch loop drained every queue since its
        wake-up, and one poll more after wake-ups that leased nothing."""
        await self._drain.wait()
        if self._useless.get(queue, 0) >= USELESS_WAKES:
            await anyio.sleep(self._poll)
