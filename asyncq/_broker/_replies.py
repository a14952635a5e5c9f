"""Small converters of Redis replies shared by the broker modules."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from .._model._message import read_message
from . import _keys as K
from ._protocol import EnqueueCode, RawTask
from ._runner import ScriptRunner


def text(value: bytes | str) -> str:
    """A reply as str (replies are bytes: clients are created with ``decode_responses=False``)."""
    return value.decode() if isinstance(value, bytes) else value


def count(value: Any) -> int:
    """A stored counter (``retried``); a value that is not a number (a corrupt record) is 0."""
    try:
        return int(value)
    except (TypeError, ValueError):
        return 0


def number(value: Any) -> int:
    """An integer reply or stored number; nil and the empty string are 0, ``"1.0"`` is 1."""
    if value is None or value == b"" or value == "":
        return 0
    return int(float(value))


def enqueue_code(value: Any) -> EnqueueCode:
    """A store script's reply: 1 stored (3: stored, see ``must_register``), 0 id conflict,
    -1 unique duplicate."""
    code = int(value)
    if code in (1, 3):
        return 1
    return 0 if code == 0 else -1


def must_register(value: Any) -> bool:
    """Whether a store script reports that its queue's registration marker was missing (a new
    queue, or one deleted meanwhile): the queue must then be added to the registry."""
    return isinstance(value, int) and value == 3


async def register(runner: ScriptRunner, queues: Sequence[str]) -> None:
    """Add ``queues`` to the registry ``asyncq:queues``. It lives in a slot of its own, so no
    store script can write it: each queue's in-slot marker tells its store scripts when to ask
    for this instead (Redis Cluster safe, and never stale like a per-process cache).

    When one of them was not registered yet, they are announced on ``NEW_QUEUES_CHANNEL``, so
    a worker serving a pattern serves a new queue at once: one PUBLISH per queue created,
    nothing otherwise."""
    if queues:
        added = await runner.command("registering queues", "SADD", K.QUEUES, *queues)
        if added:
            await runner.command("announcing new queues", "PUBLISH", K.NEW_QUEUES_CHANNEL,
                                 "\n".join(queues))


def raw_tasks(flat: Sequence[Any], start: int = 0, width: int = 4,
              capped: bool = False) -> tuple[list[RawTask], list[bytes]]:
    """``[id, msg, payload, retried, id, ...]`` (``width`` 5: each followed by its
    pending-since time) from ``start`` as RawTasks, and apart the raw ids that are not UTF-8
    (a record written by hand or by another producer): those must be quarantined, never
    decoded, so one of them cannot stop the others. ``capped``: each must claim a slot of its
    queue's concurrency cap before it starts."""
    tasks: list[RawTask] = []
    bad: list[bytes] = []
    for i in range(start, len(flat), width):
        raw_id = flat[i]
        try:
            task_id = text(raw_id)
        except UnicodeDecodeError:
            bad.append(raw_id)
            continue
        since = count(flat[i + 4]) if width == 5 else 0
        tasks.append(RawTask(task_id, read_message(flat[i + 1]), flat[i + 2],
                             count(flat[i + 3]), since, capped))
    return tasks, bad


def quarantine_id(raw_id: bytes) -> str:
    """The readable id a record whose id is not UTF-8 is archived under."""
    return f"invalid-id:{raw_id.hex()}"
