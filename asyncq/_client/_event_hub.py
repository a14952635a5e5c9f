"""EventHub: one shared subscription to the task events of the queues a Client watches.

Every ``Client.events()`` stream and every ``Client.wait()`` of one client share it: one
connection (one per master on a cluster) however many waiters. While a queue is watched the
hub keeps its ``listening`` flag alive, which is what makes the transition scripts publish; a
queue nobody has watched for ``linger`` seconds is dropped and its flag left to lapse, so
queues nobody listens to pay nothing again.

The hub owns one background task, its listener: started by the first ``watch``, cancelled and
awaited by ``close`` (the Client's). The listener handles its own failures (it subscribes
again after a backoff); one that still ends it is logged, and the next ``watch`` starts it
again. Events arrive decoded from the broker (``Broker.listen_events``).

A ``watch`` that cannot be served fails: while watches wait, the listener tries again without
its backoff, and once ``WATCH_ATTEMPTS`` attempts in a row failed the waiting watches raise the
last attempt's BrokerError (Redis is unreachable; the first attempts after a restart may only
meet pooled connections the restart left dead, hence more than one). Waiter futures are only
ever resolved with a value (an event, or a ``Gone``), never an exception: a waiter that stopped
listening leaves nothing unretrieved.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections import Counter, OrderedDict
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from datetime import UTC, datetime

import anyio

from .._broker import Broker, EventFlush
from .._errors import BrokerError
from .._log import get_logger
from .._model._events import EventsLost, TaskEvent
from .._service._outage import Outage

#: Called after every (re)subscription with the queues and when the connection was lost
#: (None: not lost, the subscription changed).
Recheck = Callable[[frozenset[str], datetime | None], object]

#: Failed subscription attempts in a row that make a waiting ``watch`` raise BrokerError.
WATCH_ATTEMPTS = 3
#: Seconds between subscription attempts while a watch waits (instead of the backoff).
WATCH_RETRY_DELAY = 0.05


@dataclass(frozen=True, slots=True)
class Gone:
    """What ends a wait whose task disappeared without its final event being heard: ``why``
    says how (the event connection was down while it ended)."""

    why: str


Outcome = TaskEvent | Gone


class Stream:
    """The buffer of one ``Client.events()`` iterator: matching events, in order; when it
    overflows the oldest are dropped and an EventsLost says so."""

    def __init__(self, queues: frozenset[str], task_ids: frozenset[str] | None,
                 states: frozenset[str] | None, maxsize: int) -> None:
        self.queues = queues
        self.task_ids = task_ids
        self.states = states
        self.items: asyncio.Queue[TaskEvent | EventsLost] = asyncio.Queue(max(maxsize, 2))

    def wants(self, event: TaskEvent) -> bool:
        return ((self.task_ids is None or event.id in self.task_ids)
                and (self.states is None or event.state.value in self.states))

    def put(self, item: TaskEvent | EventsLost) -> None:
        if self.items.full():
            # The reader fell behind: drop the backlog and say what was lost instead.
            backlog = [self.items.get_nowait() for _ in range(self.items.qsize())]
            first, last = backlog[0], item
            self.items.put_nowait(EventsLost(
                tuple(sorted(self.queues)),
                first.at if isinstance(first, TaskEvent) else first.since,
                last.at if isinstance(last, TaskEvent) else last.until))
        self.items.put_nowait(item)


class EventHub:
    """Subscribes to the events of watched queues, dispatches them to streams and waiters,
    and remembers recent final events so a wait that starts just after the end still sees it."""

    def __init__(self, broker: Broker, *, flag_ttl: float = 30.0, linger: float = 30.0,
                 recent: int = 10_000) -> None:
        self._broker = broker
        self._flag_ttl_ms = int(flag_ttl * 1000)
        self._linger = linger
        self._recent_max = recent
        self._log = get_logger("events")
        # Capped at a second: every outcome published while the hub is down is missed by its
        # waiters (those that keep nothing are lost to them), so it comes back soon after Redis.
        self._outage = Outage(self._log, "listen to task events", base=0.1, cap=1.0)
        self._users: Counter[str] = Counter()
        self._idle_since: dict[str, float] = {}
        self._subscribed: frozenset[str] = frozenset()
        self._streams: set[Stream] = set()
        self._waiters: dict[tuple[str, str], set[asyncio.Future[Outcome]]] = {}
        #: The latest event heard of each task waited for (any state), for a timeout to tell.
        self._latest: dict[tuple[str, str], TaskEvent] = {}
        self._recent: OrderedDict[tuple[str, str], TaskEvent] = OrderedDict()
        self._rechecks: set[Recheck] = set()
        self._changed = asyncio.Event()
        self._progress = asyncio.Event()
        self._down_since: datetime | None = None
        #: Failed subscription attempts so far, and the last one's error (None once subscribed).
        self._failures = 0
        self.last_failure: BaseException | None = None
        self._watches_waiting = 0
        #: How many subscriptions were made so far (a wait tells whether its events could have
        #: been missed: the subscription broke or changed since it began).
        self.generation = 0
        self._task: asyncio.Task[None] | None = None
        self._closing = False  # set by close(): the listener's loop ends even if a cancel
        # request were swallowed by a cancel scope ending at the same moment
        self._flush: EventFlush | None = None

    # -- watching

    async def watch(self, queues: Iterable[str]) -> None:
        """Count one more user of ``queues`` and return once their events are subscribed to
        and published (their listening flags are set). Raises BrokerError (and counts the
        user no more) when a subscription attempt fails meanwhile: Redis cannot be reached."""
        wanted = set(queues)
        for q in wanted:
            self._users[q] += 1
            self._idle_since.pop(q, None)
        if not wanted <= self._subscribed:
            self._changed.set()  # (also wakes a listener waiting out its backoff)
        if self._task is None or self._task.done():
            self._closing = False
            self._task = asyncio.get_running_loop().create_task(self._run())
            self._task.add_done_callback(self._ended)
        failures = self._failures
        self._watches_waiting += 1
        try:
            while not wanted <= self._subscribed:
                if (self._failures - failures >= WATCH_ATTEMPTS
                        and self.last_failure is not None):
                    raise self._cannot_listen(wanted, self.last_failure)
                progress = self._progress
                await progress.wait()
        except BaseException:
            self.unwatch(wanted)
            raise
        finally:
            self._watches_waiting -= 1

    @staticmethod
    def _cannot_listen(queues: set[str], failure: BaseException) -> BrokerError:
        names = ", ".join(repr(q) for q in sorted(queues))
        transient = failure.transient if isinstance(failure, BrokerError) else False
        err = BrokerError(f"cannot listen to the task events of queue {names}: {failure}",
                          transient=transient)
        err.__cause__ = failure
        return err

    def subscribed(self, queue: str) -> bool:
        """Whether the events of ``queue`` are heard right now."""
        return queue in self._subscribed

    @property
    def down_since(self) -> datetime | None:
        """When the subscription broke, while it is being re-established (else None)."""
        return self._down_since

    def unwatch(self, queues: Iterable[str]) -> None:
        """One user fewer; a queue without users is dropped after ``linger`` seconds."""
        now = time.monotonic()
        for q in set(queues):
            self._users[q] -= 1
            if self._users[q] <= 0:
                del self._users[q]
                self._idle_since[q] = now

    async def settle(self, queue: str) -> None:
        """Return once every event of ``queue`` published before this call was dispatched
        (a barrier on the subscription; returns at once when not subscribed or it fails)."""
        flush = self._flush
        if flush is None or queue not in self._subscribed:
            return
        # Any failure, not only a BrokerError: on a connection killed under it, the barrier's
        # PING can meet redis-py reconnecting it while the listener reads it (RuntimeError,
        # AttributeError). The subscription is then broken, and its resubscription rechecks
        # every wait: the barrier has nothing left to guarantee.
        with contextlib.suppress(Exception):
            await flush(queue)

    def recent(self, queue: str, task_id: str) -> TaskEvent | None:
        """The final event of a task, if this hub heard it lately."""
        return self._recent.get((queue, task_id))

    def latest(self, queue: str, task_id: str) -> TaskEvent | None:
        """The latest event heard of a task somebody waits for."""
        return self._latest.get((queue, task_id))

    def waiter(self, queue: str, task_id: str) -> asyncio.Future[Outcome]:
        """A future resolved by the task's next final event, or a Gone (call ``forget`` when
        done)."""
        fut: asyncio.Future[Outcome] = asyncio.get_running_loop().create_future()
        self._waiters.setdefault((queue, task_id), set()).add(fut)
        return fut

    def forget(self, queue: str, task_id: str, fut: asyncio.Future[Outcome]) -> None:
        fut.cancel()  # (nothing resolves it any more; a no-op once resolved)
        key = (queue, task_id)
        futs = self._waiters.get(key)
        if futs is not None:
            futs.discard(fut)
            if not futs:
                del self._waiters[key]
        if key not in self._waiters:
            self._latest.pop(key, None)

    def waiting_in(self, queues: frozenset[str]) -> list[tuple[str, str]]:
        """The (queue, task id) pairs somebody waits for in ``queues``."""
        return [key for key in self._waiters if key[0] in queues]

    def resolve(self, queue: str, task_id: str, outcome: Outcome) -> None:
        """End every wait for this task with its final event, or a Gone."""
        self._latest.pop((queue, task_id), None)
        for fut in self._waiters.pop((queue, task_id), ()):
            if not fut.done():
                fut.set_result(outcome)

    def on_resubscribe(self, recheck: Recheck) -> None:
        """Call ``recheck(queues, lost_since)`` after every (re)subscription: events may have
        been missed before it, so waiters read the current state again."""
        self._rechecks.add(recheck)

    def add_stream(self, stream: Stream) -> None:
        self._streams.add(stream)

    def remove_stream(self, stream: Stream) -> None:
        self._streams.discard(stream)

    async def close(self) -> None:
        self._closing = True
        self._changed.set()
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
            self._task = None
        self._subscribed = frozenset()

    # -- the subscription

    def _ended(self, task: asyncio.Task[None]) -> None:
        """The listener ended other than by ``close``: say why (the next watch restarts it)."""
        if not task.cancelled() and task.exception() is not None:
            self._log.error("task event listener stopped", exc_info=task.exception())
            self._subscribed = frozenset()
            self._failures += 1
            self.last_failure = task.exception()
            self._notify()

    def _notify(self) -> None:
        self._progress.set()
        self._progress = asyncio.Event()

    async def _run(self) -> None:
        while not self._closing:
            self._drop_idle()
            queues = sorted(self._users)
            if not queues and not self._idle_since:
                self._subscribed = frozenset()
                self._changed.clear()
                await self._changed.wait()
                continue
            queues = sorted(set(queues) | set(self._idle_since))
            self._changed.clear()
            failure: BaseException | None = None
            try:
                await self._session(queues)
            except* BrokerError as group:  # (raised inside the session's task group)
                failure = group.exceptions[0]
            except* Exception as group:  # a bug must not end every wait of this client
                failure = group.exceptions[0]
                self._log.error("task event listener failed unexpectedly", exc_info=failure)
            self._flush = None
            if failure is not None:
                if self._subscribed and self._down_since is None:
                    self._down_since = datetime.now(UTC)
                self._subscribed = frozenset()
                self._failures += 1
                self.last_failure = failure
                self._notify()
                # Back off, unless a watch waits for an answer (see WATCH_ATTEMPTS) or a new
                # one comes.
                delay = self._outage.failed(failure)
                if self._watches_waiting:
                    delay = min(delay, WATCH_RETRY_DELAY)
                with anyio.move_on_after(delay):
                    await self._changed.wait()

    def _drop_idle(self) -> None:
        cutoff = time.monotonic() - self._linger
        for q, since in list(self._idle_since.items()):
            if since <= cutoff:
                del self._idle_since[q]

    async def _session(self, queues: list[str]) -> None:
        """One subscription to ``queues``, until it fails or the watched set changes."""
        async with anyio.create_task_group() as tg:
            async def until_changed() -> None:
                # Only a different set of queues makes a new subscription: every one drops
                # the events published while it is made.
                while True:
                    await self._changed.wait()
                    self._changed.clear()
                    if set(queues) != set(self._users) | set(self._idle_since):
                        tg.cancel_scope.cancel()
                        return

            async for item in self._broker.listen_events(queues):
                if not isinstance(item, TaskEvent):
                    self._flush = item
                    await self._broker.set_listening(queues, self._flag_ttl_ms)
                    self._outage.succeeded()
                    self.last_failure = None
                    self._subscribed = frozenset(queues)
                    self._resubscribed(self._subscribed)
                    self._notify()
                    tg.start_soon(self._refresh, queues)
                    tg.start_soon(until_changed)
                    continue
                self._dispatch(item)

    async def _refresh(self, queues: list[str]) -> None:
        """Keep the flags alive (every third of their TTL); drop lingering queues."""
        while True:
            await anyio.sleep(self._flag_ttl_ms / 3000)
            self._drop_idle()
            if set(queues) - set(self._users) - set(self._idle_since):
                # A new subscription without them comes; until it does (a watch may want one
                # back meanwhile, keeping this one), the flags stay alive.
                self._changed.set()
            await self._broker.set_listening(queues, self._flag_ttl_ms)

    def _resubscribed(self, queues: frozenset[str]) -> None:
        self.generation += 1
        since = self._down_since
        if since is not None:
            lost = EventsLost(tuple(sorted(queues)), since, datetime.now(UTC))
            self._down_since = None
            for stream in self._streams:
                if stream.queues & queues:
                    stream.put(lost)
        for recheck in list(self._rechecks):
            recheck(queues, since)

    def _dispatch(self, event: TaskEvent) -> None:
        queue = event.queue
        key = (queue, event.id)
        if event.final:
            self._recent[key] = event
            self._recent.move_to_end(key)
            while len(self._recent) > self._recent_max:
                self._recent.popitem(last=False)
            self.resolve(queue, event.id, event)
        elif key in self._waiters:
            self._latest[key] = event
        for stream in self._streams:
            if queue in stream.queues and stream.wants(event):
                stream.put(event)
