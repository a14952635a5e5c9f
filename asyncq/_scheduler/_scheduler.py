"""Scheduler: enqueues periodic tasks at the times given by their schedule specs."""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import os
import signal
import socket
import uuid
from collections.abc import Callable, Mapping
from datetime import datetime, tzinfo
from types import TracebackType
from typing import Any, Self

import anyio
from anyio.abc import TaskStatus

from .._broker import Broker, ConnectionOptions, RedisLike, SchedulerEntryRecord, open_broker
from .._clock import SYSTEM_CLOCK, Clock, datetime_to_ms
from .._defaults import SCHEDULER_HEARTBEAT_INTERVAL
from .._log import get_logger
from .._model._info import TaskInfo
from .._model._task import Task
from .._service._lifecycle import start_background, stop_background
from .._service._signals import signal_handlers
from ._backend import CLAIM_RETENTION_MS, SchedulerBackend
from ._entry import Entry, build_entry, validate_entry_id
from ._heartbeat import SchedulerHeartbeat
from ._spec import parse_timezone, timezone_name
from ._store import SchedulerEntry, entry_record, entry_snapshot

#: ``pre_enqueue(task, options)``: called before each firing; may be sync or async.
PreEnqueueHook = Callable[[Task, dict[str, Any]], Any]
#: ``post_enqueue(info, error)``: called after each firing; may be sync or async. ``info`` is the
#: enqueued task, ``error`` why it failed; both None when another replica enqueued this tick.
PostEnqueueHook = Callable[[TaskInfo | None, Exception | None], Any]

MAX_IDLE = 1.0  # the firing loop re-reads the clock at least this often (seconds)
_MAX_CATCH_UP = 10_000  # ticks walked to find the newest due one before giving up on a backlog


class Scheduler:
    """Enqueues registered periodic tasks when their schedule says so.

    ``redis`` is a URL (any form ``Client`` takes; ``connection``, a ``ConnectionOptions``,
    applies to it) or a ``redis.asyncio.Redis``/``RedisCluster`` (left open: it is yours);
    ``broker=`` (or a Broker in place of ``redis``) runs it on an existing Broker, e.g. a
    Client's, which stays open too.
    ``timezone`` (IANA name or tzinfo, default UTC) is how cron specs are read;
    ``heartbeat_interval`` (seconds, default 10) how often the entries are published to Redis
    (they expire after twice that). ``pre_enqueue`` / ``post_enqueue`` hooks are called around
    every firing, sync or async; an exception in a hook is logged, never stops the scheduler.

    ``await scheduler.run()`` runs until ``stop()``, cancellation or SIGTERM/SIGINT;
    ``async with scheduler:`` runs it in the background and stops it on exit; ``tick()`` fires
    what is due once (tests drive it with a FakeClock).

    Any number of schedulers may run the same entries: each firing is enqueued exactly once
    (see ``asyncq._scheduler._backend``). A scheduler that was down does not replay the ticks
    it missed; after a stall it fires only the newest due tick of each entry.
    """

    def __init__(self, redis: RedisLike | Broker | None = None, *, broker: Broker | None = None,
                 timezone: str | tzinfo = "UTC",
                 heartbeat_interval: float = SCHEDULER_HEARTBEAT_INTERVAL,
                 pre_enqueue: PreEnqueueHook | None = None,
                 post_enqueue: PostEnqueueHook | None = None, clock: Clock | None = None,
                 scheduler_id: str | None = None,
                 connection: ConnectionOptions | None = None) -> None:
        if (not isinstance(heartbeat_interval, int | float) or isinstance(heartbeat_interval, bool)
                or not heartbeat_interval > 0):
            raise ValueError(f"heartbeat_interval must be a number of seconds > 0, "
                             f"got {heartbeat_interval!r}")
        for name, hook in (("pre_enqueue", pre_enqueue), ("post_enqueue", post_enqueue)):
            if hook is not None and not callable(hook):
                raise TypeError(f"{name} must be callable, got {hook!r}")
        self.clock = clock or SYSTEM_CLOCK
        self.timezone = parse_timezone(timezone)
        self.id = (validate_entry_id(scheduler_id) if scheduler_id is not None
                   else f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4()}")
        self.broker, self._owns_broker = open_broker(redis, broker, clock=self.clock,
                                                     connection=connection)
        self._pre = pre_enqueue
        self._post = post_enqueue
        self._backend = SchedulerBackend(self.broker, self.clock)
        self._entries: dict[str, Entry] = {}
        self._log = get_logger("scheduler", scheduler_id=self.id)
        self.heartbeat = SchedulerHeartbeat(self._backend, self.id, float(heartbeat_interval),
                                            self._records, self._log)
        self._state = "new"
        self._stopping = False
        self._ready = asyncio.Event()
        self._wake = asyncio.Event()
        # ``run()`` started by ``async with``: its owner is ``__aexit__``, which awaits it (every
        # other background task runs in ``run()``'s task group).
        self._runner: asyncio.Task[None] | None = None

    # -- entries

    def register(self, spec: str, type_or_task: Task | str, payload: object = None, *,
                 entry_id: str | None = None, **options: Any) -> str:
        """Register a periodic task; return its entry id.

        ``spec``: 5-field cron (``"30 2 * * *"``), ``@yearly``/``@annually``, ``@monthly``,
        ``@weekly``, ``@daily``/``@midnight``, ``@hourly`` or ``@every <duration>`` (units h, m,
        s, ms; at least 1s), optionally prefixed ``CRON_TZ=<zone> ``. ``options`` are those of
        ``Client.enqueue``. Everything is validated now: ValueError/TypeError say what is wrong.

        The id is deterministic (same registration, same id in every process); registering an
        identical entry twice is a ValueError unless a distinct ``entry_id`` is given.
        """
        return self.add_entry(self.make_entry(spec, type_or_task, payload, options, entry_id))

    def unregister(self, entry_id: str) -> None:
        """Remove an entry; raises ValueError if no entry has that id."""
        if self._entries.pop(entry_id, None) is None:
            raise ValueError(f"no scheduler entry with id {entry_id!r}")
        self._wake.set()
        self._log.info("entry unregistered", entry_id=entry_id)

    def has_entry(self, entry_id: str) -> bool:
        return entry_id in self._entries

    def entries(self) -> list[SchedulerEntry]:
        """The registered entries, soonest first."""
        snaps = [entry_snapshot(e, self.id) for e in self._entries.values()]
        return sorted(snaps, key=lambda s: (s.next_enqueue_at, s.id))

    def make_entry(self, spec: object, type_or_task: Task | str, payload: object,
                   options: Mapping[str, Any], entry_id: str | None) -> Entry:
        """Internal (``register`` and PeriodicTaskManager): a validated entry in this
        scheduler's time zone, not registered yet. Raises ValueError/TypeError."""
        return build_entry(spec, type_or_task, payload, options, self.timezone, entry_id,
                           self.clock.now_ms())

    def add_entry(self, entry: Entry) -> str:
        """Internal (``register`` and PeriodicTaskManager): register a built entry, due at its
        next tick from now; returns its id."""
        if self._state == "closed":
            raise RuntimeError("this Scheduler has stopped; create a new one")
        if entry.id in self._entries:
            raise ValueError(f"an identical entry is already registered (id {entry.id!r}); "
                             f"pass entry_id= to register it again under another id")
        entry.next_ms = entry.schedule.next_after(self.clock.now_ms())
        self._entries[entry.id] = entry
        self._wake.set()
        self._log.info("entry registered", entry_id=entry.id, spec=entry.spec,
                       task_type=entry.task.type, timezone=timezone_name(entry.tz))
        return entry.id

    def _records(self) -> list[SchedulerEntryRecord]:
        return [entry_record(e, self.id) for e in self._entries.values()]

    # -- firing

    async def tick(self, now: datetime | None = None) -> list[TaskInfo]:
        """Fire every entry due at ``now`` (default: the clock); return the tasks enqueued here.

        Each due entry fires once, for its newest due tick; older missed ticks are skipped.
        A tick another scheduler already enqueued is not enqueued again.
        """
        now_ms = self.clock.now_ms() if now is None else datetime_to_ms(now)
        enqueued: list[TaskInfo] = []
        for entry in list(self._entries.values()):
            if entry.next_ms > now_ms or self._entries.get(entry.id) is not entry:
                continue
            tick_ms = self._newest_due(entry, now_ms)
            entry.next_ms = entry.schedule.next_after(now_ms)
            if tick_ms is None or now_ms - tick_ms > CLAIM_RETENTION_MS:
                self._log.warning("skipping a long-missed tick", entry_id=entry.id,
                                  next_ms=entry.next_ms)
                continue
            info = await self._fire(entry, tick_ms)
            if info is not None:
                enqueued.append(info)
        return enqueued

    @staticmethod
    def _newest_due(entry: Entry, now_ms: int) -> int | None:
        tick = entry.next_ms
        for _ in range(_MAX_CATCH_UP):
            after = entry.schedule.next_after(tick)
            if after > now_ms:
                return tick
            tick = after
        return None

    async def _fire(self, entry: Entry, tick_ms: int) -> TaskInfo | None:
        log = self._log.bind(entry_id=entry.id, task_type=entry.task.type, tick=tick_ms)
        await self._call_hook("pre_enqueue", self._pre, entry.task, dict(entry.options))
        info: TaskInfo | None = None
        error: Exception | None = None
        try:
            info = await self._backend.fire(entry, tick_ms)
        except Exception as exc:  # reported to post_enqueue; the scheduler keeps going
            error = exc
            log.warning("enqueue failed", error=str(exc), error_type=type(exc).__name__)
        else:
            entry.prev_ms = tick_ms
            if info is None:
                log.debug("tick already enqueued by another scheduler")
            else:
                log.info("task enqueued", task_id=info.id, queue=info.queue)
        await self._call_hook("post_enqueue", self._post, info, error)
        if info is not None:
            try:
                await self._backend.record_event(entry, info, tick_ms)
            except Exception as exc:
                log.warning("recording the enqueue event failed", error=str(exc))
        return info

    async def _call_hook(self, name: str, hook: Callable[..., Any] | None, *args: Any) -> None:
        if hook is None:
            return
        try:
            result = hook(*args)
            if inspect.isawaitable(result):
                await result
        except Exception:
            self._log.exception("hook failed", hook=name)

    # -- lifecycle

    @property
    def ready(self) -> bool:
        """True once ``run`` has started firing and heart-beating."""
        return self._ready.is_set()

    @property
    def ready_event(self) -> asyncio.Event:
        """Set once ``run`` has started firing and heart-beating (what ``ready`` reports)."""
        return self._ready

    def stop(self) -> None:
        """Ask ``run`` to return after the firing in progress (if any)."""
        self._stopping = True
        self._wake.set()

    def _signals(self, enabled: bool) -> contextlib.AbstractContextManager[None]:
        return signal_handlers(enabled, {signal.SIGTERM: self.stop, signal.SIGINT: self.stop})

    async def run(self, *, handle_signals: bool = True,
                  task_status: TaskStatus[None] = anyio.TASK_STATUS_IGNORED) -> None:
        """Fire entries on time and publish them until stopped (SIGTERM/SIGINT stop it too);
        ``task_status.started()`` is called once it fires and heart-beats."""
        if self._state != "new":
            raise RuntimeError("a Scheduler runs once; create a new Scheduler to run again")
        self._state = "running"
        now = self.clock.now_ms()
        for entry in self._entries.values():  # no replay of ticks due before start
            entry.next_ms = entry.schedule.next_after(now)
        self._log.info("scheduler starting", entries=len(self._entries),
                       timezone=timezone_name(self.timezone))
        try:
            with self._signals(handle_signals):
                async with anyio.create_task_group() as tg:
                    tg.start_soon(self.heartbeat.run)
                    self._ready.set()
                    task_status.started()
                    try:
                        await self._fire_loop()
                    finally:
                        tg.cancel_scope.cancel()
        finally:
            # Shutdown order: 1. stop firing (the firing in progress completes: its claim and
            # task are one atomic script anyway); 2. stop the heartbeat (cancelled above);
            # 3. remove the published entries; 4. close the connection if we opened it.
            # History is kept: other replicas may still be firing the same entries.
            with anyio.CancelScope(shield=True):
                await self.heartbeat.clear()
                if self._owns_broker:
                    await self.broker.close()
            self._state = "closed"
            self._log.info("scheduler stopped")

    async def _fire_loop(self) -> None:
        while not self._stopping:
            await self.tick()
            if self._stopping:
                return
            now = self.clock.now_ms()
            due = min((e.next_ms for e in self._entries.values()), default=None)
            delay = MAX_IDLE if due is None else min(MAX_IDLE, max(0.0, (due - now) / 1000))
            with anyio.move_on_after(delay):
                await self._wake.wait()
            self._wake.clear()

    async def close(self) -> None:
        """Close the connection of a scheduler that never ran (``run`` closes it otherwise);
        a broker passed in stays open."""
        if self._state == "new":
            self._state = "closed"
            if self._owns_broker:
                await self.broker.close()

    async def __aenter__(self) -> Self:
        self._runner = await start_background(self.run(handle_signals=False), self._ready,
                                              self.stop)
        return self

    async def __aexit__(self, exc_type: type[BaseException] | None,
                        exc: BaseException | None, tb: TracebackType | None) -> None:
        await stop_background(self._runner, self.stop)
