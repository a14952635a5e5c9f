"""asyncq's own encoding of the records the seam carries typed: a worker's state and its running
tasks, a scheduler's entries and their enqueue events, each as a JSON document.

The documents keep the keys earlier versions wrote, so records already in Redis still read::

    server   {"server_id", "host", "pid", "concurrency", "queues", "strict_priority",
              "status", "started_at", "active_workers", "processed", "failed",
              ["extra"], ["matched"], ["task_options"]}
    running  {"task_id", "type", "queue", "started_at", "deadline", "payload_size"}
    entry    {"id", "spec", "timezone", "type", "encoding": "b"|"j"|"n",
              "payload": <JSON value if "j", base64 if "b", null if "n">,
              "options", "next", "prev", "scheduler_id"}
    event    {"entry_id", "task_id", "queue", "enqueued_at", "tick"}

A decoder raises ValueError (``orjson.JSONDecodeError`` is one) or KeyError/TypeError on a
document it cannot read; its caller skips that record.
"""

from __future__ import annotations

import base64
from collections.abc import Mapping
from typing import Any

import orjson

from ._values import RunningTaskRecord, SchedulerEntryRecord, SchedulerEventRecord, WorkerRecord

UNREADABLE = (ValueError, KeyError, TypeError, AttributeError)
"""What a decoder raises on a document it cannot read."""


def encode_server(record: WorkerRecord) -> bytes:
    return orjson.dumps({
        "server_id": record.server_id, "host": record.host, "pid": record.pid,
        "concurrency": record.concurrency, "queues": dict(record.queues),
        "strict_priority": record.strict_priority, "status": record.status,
        "started_at": record.started_ms, "active_workers": len(record.running),
        "processed": record.processed, "failed": record.failed,
        **({"extra": dict(record.extra)} if record.extra else {}),
        **({"matched": {p: list(q) for p, q in record.matched.items()}}
           if record.matched else {}),
        **({"task_options": {p: dict(o) for p, o in record.task_options.items()}}
           if record.task_options else {}),
    })


def encode_running(run: RunningTaskRecord) -> bytes:
    return orjson.dumps({"task_id": run.task_id, "type": run.task_type, "queue": run.queue,
                         "started_at": run.started_ms, "deadline": run.deadline_ms,
                         "payload_size": run.payload_size})


def decode_running(raw: bytes) -> RunningTaskRecord:
    doc = orjson.loads(raw)
    return RunningTaskRecord(
        task_id=str(doc.get("task_id", "")), task_type=str(doc.get("type", "")),
        queue=str(doc.get("queue", "")), started_ms=int(doc.get("started_at", 0)),
        deadline_ms=int(doc.get("deadline") or 0), payload_size=int(doc.get("payload_size", 0)))


def decode_server(raw: bytes, workers: Mapping[bytes, bytes] | None = None,
                  running: tuple[RunningTaskRecord, ...] | None = None) -> WorkerRecord:
    """A server's document with its running tasks: ``running`` as given, else decoded from
    ``workers`` (a running-task document it cannot read is left out, not fatal)."""
    doc = orjson.loads(raw)
    if running is None:
        found = []
        for value in (workers or {}).values():
            try:
                found.append(decode_running(value))
            except UNREADABLE:
                continue
        running = tuple(found)
    return WorkerRecord(
        server_id=str(doc["server_id"]), host=str(doc.get("host", "")),
        pid=int(doc.get("pid", 0)), concurrency=int(doc.get("concurrency", 0)),
        queues={str(k): int(v) for k, v in (doc.get("queues") or {}).items()},
        strict_priority=bool(doc.get("strict_priority", False)),
        status=str(doc.get("status", "")), started_ms=int(doc.get("started_at", 0)),
        processed=int(doc.get("processed", 0)), failed=int(doc.get("failed", 0)),
        extra=dict(doc.get("extra") or {}),
        matched={str(p): tuple(str(q) for q in qs)
                 for p, qs in (doc.get("matched") or {}).items()},
        task_options={str(p): {str(k): int(v) for k, v in o.items()}
                      for p, o in (doc.get("task_options") or {}).items()},
        running=running)


def encode_entry(entry: SchedulerEntryRecord) -> bytes:
    payload: Any = None
    if entry.encoding == "j":
        payload = orjson.Fragment(entry.payload)
    elif entry.encoding == "b":
        payload = base64.b64encode(entry.payload).decode()
    return orjson.dumps({
        "id": entry.id, "spec": entry.spec, "timezone": entry.timezone,
        "type": entry.task_type, "encoding": entry.encoding, "payload": payload,
        "options": entry.options, "next": entry.next_ms, "prev": entry.prev_ms,
        "scheduler_id": entry.scheduler_id,
    })


def decode_entry(raw: bytes) -> SchedulerEntryRecord:
    doc = orjson.loads(raw)
    enc = doc.get("encoding", "b")
    if enc == "j":
        payload = orjson.dumps(doc["payload"])
    elif enc == "b":
        payload = base64.b64decode(doc["payload"] or "")
    else:
        enc, payload = "n", b""
    prev = doc.get("prev")
    return SchedulerEntryRecord(
        id=str(doc["id"]), spec=str(doc["spec"]), timezone=str(doc.get("timezone", "UTC")),
        task_type=str(doc["type"]), encoding=enc, payload=payload,
        options=dict(doc.get("options") or {}), next_ms=int(doc["next"]),
        prev_ms=None if prev is None else int(prev),
        scheduler_id=str(doc.get("scheduler_id", "")))


def encode_event(event: SchedulerEventRecord) -> bytes:
    return orjson.dumps({"entry_id": event.entry_id, "task_id": event.task_id,
                         "queue": event.queue, "enqueued_at": event.enqueued_at_ms,
                         "tick": event.tick_ms})


def decode_event(raw: bytes, entry_id: str) -> SchedulerEventRecord:
    doc = orjson.loads(raw)
    return SchedulerEventRecord(
        entry_id=str(doc.get("entry_id", entry_id)), task_id=str(doc["task_id"]),
        queue=str(doc.get("queue", "")), enqueued_at_ms=int(doc["enqueued_at"]),
        tick_ms=int(doc.get("tick", doc["enqueued_at"])))
