"""Leases: the one table of every task this worker holds a lease on, and who holds it.

A task is leased by the processor's dequeue and stays in this table until the worker lets go
of it: it is first ``prefetched`` (waiting in the processor's buffer) or ``running`` (its
handler runs), then ``outcome`` (its outcome waits in the acker) until the outcome is written,
refused or the lease is found lost. The heartbeat renews every lease listed here, per queue;
the watchdog reads the lease ends; the recoverer leaves alone every task listed here.

Lease ends are computed from when each renewal was *sent*, so they are never later than what
Redis holds.
"""

from __future__ import annotations

from collections import OrderedDict, defaultdict
from dataclasses import dataclass
from typing import Literal

Holder = Literal["prefetched", "running", "outcome"]
PREFETCHED: Holder = "prefetched"
RUNNING: Holder = "running"
OUTCOME: Holder = "outcome"

#: How many runs taken and leases let go are remembered (see ``Leases.ran_already``): far more
#: than are let go during one dequeue's round trip.
RUNS_MEMORY = 10_000


@dataclass(slots=True)
class Lease:
    """One held lease: the task's queue, when the lease ends (Unix ms) and who holds it."""

    queue: str
    until_ms: int
    holder: Holder


class Leases:
    """Task id → ``Lease``, for every task this worker holds, oldest first."""

    def __init__(self) -> None:
        self._leases: dict[str, Lease] = {}
        #: How many leases were let go so far; ``_released`` holds when (in that count) each of
        #: the latest was, ``_runs`` when the task of each of the latest runs taken became
        #: pending (what tells one run of a task from the next).
        self.releases = 0
        self._released: OrderedDict[str, int] = OrderedDict()
        self._runs: OrderedDict[str, int] = OrderedDict()

    def __contains__(self, task_id: object) -> bool:
        """Whether this worker holds the task (the recoverer leaves it alone then)."""
        return task_id in self._leases

    def takes_again(self, task_id: str, pending_since: int) -> bool:
        """Whether a task this worker holds, leased again by a dequeue or a hand-off, is a new
        run to start: its last run ended (only the outcome lease is held, that outcome being
        written) and the task became pending since (a retry due at once, forwarded and leased
        before the outcome's reply was read). Its earlier run, sent again, is not."""
        lease = self._leases.get(task_id)
        return (lease is not None and lease.holder == OUTCOME and pending_since > 0
                and self._runs.get(task_id, pending_since) != pending_since)

    def get(self, task_id: str) -> Lease | None:
        """The held lease of ``task_id`` (the heartbeat sets ``until_ms`` when it renews it)."""
        return self._leases.get(task_id)

    def add(self, task_id: str, queue: str, until_ms: int, holder: Holder) -> None:
        """A task was just leased (or leased again: the new lease replaces the old entry)."""
        self._leases.pop(task_id, None)  # a new lease goes to the end, as the newest
        self._leases[task_id] = Lease(queue, until_ms, holder)

    def move(self, task_id: str, holder: Holder) -> None:
        """Hand a held lease over to another holder, keeping its end (no-op if not held)."""
        lease = self._leases.get(task_id)
        if lease is not None:
            lease.holder = holder

    def release(self, task_id: str, holder: Holder) -> None:
        """``holder`` lets go of a lease, if it still has it (an outcome written for an earlier
        run must not release the lease of the task's new run)."""
        lease = self._leases.get(task_id)
        if lease is not None and lease.holder == holder:
            del self._leases[task_id]
            self.releases += 1
            _remember(self._released, task_id, self.releases)

    def taken(self, task_id: str, pending_since: int) -> None:
        """A run of the task starts: it became pending at ``pending_since`` (Unix ms, 0 when
        unknown)."""
        if pending_since:
            _remember(self._runs, task_id, pending_since)

    def ran_already(self, task_id: str, pending_since: int, mark: int | None = None) -> bool:
        """Whether this worker already took the run of ``task_id`` that became pending at
        ``pending_since`` — and, given ``mark`` (a value ``releases`` had), let go of it since.

        A dequeue sent before the outcome of a hand-off's run was written can still return
        that task (the dequeue returns hand-offs in case their message was lost, and it ran in
        Redis first); so can a hand-off message heard late. Started again, it would run twice.
        A new run of the task (retried, requeued) became pending later: it is not refused."""
        if not pending_since or self._runs.get(task_id) != pending_since:
            return False
        return mark is None or self._released.get(task_id, 0) > mark

    def held_by(self, holder: Holder) -> list[tuple[str, str]]:
        """``(task id, queue)`` of every lease ``holder`` holds."""
        return [(task_id, lease.queue) for task_id, lease in self._leases.items()
                if lease.holder == holder]

    def by_queue(self) -> dict[str, list[str]]:
        """The held task ids of each queue (what one renewal per queue sends)."""
        grouped: dict[str, list[str]] = defaultdict(list)
        for task_id, lease in self._leases.items():
            grouped[lease.queue].append(task_id)
        return dict(grouped)

    def expired(self, now_ms: int) -> list[str]:
        """The prefetched or running tasks whose lease ended by ``now_ms``.

        A waiting outcome is never given up because time passed: its write checks that the
        task is still leased to this worker (see the acker).
        """
        return [task_id for task_id, lease in self._leases.items()
                if lease.until_ms <= now_ms and lease.holder != OUTCOME]


def _remember(table: OrderedDict[str, int], task_id: str, value: int) -> None:
    table[task_id] = value
    table.move_to_end(task_id)
    if len(table) > RUNS_MEMORY:
        table.popitem(last=False)
