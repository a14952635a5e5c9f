"""Payload encoding: bytes are stored as they are, anything else as JSON (orjson). Never pickle."""

from __future__ import annotations

import dataclasses
import math
from typing import Any, Literal

import orjson

from .._errors import DecodeError

Encoding = Literal["b", "j", "n"]  # raw bytes, JSON, no payload
_JSON_OPTS = orjson.OPT_SERIALIZE_NUMPY  # dict keys must be str: 1 and "1" would collide


def encode_payload(payload: object) -> tuple[bytes, Encoding]:
    """Encode a payload for storage, returning the bytes and how they were encoded."""
    if payload is None:
        return b"", "n"
    if type(payload) is not dict:  # (a dict, the common payload, skips the bytes checks)
        if isinstance(payload, bytes):
            return payload, "b"
        if isinstance(payload, bytearray | memoryview):
            return bytes(payload), "b"
    try:
        raw = orjson.dumps(payload, option=_JSON_OPTS)
    except (TypeError, orjson.JSONEncodeError) as exc:
        raise ValueError(
            f"payload of type {type(payload).__name__} cannot be encoded as JSON ({exc}); "
            "pass bytes or a JSON-serialisable value (dict with str keys, list, str, number, "
            "dataclass, ...)"
        ) from exc
    # orjson writes NaN and infinities as null: refuse them rather than change the value (only
    # a payload whose JSON holds a null is walked, so the check is free for the others).
    if b"null" in raw:
        bad = non_finite(payload)
        if bad is not None:
            raise ValueError(f"payload holds {bad!r}, which JSON cannot represent (it would "
                             f"become null): use None, a string, or a finite number")
    return raw, "j"


def non_finite(value: Any) -> float | None:
    """The first NaN or infinity inside ``value`` (dicts, lists, tuples, dataclasses), if any."""
    if isinstance(value, float):
        return None if math.isfinite(value) else value
    if isinstance(value, dict):
        items: Any = value.values()
    elif isinstance(value, list | tuple):
        items = value
    elif dataclasses.is_dataclass(value) and not isinstance(value, type):
        items = (getattr(value, f.name) for f in dataclasses.fields(value))
    else:
        return None
    for item in items:
        bad = non_finite(item)
        if bad is not None:
            return bad
    return None


def decode_json(payload: bytes, encoding: Encoding) -> Any:
    """Decode a stored payload as JSON; a bytes payload is parsed as JSON text too."""
    if encoding == "n":
        return None
    try:
        return orjson.loads(payload)
    except orjson.JSONDecodeError as exc:
        raise DecodeError(f"payload is not valid JSON: {exc}") from exc


def identity_bytes(payload: bytes, encoding: Encoding) -> bytes:
    """The bytes that identify a payload for uniqueness: JSON is re-encoded with sorted keys,
    so equal dicts built in a different key order are the same payload; bytes are as given.
    """
    if encoding != "j":
        return payload
    return orjson.dumps(orjson.loads(payload), option=orjson.OPT_SORT_KEYS)
