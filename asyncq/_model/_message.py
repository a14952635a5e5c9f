"""The stored task message: the immutable metadata of a task, kept as JSON in the ``msg`` field.

Fields that change while a task lives (retried, error, failed_at, completed_at, state, result)
are separate fields of the task hash, so Lua scripts update them without re-encoding ``msg``, and
the payload is its own field so bytes are stored without base64 inflation.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import orjson

from .._errors import DecodeError
from ._payload import Encoding

_ENCODINGS = ("b", "j", "n")
NO_TIMEOUT = -1  # timeout_ms of a task enqueued with timeout=0 and no deadline: no limit


@dataclass(slots=True)
class TaskMessage:
    """Immutable metadata of one task (times in Unix ms, durations in ms; 0 = unset;
    ``timeout_ms`` NO_TIMEOUT = no limit). ``max_retry``, ``timeout_ms`` and ``retention_ms``
    hold what the producer set (None/0: not set, so the handler's registration or the default
    applies, see ``_rules``); the worker fills them in before it runs the task."""

    id: str
    type: str
    queue: str
    max_retry: int | None = None
    timeout_ms: int = 0
    deadline_ms: int = 0
    retention_ms: int | None = None
    unique_key: str = ""
    group: str = ""
    headers: dict[str, str] = field(default_factory=dict)
    enc: Encoding = "b"
    enqueued_at_ms: int = 0
    #: When it expires (Unix ms; 0 never): not started by then, it is archived unrun. Stored
    #: as ``"expires"``, right after ``enqueued_at``, which the scripts that start a task find
    #: without decoding the JSON (see ``lua/_expiry_lib.lua``).
    expires_at_ms: int = 0

    def encode(self) -> bytes:
        doc: dict[str, Any] = {"id": self.id, "type": self.type, "queue": self.queue,
                               "enc": self.enc, "enqueued_at": self.enqueued_at_ms}
        if self.expires_at_ms:
            doc["expires"] = self.expires_at_ms
        if self.max_retry is not None:
            doc["max_retry"] = self.max_retry
        if self.timeout_ms:
            doc["timeout"] = self.timeout_ms
        if self.deadline_ms:
            doc["deadline"] = self.deadline_ms
        if self.retention_ms is not None:
            doc["retention"] = self.retention_ms
        if self.unique_key:
            doc["unique_key"] = self.unique_key
        if self.group:
            doc["group"] = self.group
        if self.headers:
            doc["headers"] = self.headers
        return orjson.dumps(doc)


def decode_message(raw: bytes | None) -> TaskMessage:
    """Decode a stored ``msg`` field; raise DecodeError saying what is wrong."""
    if not raw:
        raise DecodeError("task message is missing")
    try:
        doc = orjson.loads(raw)
    except orjson.JSONDecodeError as exc:
        raise DecodeError(f"task message is not valid JSON: {exc}") from exc
    if not isinstance(doc, dict):
        raise DecodeError("task message is not a JSON object")
    try:
        task_id, task_type, queue = doc["id"], doc["type"], doc["queue"]
        headers = doc.get("headers") or {}
        enc = doc.get("enc", "b")
        max_retry, retention = doc.get("max_retry"), doc.get("retention")
        msg = TaskMessage(
            id=task_id, type=task_type, queue=queue,
            max_retry=None if max_retry is None else int(max_retry),
            timeout_ms=int(doc.get("timeout", 0)),
            deadline_ms=int(doc.get("deadline", 0)),
            retention_ms=None if retention is None else int(retention),
            unique_key=doc.get("unique_key", ""),
            group=doc.get("group", ""),
            headers=headers, enc=enc,
            enqueued_at_ms=int(doc.get("enqueued_at", 0)),
            expires_at_ms=int(doc.get("expires", 0)),
        )
    except KeyError as exc:
        raise DecodeError(f"task message lacks the field {exc.args[0]!r}") from exc
    except (TypeError, ValueError) as exc:
        raise DecodeError(f"task message has a field of the wrong type: {exc}") from exc
    if not (isinstance(msg.id, str) and isinstance(msg.type, str)
            and isinstance(msg.queue, str) and isinstance(msg.unique_key, str)
            and isinstance(msg.group, str)):
        raise DecodeError("task message has a non-string id, type, queue, unique_key or group")
    if not msg.type:
        raise DecodeError("task message has an empty type")
    if enc not in _ENCODINGS:
        raise DecodeError(f"task message has an unknown payload encoding {enc!r}")
    if not isinstance(headers, dict) or (headers and not all(
        isinstance(k, str) and isinstance(v, str) for k, v in headers.items()
    )):
        raise DecodeError("task message headers are not a str -> str mapping")
    return msg


def read_message(raw: bytes | None) -> TaskMessage | DecodeError:
    """``decode_message``, its error returned rather than raised: what a broker hands the
    worker for a stored task, so an undecodable one is archived alone with the reason."""
    try:
        return decode_message(raw)
    except DecodeError as exc:
        return exc
