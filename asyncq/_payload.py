"""Payload encoding: bytes are stored as they are, anything else as JSON (orjson). Never pickle."""

from __future__ import annotations

from typing import Any, Literal

import orjson

from ._errors import DecodeError

Encoding = Literal["b", "j", "n"]  # raw bytes, JSON, no payload
_JSON_OPTS = orjson.OPT_SERIALIZE_NUMPY | orjson.OPT_NON_STR_KEYS


def encode_payload(payload: object) -> tuple[bytes, Encoding]:
    """Encode a payload for storage, returning the bytes and how they were encoded."""
    if payload is None:
        return b"", "n"
    if isinstance(payload, bytes):
        return payload, "b"
    if isinstance(payload, bytearray | memoryview):
        return bytes(payload), "b"
    try:
        return orjson.dumps(payload, option=_JSON_OPTS), "j"
    except (TypeError, orjson.JSONEncodeError) as exc:
        raise ValueError(
            f"payload of type {type(payload).__name__} cannot be encoded as JSON ({exc}); "
            "pass bytes or a JSON-serialisable value (dict, list, str, number, dataclass, ...)"
        ) from exc


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
