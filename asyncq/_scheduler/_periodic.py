"""PeriodicTaskManager: keeps a Scheduler's entries in sync with a provider of configs."""

from __future__ import annotations

import asyncio
import inspect
from collections.abc import Awaitable, Callable, Iterable, Mapping
from dataclasses import dataclass, field
from types import TracebackType
from typing import Any, Self

import anyio

from .._broker import Broker, RedisLike
from .._defaults import PERIODIC_SYNC_INTERVAL
from .._log import get_logger
from .._service._lifecycle import start_background, stop_background
from ._entry import Entry
from ._scheduler import Scheduler


@dataclass(frozen=True, slots=True)
class PeriodicTaskConfig:
    """One periodic task: ``spec`` and ``type`` as for ``Scheduler.register``, ``payload``
    (default None) and ``options`` (``Client.enqueue`` keywords, default none).

    Identity is spec + type + payload + options (option order does not matter): a config
    whose identity is unchanged between two syncs keeps its entry and its schedule.
    """

    spec: str
    type: str
    payload: Any = None
    options: Mapping[str, Any] = field(default_factory=dict)


ConfigProvider = Callable[[], Iterable[PeriodicTaskConfig]
                          | Awaitable[Iterable[PeriodicTaskConfig]]]


class PeriodicTaskManager:
    """Runs a Scheduler whose entries come from ``provider``, re-read every ``sync_interval``.

    ``provider`` is a sync or async callable returning a list of PeriodicTaskConfig. Each sync
    registers new configs and unregisters vanished ones. If the provider fails or returns any
    invalid config, that round changes nothing and the error is logged (``run`` raises it only
    for the first sync). ``redis``/``broker`` and ``scheduler_options`` are those of
    ``Scheduler``: ``PeriodicTaskManager(url, provider)`` or
    ``PeriodicTaskManager(broker=broker, provider=provider)``.
    """

    def __init__(self, redis: RedisLike | Broker | None = None,
                 provider: ConfigProvider | None = None, *, broker: Broker | None = None,
                 sync_interval: float = PERIODIC_SYNC_INTERVAL, **scheduler_options: Any) -> None:
        if provider is None or not callable(provider):
            raise TypeError(f"provider must be a callable returning PeriodicTaskConfigs, "
                            f"got {provider!r}")
        if (not isinstance(sync_interval, int | float) or isinstance(sync_interval, bool)
                or not sync_interval > 0):
            raise ValueError(f"sync_interval must be a number of seconds > 0, "
                             f"got {sync_interval!r}")
        self.scheduler = Scheduler(redis, broker=broker, **scheduler_options)
        self.provider = provider
        self.sync_interval = float(sync_interval)
        self._managed: set[str] = set()
        self._log = get_logger("periodic", scheduler_id=self.scheduler.id)
        # ``run()`` started by ``async with``: its owner is ``__aexit__``, which awaits it (every
        # other background task runs in ``run()``'s task group).
        self._runner: asyncio.Task[None] | None = None

    @property
    def broker(self) -> Broker:
        return self.scheduler.broker

    @property
    def entry_ids(self) -> set[str]:
        """Ids of the entries this manager registered."""
        return set(self._managed)

    async def _configs(self) -> list[Entry]:
        result = self.provider()
        if inspect.isawaitable(result):
            result = await result
        entries: dict[str, Entry] = {}
        for i, config in enumerate(result):
            if not isinstance(config, PeriodicTaskConfig):
                raise TypeError(f"config {i}: expected a PeriodicTaskConfig, got {config!r}")
            try:
                entry = self.scheduler.make_entry(config.spec, config.type, config.payload,
                                                  config.options, None)
            except (ValueError, TypeError) as exc:
                raise type(exc)(f"config {i} ({config.spec!r}, {config.type!r}): {exc}") from exc
            entries.setdefault(entry.id, entry)  # identical configs collapse into one entry
        return list(entries.values())

    async def sync(self) -> tuple[list[str], list[str]]:
        """Fetch the configs and apply them; return (registered ids, unregistered ids).

        Raises (changing nothing) if the provider fails or any config is invalid.
        """
        wanted = {e.id: e for e in await self._configs()}
        removed = sorted(self._managed - wanted.keys())
        # An identical entry registered on the scheduler directly is left to its owner.
        added = [eid for eid in wanted
                 if eid not in self._managed and not self.scheduler.has_entry(eid)]
        for eid in removed:
            self.scheduler.unregister(eid)
            self._managed.discard(eid)
        for eid in added:
            self.scheduler.add_entry(wanted[eid])
            self._managed.add(eid)
        if added or removed:
            self._log.info("periodic tasks synced", registered=len(added),
                           unregistered=len(removed), total=len(self._managed))
        return added, removed

    async def tick(self) -> bool:
        """One sync round of the loop: errors are logged and skip the round (returns False)."""
        try:
            await self.sync()
        except Exception as exc:
            self._log.error("periodic task sync failed; keeping the current entries",
                            error=str(exc), error_type=type(exc).__name__)
            return False
        return True

    async def _sync_loop(self) -> None:
        while True:
            await anyio.sleep(self.sync_interval)
            await self.tick()

    def stop(self) -> None:
        self.scheduler.stop()

    async def run(self, *, handle_signals: bool = True) -> None:
        """Sync once (its error is raised), then run the scheduler and re-sync periodically."""
        try:
            await self.sync()
        except BaseException:
            await self.scheduler.close()
            raise
        async with anyio.create_task_group() as tg:
            tg.start_soon(self._sync_loop)
            try:
                await self.scheduler.run(handle_signals=handle_signals)
            finally:
                tg.cancel_scope.cancel()

    async def __aenter__(self) -> Self:
        self._runner = await start_background(self.run(handle_signals=False),
                                              self.scheduler.ready_event, self.stop)
        return self

    async def __aexit__(self, exc_type: type[BaseException] | None,
                        exc: BaseException | None, tb: TracebackType | None) -> None:
        await stop_background(self._runner, self.stop)
