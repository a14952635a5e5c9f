"""What one dashboard app holds: its Inspector (opened on first use), a Client on the same
connection for task events, and a short-lived cache of queue snapshots shared by every open
tab, so live updates cost Redis a bounded number of reads however many people watch."""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass, replace

from .._broker import Broker, DailyStats, MinuteStats, QueueInfo, RedisLike
from .._client._client import Client
from .._defaults import WEB_LOOPBACK_HOSTS
from .._errors import AsyncqError
from .._inspector._inspector import Inspector
from .._log import get_logger

log = get_logger("web")

#: Snapshots younger than this are served from the cache (seconds).
SNAPSHOT_TTL = 0.5
#: The sampled memory estimate (three quarters of a snapshot's Redis work) is read again only
#: after this many seconds, or when a page is rendered (seconds).
MEMORY_TTL = 10.0
#: The overview's charts cost two reads per queue (seconds at thousands of queues): a fleet of
#: more queues than this has them read at most every ``CHART_TTL`` seconds.
CHART_CACHE_FROM = 200
CHART_TTL = 30.0


@dataclass(frozen=True, slots=True)
class Settings:
    """What ``create_app`` was told."""

    read_only: bool
    title: str
    #: Origins (``scheme://host[:port]``, lower-cased) whose POSTs are accepted besides the
    #: request's own host.
    allowed_origins: frozenset[str] = frozenset()
    #: Host names (lower-cased, loopback ones included) whose requests are answered.
    allowed_hosts: frozenset[str] = frozenset(WEB_LOOPBACK_HOSTS)


class Dashboard:
    """The app's connection to Redis. Starlette does not run a mounted app's lifespan, so the
    Inspector opens lazily on the first request; ``close`` (run by the app's own lifespan when
    it is served stand-alone) closes what was opened."""

    def __init__(self, redis: RedisLike | Broker, settings: Settings) -> None:
        self._redis = redis
        self.settings = settings
        self._inspector: Inspector | None = None
        self._client: Client | None = None
        self._cache: tuple[float, dict[str, QueueInfo]] | None = None
        #: The last memory estimate of each queue, with when it was read (monotonic).
        self._memory: dict[str, tuple[float, int]] = {}
        self._cache_lock = asyncio.Lock()
        #: Snapshots of queues read by name (a queue's page, a page of the overview).
        self._named: dict[str, tuple[float, QueueInfo]] = {}
        self._charts: tuple[float, list[DailyStats], list[MinuteStats]] | None = None
        self._sampled_minute = -1  # the last minute this process sampled every queue in

    @property
    def inspector(self) -> Inspector:
        if self._inspector is None:
            self._inspector = Inspector(self._redis)
        return self._inspector

    @property
    def client(self) -> Client:
        """A Client sharing the Inspector's connection, used only to listen to task events."""
        if self._client is None:
            self._client = Client(self.inspector.broker)
        return self._client

    async def close(self) -> None:
        client, inspector = self._client, self._inspector
        self._client = self._inspector = None
        if client is not None:
            await client.close()
        if inspector is not None:
            await inspector.close()

    async def queue_infos(self, queues: list[str] | None = None, *, fresh: bool = False,
                          since: float | None = None) -> dict[str, QueueInfo]:
        """Snapshots of ``queues`` (every queue when None), by name, each read at most every
        ``SNAPSHOT_TTL`` seconds for all callers together unless ``fresh``; ``since`` (a
        ``time.monotonic()`` value) refuses a snapshot read before then, so a caller that
        heard of a change sees it. Named queues are read alone when no usable snapshot holds
        them: a page of a fleet's queues costs its queues, not the fleet's."""

        def usable(read_at: float) -> bool:
            return (not fresh and time.monotonic() - read_at <= SNAPSHOT_TTL
                    and (since is None or read_at >= since))

        async with self._cache_lock:
            if queues is None:
                if self._cache is None or not usable(self._cache[0]):
                    self._cache = (time.monotonic(), await self._read_all(fresh))
                return self._cache[1]
            got: dict[str, QueueInfo] = {}
            every = self._cache[1] if self._cache and usable(self._cache[0]) else {}
            for q in queues:
                named = self._named.get(q)
                if q in every:
                    got[q] = every[q]
                elif named is not None and usable(named[0]):
                    got[q] = named[1]
            missing = [q for q in queues if q not in got]
            if missing:  # no usable snapshot holds them, or created since the last read
                read_at = time.monotonic()
                for q, info in (await self._read(missing, fresh)).items():
                    self._named[q] = (read_at, info)
                    got[q] = info
        return {q: got[q] for q in queues if q in got}

    async def sample_minutes(self) -> None:
        """This minute's last-hour sample of every registered queue, at most once a minute per
        dashboard process (``record_minute`` keeps one per queue a minute, whoever writes it):
        while the dashboard is in use, its chart has the queues no worker serves and the
        minutes when no worker lives. A failure (Redis down, a read-only Redis user) leaves
        the samples to the workers; the page goes on."""
        clock = getattr(self.inspector.broker, "clock", None)  # (the minute it samples in)
        minute = (clock.now_ms() if clock is not None else int(time.time() * 1000)) // 60_000
        if minute == self._sampled_minute:
            return
        self._sampled_minute = minute
        try:
            await self.inspector.record_minutes()
        except AsyncqError as exc:
            log.debug("dashboard minute samples not written", error=str(exc))

    async def chart_stats(self, queues: list[str], days: int
                          ) -> tuple[list[DailyStats], list[MinuteStats]]:
        """Every queue's counters of the last ``days`` days and its last hour's minutes, for
        the overview's charts; reused for ``CHART_TTL`` seconds beyond ``CHART_CACHE_FROM``
        queues."""
        await self.sample_minutes()
        cached = self._charts
        reuse = len(queues) > CHART_CACHE_FROM
        if reuse and cached is not None and time.monotonic() - cached[0] <= CHART_TTL:
            return cached[1], cached[2]
        inspector = self.inspector  # (pipelined: a read per queue, not round trips each)
        daily = [d for h in (await inspector.history_of(queues, days)).values() for d in h]
        minutes = [m for h in (await inspector.minute_stats_of(queues)).values() for m in h]
        if reuse:
            self._charts = (time.monotonic(), daily, minutes)
        return daily, minutes

    async def _read_all(self, fresh: bool = False) -> dict[str, QueueInfo]:
        return await self._read(await self.inspector.queues(), fresh)

    async def _read(self, queues: list[str], fresh: bool = False) -> dict[str, QueueInfo]:
        """Every queue in one pipeline (Inspector.queue_infos): the overview of 100 queues
        costs a round trip or two, not 200. Memory estimates older than ``MEMORY_TTL`` (or
        any when ``fresh``) are read again; otherwise the last ones are reused."""
        now = time.monotonic()
        memory = fresh or any(now - self._memory.get(q, (-MEMORY_TTL - 1, 0))[0] > MEMORY_TTL
                              for q in queues)
        infos = await self.inspector.queue_infos(queues, memory=memory)
        if memory:
            self._memory.update((i.queue, (now, i.memory_usage)) for i in infos)
        else:
            infos = [replace(i, memory_usage=self._memory[i.queue][1]) for i in infos]
        return {info.queue: info for info in infos}
