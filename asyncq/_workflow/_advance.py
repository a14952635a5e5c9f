"""The workflow advancer: a worker background run that moves step outcomes from the outboxes
of the worker's queues into their workflows' state and releases the steps that may run next.

Push-driven: a script that writes an outbox record publishes on the queue's wake channel
when an advancer left the idle flag (it found the outbox empty), so the advancer sleeps until
there is work. A record is deleted only after everything it causes was done (applied,
successors released, workflow finished/failed/cancelled), so a worker killed at any point
leaves it for the next advancer, which replays it harmlessly (every step is idempotent; see
_engine). ``interval`` is only the safety net: a lock left by a dead advancer expires, and a
missed wake-up (a pub/sub reconnect) is caught, within about that time.
"""

from __future__ import annotations

import asyncio
from collections import defaultdict

import anyio

from .._broker import Broker, StepOutcome
from .._errors import BrokerError
from .._log import get_logger
from .._service._loops import run_periodically
from .._service._outage import Outage
from ._engine import advance

BATCH = 500  # outbox records taken per script call


class Advancer:
    """Drains the workflow outboxes of ``queues``."""

    def __init__(self, broker: Broker, queues: list[str], owner: str,
                 interval: float = 5.0) -> None:
        self._broker = broker
        self._queues = queues
        self._owner = owner
        self._interval = interval
        self._lock_ms = max(1000, int(interval * 2000))
        self._idle_ms = max(60_000, int(interval * 10_000))
        self._log = get_logger("workflow_advancer")
        self.outage = Outage(self._log, "advance workflows")
        self._poke = asyncio.Event()
        self.applied = 0

    async def tick(self) -> int:
        """Drain every queue's outbox; returns how many records were applied."""
        self._poke.clear()  # before the first take: a wake-up after it starts the next round
        total = 0
        error: BrokerError | None = None
        for queue in self._queues:
            try:
                total += await self.drain(queue)
            except BrokerError as exc:
                error = error or exc
        if error is not None:
            raise error
        return total

    async def drain(self, queue: str) -> int:
        """Apply records of ``queue``'s outbox until it is empty (or another advancer holds
        it)."""
        ops = self._broker.workflows
        done = 0
        while True:
            taken = await ops.take(queue, self._owner, self._lock_ms, BATCH, self._idle_ms)
            if not taken:
                return done
            by_workflow: dict[str, list[StepOutcome]] = defaultdict(list)
            for record in taken:
                if record.outcomes is None:
                    self._log.error("unreadable workflow outbox record dropped", queue=queue)
                    continue
                for wf_id, outcome in record.outcomes:
                    by_workflow[wf_id].append(outcome)
            for wf_id, outcomes in by_workflow.items():
                await advance(self._broker, wf_id, outcomes)
            await ops.ack(queue, taken)
            done += len(taken)
            self.applied += len(taken)

    def poke(self) -> None:
        self._poke.set()

    def _next_wait(self) -> float:
        return self._interval

    async def _listen(self) -> None:
        outage = Outage(self._log, "listen for workflow outcomes", base=0.2, cap=5.0)
        while True:
            try:
                async for _ in self._broker.workflows.listen_outboxes(self._queues):
                    outage.succeeded()
                    self._poke.set()  # (also once subscribed: a wake-up may have been missed)
            except BrokerError as exc:
                await anyio.sleep(outage.failed(exc))

    async def run(self) -> None:
        async with anyio.create_task_group() as tg:
            tg.start_soon(self._listen)
            await run_periodically(self.tick, self._next_wait, self.outage, self._log,
                                   wake=self._poke)
