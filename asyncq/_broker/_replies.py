"""Small converters of Redis replies shared by the broker modules."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from .. import _keys as K
from ._protocol import RawTask


def _s(value: bytes | str) -> str:
    return value.decode() if isinstance(value, bytes) else value


def _count(value: Any) -> int:
    """A stored counter (``retried``); a value that is not a number (a corrupt record) is 0."""
    try:
        return int(value)
    except (TypeError, ValueError):
        return 0


def _raw_tasks(flat: Sequence[Any], start: int = 0) -> list[RawTask]:
    return [
        RawTask(_s(flat[i]), flat[i + 1], flat[i + 2], _count(flat[i + 3]))
        for i in range(start, len(flat), 4)
    ]


def _task_key_parts(key: bytes | str) -> tuple[str, str] | None:
    """``asyncq:{queue}:t:<id>`` -> (queue, id); None for any other key."""
    text = _s(key)
    head = K.PREFIX + ":{"
    if not text.startswith(head):
        return None
    queue, sep, rest = text[len(head):].partition("}:")
    if not sep or not queue or not rest.startswith("t:") or len(rest) == 2:
        return None
    return queue, rest[2:]
