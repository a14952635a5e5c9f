"""What each node of a stored workflow is: its spec document, written when the workflow starts
and read by whoever advances, fails, cancels or shows it (the broker stores it as it is)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import orjson

#: The error callback's node (task nodes are numbered, joins named g<n>, waited-for tasks x<n>).
ON_ERROR_NODE = "e"


@dataclass(frozen=True, slots=True)
class NodeSpec:
    """One node: a task step (``queue``, ``task_id``...), a join of a group's members
    (``items``), or a task outside the workflow that it waits for (``waits_for``: after=).
    An unknown node reads as a spec with none of them."""

    queue: str | None = None  # a step's queue
    task_id: str | None = None  # a step's task id
    mode: str = ""  # how a step takes its input: '' not at all, 'r' as payload, else the argument
    dep: str | None = None  # the node whose value is a step's input (and that it waits for)
    type: str | None = None  # a step's task type
    items: tuple[str, ...] | None = None  # a join's members, in order
    waits_for: tuple[str, str] | None = None  # (queue, task id) of a task it waits for

    @property
    def step(self) -> tuple[str, str] | None:
        """``(queue, task id)`` of a node that is a task of the workflow (the error callback
        too); None for a join, a task it waits for, or an unknown node."""
        if self.queue is None or self.task_id is None:
            return None
        return self.queue, self.task_id

    def to_json(self) -> bytes:
        """The stored document (short keys: one per node of every workflow)."""
        doc: dict[str, Any]
        if self.items is not None:
            doc = {"g": list(self.items)}
        elif self.waits_for is not None:
            doc = {"xq": self.waits_for[0], "xt": self.waits_for[1]}
        else:
            doc = {"q": self.queue, "t": self.task_id, "m": self.mode, "d": self.dep,
                   "type": self.type}
        return orjson.dumps(doc)

    @classmethod
    def from_json(cls, raw: bytes | None) -> NodeSpec:
        """A stored document read back (None or empty: an unknown node)."""
        if not raw:
            return cls()
        doc = orjson.loads(raw)
        if "g" in doc:
            return cls(items=tuple(doc["g"]))
        if "xq" in doc:
            return cls(waits_for=(doc["xq"], doc["xt"]))
        return cls(queue=doc.get("q"), task_id=doc.get("t"), mode=doc.get("m", ""),
                   dep=doc.get("d"), type=doc.get("type"))
