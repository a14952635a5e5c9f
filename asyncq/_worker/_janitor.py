"""Janitor: deletes completed tasks whose retention has ended, records each queue's counters
once a minute (the last hour the dashboard charts), and repairs orphaned task records.

The minute samples cover every registered queue, not only the worker's own: a queue no worker
serves is charted too. Each round samples the worker's queues and the next
``MINUTE_SAMPLE_BATCH`` registered ones (a rotating window, pipelined), so a round's cost is
bounded however many queues there are; ``record_minute`` writes at most one sample per queue a
minute, whichever process (a worker, the dashboard) comes first.

Orphans are task hashes in no list or sorted set of their state (an evicted or deleted list, a
partial restore, a manual edit): nothing would ever run, recover or expire them. Finding them
needs a walk over the keyspace, so the janitor takes one bounded ``SCAN`` step per round
(``orphan_scan_count`` keys; never on a hot path) and hands the task keys of its queues to the
``repair_tasks`` script, which puts each orphan back where its state says it belongs (or
archives it with the reason). A full pass over N keys takes N / orphan_scan_count rounds.
"""

from __future__ import annotations

import functools
from collections import defaultdict
from collections.abc import Awaitable, Callable, Collection

from .._broker import Broker
from .._log import get_logger
from .._service._loops import run_periodically, try_each
from .._service._outage import Outage

MINUTE_SAMPLE_BATCH = 500
"""Registered queues a janitor round samples besides its own (one pipelined call each): at the
default interval (8 s), 3 750 queues a minute per worker."""

PENDING_SEARCH = 1000
"""How far a pending list is searched for a pending task (a cost bound): in a longer queue, an
orphaned pending task is repaired once the backlog drops below this."""


class Janitor:
    """``tick()`` deletes every expired completed task of the worker's queues, then takes one
    step of the orphan scan (``scan_tick()``)."""

    def __init__(self, broker: Broker, queues: list[str], interval: float, batch: int,
                 scan_count: int = 0) -> None:
        self._broker = broker
        self._queues = queues
        self._interval = interval
        self._batch = batch
        self._scan_count = scan_count
        self._cursor = 0
        self._registered: list[str] = []  # the registered queues, read once per cycle
        self._sampled = 0  # how far this cycle's window went in ``_registered``
        self._log = get_logger("janitor")
        self.outage = Outage(self._log, "delete expired completed tasks")
        self.repaired = 0
        self.passes = 0
        """Completed passes of the orphan scan over the whole keyspace."""

    async def tick(self) -> int:
        """Returns how many completed tasks were deleted. A queue that fails does not stop the
        others, nor the scan step (the first error is raised once all were tried)."""
        queues = list(self._queues)  # (a worker's queues may change meanwhile: patterns)
        steps: list[Callable[[], Awaitable[int]]] = [
            functools.partial(self._delete_expired, queue) for queue in queues]
        steps += [functools.partial(self._record_minute, queue) for queue in queues]
        steps.append(functools.partial(self.sample_registered, set(queues)))
        if self._scan_count:
            steps.append(self.scan_tick)
        counts = await try_each(steps)
        return sum(counts[:len(queues)])

    async def _record_minute(self, queue: str) -> int:
        """The queue's once-a-minute sample for the dashboard's last hour (a no-op script
        call unless this worker is the first to come by in this minute)."""
        return int(await self._broker.maintenance.record_minute(queue))

    async def sample_registered(self, own: Collection[str] = ()) -> int:
        """The minute samples of the next ``MINUTE_SAMPLE_BATCH`` registered queues (``own``,
        sampled anyway, left out); the list is read again once the window went round it.
        Returns how many samples were written."""
        if self._sampled >= len(self._registered):
            self._registered = await self._broker.inspect.queue_names()
            self._sampled = 0
        window = self._registered[self._sampled:self._sampled + MINUTE_SAMPLE_BATCH]
        self._sampled += len(window)
        others = [q for q in window if q not in own]
        return await self._broker.inspect.record_minutes(others) if others else 0

    async def _delete_expired(self, queue: str) -> int:
        total = 0
        while True:
            deleted = await self._broker.maintenance.delete_expired_completed(queue, self._batch)
            total += deleted
            if deleted < self._batch:
                return total

    async def scan_tick(self) -> int:
        """One step of the orphan scan; returns how many orphans it repaired."""
        cursor, found = await self._broker.maintenance.scan_task_keys(self._cursor,
                                                                      self._scan_count)
        by_queue: dict[str, list[str]] = defaultdict(list)
        mine = set(self._queues)
        for queue, task_id in found:
            if queue in mine:
                by_queue[queue].append(task_id)
        repaired = 0
        for queue, ids in by_queue.items():
            actions = await self._broker.maintenance.repair_tasks(queue, ids, PENDING_SEARCH)
            for task_id, action in zip(ids, actions, strict=True):
                if action and action != "?":
                    repaired += 1
                    self._log.warning("orphaned task record repaired", task_id=task_id,
                                      queue=queue, action=action)
        self._cursor = cursor  # only once the step went through: a failed one is redone
        if cursor == 0:
            self.passes += 1
        self.repaired += repaired
        return repaired

    async def run(self) -> None:
        await run_periodically(self.tick, self._interval, self.outage, self._log,
                               wait_first=True)
