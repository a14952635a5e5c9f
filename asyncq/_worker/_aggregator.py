"""Aggregator: combines the tasks of a group into one task when the group is ready.

A group is ready when its newest task is older than the grace period, its oldest is older than
the max delay, or it reached the max size. The staged set is deleted only after the combined task
is enqueued; if the worker dies in between, the recoverer-side reclaim returns the set's tasks to
their group after the set deadline.
"""

from __future__ import annotations

import inspect
import uuid
from collections.abc import Sequence

from .._broker import Broker
from .._clock import Clock
from .._errors import DecodeError
from .._log import get_logger
from .._model._enqueue import prepare, store_error
from .._model._task import Task, task_for_handler
from .._service._loops import for_each, run_periodically
from .._service._outage import Outage
from ._config import WorkerConfig

SET_TIMEOUT_MS = 2 * 60 * 1000


class Aggregator:
    """``tick()`` checks every group of the worker's queues once."""

    def __init__(self, broker: Broker, config: WorkerConfig, clock: Clock,
                 queues: Sequence[str] | None = None) -> None:
        assert config.group_aggregator is not None
        self._broker = broker
        self._queues = list(config.queues) if queues is None else queues
        """The worker's queues (its list, grown as its patterns match new queues)."""
        self._config = config
        self._clock = clock
        self._aggregate = config.group_aggregator
        self._log = get_logger("aggregator")
        self._resting: dict[tuple[str, str], int] = {}  # group whose aggregator failed -> until
        self.outage = Outage(self._log, "aggregate groups")
        self.interval = min(7.0, config.group_grace_period)

    async def tick(self) -> int:
        """Returns the number of aggregated tasks enqueued. A queue that fails does not stop
        the others (the first error is raised once all were tried)."""
        return sum(await for_each(list(self._queues), self._aggregate_queue))

    async def _aggregate_queue(self, queue: str) -> int:
        cfg = self._config
        made = 0
        await self._broker.aggregation.reclaim_stale_sets(queue)
        now = self._clock.now_ms()
        for group in await self._broker.aggregation.list_groups(queue):
            if self._resting.get((queue, group), 0) > now:
                continue  # its aggregator failed lately: give it a grace period
            set_id = uuid.uuid4().hex
            staged = await self._broker.aggregation.check(
                queue, group, set_id, int(cfg.group_grace_period * 1000),
                int(cfg.group_max_delay * 1000), cfg.group_max_size,
                self._clock.now_ms() + SET_TIMEOUT_MS)
            if staged and await self._combine(queue, group, set_id):
                made += 1
        return made

    async def _combine(self, queue: str, group: str, set_id: str) -> bool:
        raws = await self._broker.aggregation.read_set(queue, group, set_id)
        tasks = []
        for raw in raws:
            msg = raw.msg
            if isinstance(msg, DecodeError):
                self._log.error("undecodable task dropped from group", task_id=raw.id,
                                group=group, error=str(msg))
                continue
            tasks.append(task_for_handler(msg, raw.payload, raw.retried, 0, None))
        try:
            combined = self._aggregate(group, tasks)
            if inspect.isawaitable(combined):
                combined = await combined
            if not isinstance(combined, Task):
                raise TypeError(f"group_aggregator must return a Task, got {combined!r}")
            new = prepare(combined, {"queue": queue}, self._clock.now_ms())
            err = store_error(await self._broker.store(new), new)
            if err is not None:
                raise err
        except Exception as exc:  # the user's aggregator, or a refused store
            # The tasks go back to their group at once (listed by groups(), tried again after
            # a grace period), not after the set's deadline.
            await self._broker.aggregation.return_set(queue, group, set_id)
            key = (queue, group)
            if key not in self._resting:
                self._log.error("aggregation failed; the group's tasks stay in their group and "
                                "are tried again", queue=queue, group=group, error=str(exc))
            self._resting[key] = self._clock.now_ms() + int(
                self._config.group_grace_period * 1000)
            return False
        self._resting.pop((queue, group), None)
        await self._broker.aggregation.delete_set(queue, group, set_id)
        return True

    async def run(self) -> None:
        await run_periodically(self.tick, lambda: self.interval, self.outage, self._log,
                               wait_first=True)
