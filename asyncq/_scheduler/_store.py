"""What schedulers publish in Redis, and the two readers the Inspector and the CLI use.

A scheduler publishes its entries (``SchedulerEntryRecord``, made by ``entry_record``) for
2 x its heartbeat interval, and records each task an entry enqueued (``SchedulerEventRecord``,
the 1000 newest kept per entry), through its broker's ``schedules`` operations; each broker
stores them in its own layout (asyncq's JSON documents, ``asyncq._broker._records``, or Go
asynq's protobuf records). The readers turn them into ``SchedulerEntry`` / ``SchedulerEvent``.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from .._broker import Broker, SchedulerEntryRecord, SchedulerEventRecord
from .._clock import ms_to_datetime
from .._model._payload import Encoding, decode_json
from ._entry import Entry, options_from_json
from ._spec import timezone_name

HISTORY_MAX_EVENTS = 1000


@dataclass(frozen=True, slots=True)
class SchedulerEntry:
    """A periodic entry as published by a running scheduler (or held by a local one)."""

    id: str
    spec: str
    type: str
    payload: bytes
    encoding: Encoding  # how the payload is stored: "b" bytes, "j" JSON, "n" none
    options: Mapping[str, Any]  # JSON form (seconds, ISO 8601 times); see enqueue_options
    timezone: str  # the zone cron specs are read in
    next_enqueue_at: datetime
    prev_enqueue_at: datetime | None  # last tick enqueued (by any replica); None = none yet
    scheduler_id: str

    def json(self) -> Any:
        """The payload decoded as JSON (None when the entry has no payload)."""
        return decode_json(self.payload, self.encoding)

    def enqueue_options(self) -> dict[str, Any]:
        """The options as ``Client.enqueue`` keywords (timedelta durations, datetime times)."""
        return options_from_json(self.options)


@dataclass(frozen=True, slots=True)
class SchedulerEvent:
    """One task enqueued by a periodic entry."""

    entry_id: str
    task_id: str
    queue: str
    enqueued_at: datetime
    tick_at: datetime  # the schedule time this task was enqueued for


def entry_snapshot(entry: Entry, scheduler_id: str) -> SchedulerEntry:
    return SchedulerEntry(
        id=entry.id, spec=entry.spec, type=entry.task.type, payload=entry.task.payload,
        options=dict(entry.options_json), timezone=timezone_name(entry.tz),
        next_enqueue_at=ms_to_datetime(entry.next_ms),
        prev_enqueue_at=None if entry.prev_ms is None else ms_to_datetime(entry.prev_ms),
        scheduler_id=scheduler_id, encoding=entry.task.encoding,
    )


def entry_record(entry: Entry, scheduler_id: str) -> SchedulerEntryRecord:
    """What a scheduler publishes of one of its entries."""
    return SchedulerEntryRecord(
        id=entry.id, spec=entry.spec, timezone=timezone_name(entry.tz),
        task_type=entry.task.type, encoding=entry.task.encoding, payload=entry.task.payload,
        options=entry.options_json, next_ms=entry.next_ms, prev_ms=entry.prev_ms,
        scheduler_id=scheduler_id)


def _entry(record: SchedulerEntryRecord) -> SchedulerEntry:
    return SchedulerEntry(
        id=record.id, spec=record.spec, type=record.task_type, payload=record.payload,
        options=dict(record.options), timezone=record.timezone,
        next_enqueue_at=ms_to_datetime(record.next_ms),
        prev_enqueue_at=None if record.prev_ms is None else ms_to_datetime(record.prev_ms),
        scheduler_id=record.scheduler_id, encoding=record.encoding)


def _event(record: SchedulerEventRecord) -> SchedulerEvent:
    return SchedulerEvent(entry_id=record.entry_id, task_id=record.task_id, queue=record.queue,
                          enqueued_at=ms_to_datetime(record.enqueued_at_ms),
                          tick_at=ms_to_datetime(record.tick_ms))


async def list_scheduler_entries(broker: Broker) -> list[SchedulerEntry]:
    """Entries of every live scheduler (expired schedulers are pruned from the index).

    Sorted by next enqueue time, then entry id; replicas publishing the same entry each show it
    (with their own ``scheduler_id``). Raises BrokerError when Redis fails.
    """
    entries = [_entry(record) for record in await broker.schedules.entries()]
    entries.sort(key=lambda e: (e.next_enqueue_at, e.id, e.scheduler_id))
    return entries


async def list_scheduler_events(broker: Broker, entry_id: str, page: int,
                                page_size: int) -> list[SchedulerEvent]:
    """Enqueue events of ``entry_id``, newest first; ``page`` counts from 1.

    An unknown entry has no events (empty list). Raises ValueError for page < 1 or
    page_size < 1, BrokerError when Redis fails.
    """
    if page < 1 or page_size < 1:
        raise ValueError(f"page and page_size must be >= 1, got page={page}, "
                         f"page_size={page_size}")
    start = (page - 1) * page_size
    return [_event(record)
            for record in await broker.schedules.events(entry_id, start, start + page_size - 1)]
