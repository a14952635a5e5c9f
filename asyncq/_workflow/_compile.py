"""From a canvas to a graph of nodes: task nodes (one task each) and joins (the end of a
group: done once all its members are), each waiting for at most one node (tasks) or for its
members (joins). Edges stay O(nodes): a chain of two groups of 10 000 joins through one node,
not 10^8 edges."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from .._model._flow import Flow
from ._canvas import Chain, Group, Step


@dataclass(slots=True)
class TaskNode:
    id: str
    step: Step[Any, Any]
    dep: str | None  # the node whose value is its input (and that it waits for)


@dataclass(slots=True)
class JoinNode:
    id: str
    items: list[str]


@dataclass(slots=True)
class AfterNode:
    """A task outside the workflow that it waits for (``after=``)."""

    id: str
    queue: str
    task_id: str


@dataclass(slots=True)
class Graph:
    tasks: list[TaskNode] = field(default_factory=list)
    joins: list[JoinNode] = field(default_factory=list)
    afters: list[AfterNode] = field(default_factory=list)
    final: str = ""

    def add_task(self, step: Step[Any, Any], dep: str | None) -> str:
        node = TaskNode(str(len(self.tasks)), step, dep)
        self.tasks.append(node)
        return node.id

    def add_join(self, items: list[str]) -> str:
        join = JoinNode(f"g{len(self.joins)}", items)
        self.joins.append(join)
        return join.id

    def successors(self) -> dict[str, list[str]]:
        succ: dict[str, list[str]] = {}
        for t in self.tasks:
            if t.dep is not None:
                succ.setdefault(t.dep, []).append(t.id)
        for j in self.joins:
            for item in j.items:
                succ.setdefault(item, []).append(j.id)
        return succ


def build(flow: Flow[Any, Any], graph: Graph, dep: str | None) -> str:
    """Add ``flow`` to ``graph`` after node ``dep``; returns the node holding its value."""
    # (Recursion goes as deep as the canvas is nested, not as long as it is.)
    if isinstance(flow, Step):
        return graph.add_task(flow, dep)
    if isinstance(flow, Chain):
        for part in flow.parts:
            dep = build(part, graph, dep)
        assert dep is not None
        return dep
    if isinstance(flow, Group):
        return graph.add_join([build(part, graph, dep) for part in flow.parts])
    raise TypeError(f"not a workflow piece: {flow!r}")
