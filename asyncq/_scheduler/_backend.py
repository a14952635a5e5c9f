"""Every Redis write of a scheduler: the claimed enqueue, the history, the heartbeat.

Exactly once per tick, with any number of scheduler replicas:

1. A firing is identified by ``(entry id, tick)``. The entry id is deterministic (a hash of the
   registration, see ``_entry``) and the tick is computed from the schedule, not from "now", so
   every replica names a firing the same way, whatever its clock says.
2. One Lua script (``scheduler_<store>.lua``) claims the firing and stores the task atomically:
   it checks the entry's last claimed tick in ``asyncq:{queue}:scheduler_ticks`` (a ZSET in the
   queue's own hash slot), and only if this tick is newer records it and runs the ordinary
   store script (``enqueue``/``schedule``/``add_to_group``). Claim and task are written together
   or not at all, so a scheduler dying at any point cannot leave a claimed tick without a task,
   nor a task without a claim; the replica that loses the race gets "already claimed".
3. The claim is "last tick", not "this task exists": a task that a worker already finished and
   deleted still blocks a slower replica from enqueueing that tick again.

Clock skew between replicas: each replica fires a tick when its own clock reaches it, so the
replica whose clock is furthest ahead enqueues it (up to that skew early) and the others find
it claimed. A replica lagging by more than one period can only lose: its ticks are older than
the last claimed one. Nothing is enqueued twice whatever the skew; what skew changes is when.
Claims older than CLAIM_RETENTION_MS are pruned, and a scheduler never fires a tick that old.
The guarantee is Redis's: a failover that loses acknowledged writes can lose a claim too.

A user-given ``task_id`` option is still honoured: the claim is made first, then the store
script reports an id conflict while the previous firing's task exists (TaskIDConflictError to
``post_enqueue``); the tick stays claimed, so no replica enqueues it either.
"""

from __future__ import annotations

from .._broker import Broker, SchedulerEntryRecord, SchedulerEventRecord
from .._clock import Clock
from .._model._enqueue import prepare, store_error, stored_info
from .._model._info import TaskInfo
from ._entry import Entry
from ._store import HISTORY_MAX_EVENTS

_DAY_MS = 86_400_000
CLAIM_RETENTION_MS = 7 * _DAY_MS  # claims of older ticks are pruned; older ticks never fire
HISTORY_TTL_MS = 400 * _DAY_MS  # history of an entry that stopped firing expires (> @yearly)


class SchedulerBackend:
    """What a scheduler writes, through its broker's ``schedules`` operations."""

    def __init__(self, broker: Broker, clock: Clock) -> None:
        self.broker = broker
        self.clock = clock

    async def fire(self, entry: Entry, tick_ms: int) -> TaskInfo | None:
        """Claim ``(entry, tick)`` and store its task; None if another scheduler claimed it.

        Raises TaskIDConflictError / DuplicateTaskError (the tick is consumed) or BrokerError.
        """
        now = self.clock.now_ms()
        new = prepare(entry.task, entry.options, now)
        code = await self.broker.schedules.fire(new, entry.id, tick_ms, now - CLAIM_RETENTION_MS)
        if code == 2:  # the tick was claimed by another scheduler
            return None
        err = store_error(code, new)
        if err is not None:
            raise err
        return stored_info(new, now)

    async def record_event(self, entry: Entry, info: TaskInfo, tick_ms: int) -> None:
        now = self.clock.now_ms()
        await self.broker.schedules.record_event(
            SchedulerEventRecord(entry.id, info.id, info.queue, now, tick_ms),
            HISTORY_MAX_EVENTS, HISTORY_TTL_MS)

    async def write_entries(self, scheduler_id: str, entries: list[SchedulerEntryRecord],
                            ttl_ms: int) -> None:
        await self.broker.schedules.publish_entries(scheduler_id, entries, ttl_ms,
                                                    self.clock.now_ms())

    async def clear_entries(self, scheduler_id: str) -> None:
        await self.broker.schedules.clear_entries(scheduler_id)
