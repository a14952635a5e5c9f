"""Recoverer: sends tasks whose lease expired (their worker died or hung) to retry or archive.

It also gives a lease to any active task that has none (eviction, a restore, a manual edit), so
no task can stay "active" forever.
"""

from __future__ import annotations

from collections.abc import Callable, Container, Sequence

from .._broker import Broker, Outcome, RawTask
from .._clock import Clock
from .._errors import DecodeError, LeaseExpiredError
from .._log import get_logger
from .._model._rules import HandlerRules, apply_rules
from .._model._task import task_for_handler
from .._service._loops import for_each, run_periodically
from .._service._outage import Outage
from ._config import WorkerConfig
from ._outcomes import error_text, failure_outcome

_BATCH = 100


class Recoverer:
    """``tick()`` recovers every lease that ended more than ``recover_grace`` ago.

    ``held`` (the worker's lease table) names the tasks this worker itself still holds: after
    an outage longer than the lease their leases look expired, but the heartbeat renews them
    (or the acker writes their outcome) as soon as Redis answers, so they are left alone.
    """

    def __init__(self, broker: Broker, config: WorkerConfig, clock: Clock,
                 on_retry_scheduled: Callable[[int], None] | None = None,
                 held: Container[str] = (),
                 rules: Callable[[str], HandlerRules | None] = lambda _: None,
                 queues: Sequence[str] | None = None) -> None:
        self._broker = broker
        self._queues = list(config.queues) if queues is None else queues
        """The worker's queues (its list, grown as its patterns match new queues)."""
        self._rules = rules  # the task options registered per task type (its retry policy)
        self._config = config
        self._clock = clock
        self._on_retry_scheduled = on_retry_scheduled
        self._held = held
        self._log = get_logger("recoverer")
        self.outage = Outage(self._log, "recover expired leases")
        self.recovered = 0

    async def tick(self) -> int:
        """Recover every queue; a queue that fails does not stop the others (the first error is
        raised once all were tried)."""
        return sum(await for_each(list(self._queues), self._recover_queue))

    async def _recover_queue(self, queue: str) -> int:
        count = 0
        attached = await self._broker.maintenance.reclaim_orphans(queue, 1000)
        if attached:
            self._log.warning("active tasks without a lease found; lease attached",
                              queue=queue, count=attached)
        cutoff = self._clock.now_ms() - int(self._config.recover_grace * 1000)
        while True:
            expired = await self._broker.maintenance.list_lease_expired(queue, cutoff, _BATCH)
            progress = 0
            for raw in expired:
                if raw.id in self._held:
                    continue
                outcome = self._outcome(queue, raw)
                if await self._broker.maintenance.recover(outcome, cutoff):
                    progress += 1
                    self.recovered += 1
                    if outcome.kind == "retry" and self._on_retry_scheduled is not None:
                        self._on_retry_scheduled(outcome.retry_at_ms)
                    self._log.warning("lease expired; task recovered", task_id=raw.id,
                                      queue=queue, outcome=outcome.kind)
            count += progress
            if len(expired) < _BATCH or not progress:
                return count  # (a full batch of tasks this worker holds would be listed again)

    def _outcome(self, queue: str, raw: RawTask) -> Outcome:
        msg = raw.msg
        if isinstance(msg, DecodeError):
            return Outcome("archive", queue, raw.id, error=error_text(msg))
        rules = self._rules(msg.type)
        task = task_for_handler(apply_rules(msg, rules), raw.payload, raw.retried, 0, None)
        return failure_outcome(queue, raw.id, task, LeaseExpiredError("task lease expired"),
                               self._config, self._clock,
                               self._log.bind(task_id=raw.id, queue=queue), rules)

    async def run(self) -> None:
        """Recover every ``recover_interval`` (a failed round is retried at the next one)."""
        await run_periodically(self.tick, self._config.recover_interval, self.outage, self._log)
