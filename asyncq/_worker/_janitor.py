"""Janitor: deletes completed tasks whose retention has ended, and repairs orphaned task records.

Orphans are task hashes in no list or sorted set of their state (an evicted or deleted list, a
partial restore, a manual edit): nothing would ever run, recover or expire them. Finding them
needs a walk over the keyspace, so the janitor takes one bounded ``SCAN`` step per round
(``orphan_scan_count`` keys; never on a hot path) and hands the task keys of its queues to the
``repair_tasks`` script, which puts each orphan back where its state says it belongs (or
archives it with the reason). A full pass over N keys takes N / orphan_scan_count rounds.
"""

from __future__ import annotations

from collections import defaultdict
from typing import Any

import anyio

from .._broker import Broker
from .._errors import BrokerError
from .._log import get_logger
from .._outage import Outage

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
        self._log: Any = get_logger("janitor")
        self.outage = Outage(self._log, "delete expired completed tasks")
        self.repaired = 0
        self.passes = 0
        """Completed passes of the orphan scan over the whole keyspace."""

    async def tick(self) -> int:
        """A queue that fails does not stop the others (the first error is raised once all
        were tried)."""
        total = 0
        error: BrokerError | None = None
        for queue in self._queues:
            try:
                while True:
                    deleted = await self._broker.delete_expired_completed(queue, self._batch)
                    total += deleted
                    if deleted < self._batch:
                        break
            except BrokerError as exc:
                error = error or exc
        if self._scan_count:
            try:
                await self.scan_tick()
            except BrokerError as exc:
                error = error or exc
        if error is not None:
            raise error
        return total

    async def scan_tick(self) -> int:
        """One step of the orphan scan; returns how many orphans it repaired."""
        cursor, found = await self._broker.scan_task_keys(self._cursor, self._scan_count)
        by_queue: dict[str, list[str]] = defaultdict(list)
        mine = set(self._queues)
        for queue, task_id in found:
            if queue in mine:
                by_queue[queue].append(task_id)
        repaired = 0
        for queue, ids in by_queue.items():
            actions = await self._broker.repair_tasks(queue, ids, PENDING_SEARCH)
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
        while True:
            await anyio.sleep(self._interval)
            try:
                await self.tick()
                self.outage.succeeded()
            except BrokerError as exc:
                self.outage.failed(exc)
            except Exception as exc:
                self._log.exception("janitor failed unexpectedly")
                self.outage.failed(exc)
