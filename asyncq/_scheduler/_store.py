"""What schedulers publish in Redis, and the two readers the Inspector and the CLI use.

Layout (the JSON documents are written by ``entry_document`` / ``event_document`` below):

* ``asyncq:schedulers`` ZSET: member = entries key of a live scheduler, score = its expiry (ms).
* ``asyncq:schedulers:{<scheduler_id>}`` LIST of entry documents, TTL 2 x heartbeat interval::

      {"id", "spec", "timezone", "type", "encoding": "b"|"j"|"n",
       "payload": <JSON value if "j", base64 if "b", null if "n">,
       "options": {enqueue options: durations in seconds, times ISO 8601},
       "next": <Unix ms>, "prev": <Unix ms or null>, "scheduler_id"}

* ``asyncq:scheduler_history:{<entry_id>}`` ZSET: member = event document
  ``{"entry_id", "task_id", "queue", "enqueued_at": <ms>, "tick": <ms>}``, score = enqueued_at;
  the 1000 newest are kept.
"""

from __future__ import annotations

import base64
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import orjson

from .._broker import Broker
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


def entry_document(entry: Entry, scheduler_id: str) -> bytes:
    enc = entry.task.encoding
    payload: Any = None
    if enc == "j":
        payload = orjson.Fragment(entry.task.payload)
    elif enc == "b":
        payload = base64.b64encode(entry.task.payload).decode()
    return orjson.dumps({
        "id": entry.id, "spec": entry.spec, "timezone": timezone_name(entry.tz),
        "type": entry.task.type, "encoding": enc, "payload": payload,
        "options": entry.options_json, "next": entry.next_ms, "prev": entry.prev_ms,
        "scheduler_id": scheduler_id,
    })


def event_document(entry_id: str, task_id: str, queue: str, enqueued_at_ms: int,
                   tick_ms: int) -> bytes:
    return orjson.dumps({"entry_id": entry_id, "task_id": task_id, "queue": queue,
                         "enqueued_at": enqueued_at_ms, "tick": tick_ms})


def _decode_entry(raw: Any) -> SchedulerEntry | None:
    try:
        doc = orjson.loads(raw)
        enc = doc.get("encoding", "b")
        if enc == "j":
            payload = orjson.dumps(doc["payload"])
        elif enc == "b":
            payload = base64.b64decode(doc["payload"] or "")
        else:
            enc, payload = "n", b""
        prev = doc.get("prev")
        return SchedulerEntry(
            id=str(doc["id"]), spec=str(doc["spec"]), type=str(doc["type"]), payload=payload,
            options=dict(doc.get("options") or {}), timezone=str(doc.get("timezone", "UTC")),
            next_enqueue_at=ms_to_datetime(int(doc["next"])),
            prev_enqueue_at=None if prev is None else ms_to_datetime(int(prev)),
            scheduler_id=str(doc.get("scheduler_id", "")), encoding=enc,
        )
    except (orjson.JSONDecodeError, KeyError, TypeError, ValueError):
        return None  # written by an incompatible version: not shown


def _decode_event(raw: Any, entry_id: str) -> SchedulerEvent | None:
    try:
        doc = orjson.loads(raw)
        return SchedulerEvent(
            entry_id=str(doc.get("entry_id", entry_id)), task_id=str(doc["task_id"]),
            queue=str(doc.get("queue", "")),
            enqueued_at=ms_to_datetime(int(doc["enqueued_at"])),
            tick_at=ms_to_datetime(int(doc.get("tick", doc["enqueued_at"]))),
        )
    except (orjson.JSONDecodeError, KeyError, TypeError, ValueError):
        return None


async def list_scheduler_entries(broker: Broker) -> list[SchedulerEntry]:
    """Entries of every live scheduler (expired schedulers are pruned from the index).

    Sorted by next enqueue time, then entry id; replicas publishing the same entry each show it
    (with their own ``scheduler_id``). Raises BrokerError when Redis fails.
    """
    documents = await broker.schedules.entry_documents()
    entries = [e for e in map(_decode_entry, documents) if e is not None]
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
    raw = await broker.schedules.event_documents(entry_id, start, start + page_size - 1)
    return [e for e in (_decode_event(r, entry_id) for r in raw) if e is not None]
