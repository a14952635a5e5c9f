"""The broker seam is public: every type the ``Broker`` protocol and its operation groups take or
return is a public name of ``asyncq`` (or a builtin), so a broker can be written from public
names only (docs/reference/api/broker.md). ``workflows`` is left out: it is an optional
capability (``Capability.WORKFLOWS``), and a broker without it refuses it."""

from __future__ import annotations

import dataclasses
import inspect
import types
import typing
from typing import Any

import asyncq

GROUPS = ("inspect", "schedules", "limits", "maintenance", "aggregation", "workers")


def _classes(hint: Any) -> set[type]:
    """Every class a type hint names (through unions, generics and Callable)."""
    if hint is None or hint is type(None) or hint is Any:
        return set()
    origin = typing.get_origin(hint)
    if origin is typing.Literal:
        return set()
    if origin is not None:
        found = set() if origin in (types.UnionType, typing.Union) else {origin}
        for arg in typing.get_args(hint):
            if isinstance(arg, list):  # Callable's argument list
                for item in arg:
                    found |= _classes(item)
            else:
                found |= _classes(arg)
        return found
    return {hint} if isinstance(hint, type) else set()


def _hints(protocol: type) -> set[type]:
    found: set[type] = set()
    for name, member in inspect.getmembers(protocol):
        if name.startswith("_"):
            continue
        function = member.fget if isinstance(member, property) else member
        if not callable(function):
            continue
        for hint in typing.get_type_hints(function).values():
            found |= _classes(hint)
    return found


def _public(cls: type) -> bool:
    if cls.__module__ in ("builtins", "typing", "datetime", "collections.abc"):
        return True
    return getattr(asyncq, cls.__name__, None) is cls


def test_the_broker_and_its_groups_speak_only_public_types() -> None:
    hints = typing.get_type_hints(asyncq.Broker)  # (nothing declared as an attribute)
    assert hints == {}
    groups = {name: typing.get_type_hints(getattr(asyncq.Broker, name).fget)["return"]
              for name in GROUPS}
    assert all(_public(group) for group in groups.values()), groups
    seen = _hints(asyncq.Broker) - {asyncq.Broker}
    for group in groups.values():
        seen |= _hints(group)
    from asyncq._broker import WorkflowOps  # the optional capability's group: not public
    seen.discard(WorkflowOps)
    todo = list(seen)
    while todo:  # and the types of the values' fields (a record's running tasks...)
        cls = todo.pop()
        if dataclasses.is_dataclass(cls) or hasattr(cls, "_fields"):
            for hint in typing.get_type_hints(cls).values():
                new = _classes(hint) - seen
                seen |= new
                todo += new
    assert len(seen) > 25  # (the walk found the values, not nothing)
    assert sorted(c.__qualname__ for c in seen if not _public(c)) == []
    assert {asyncq.WorkerRecord, asyncq.RunningTaskRecord, asyncq.UniqueLock} <= seen
