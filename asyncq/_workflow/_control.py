"""Operating on a workflow from outside: cancel it, read it."""

from __future__ import annotations

import orjson

from .._broker import Broker
from .._broker._wf_ops import CancelResult, NodeState
from .._clock import stored_datetime
from ._engine import drop_steps
from ._info import WorkflowInfo, WorkflowStep

_NODE_STATES = {NodeState.DONE: "done", NodeState.FAILED: "failed",
                NodeState.CANCELLED: "cancelled"}


async def cancel_workflow(broker: Broker, workflow_id: str,
                          why: str = "workflow cancelled on request") -> bool:
    """Cancel a workflow that has not ended (also a failed one): its steps not running are
    deleted, running ones cancelled. True when it was cancelled now."""
    cancelled = await broker.workflows.cancel(workflow_id, why) is CancelResult.CANCELLED
    if cancelled:
        await drop_steps(broker, workflow_id)
    return cancelled


async def read_workflow(broker: Broker, workflow_id: str, *,
                        with_nodes: bool = True) -> WorkflowInfo | None:
    """A snapshot of the workflow (None: no such workflow, or it expired); with its nodes,
    each task step's state read from its queue unless the workflow recorded its end."""
    record = await broker.workflows.read(workflow_id)
    if record is None:
        return None
    summary = record.summary
    decoded = {k: orjson.loads(v) for k, v in record.specs.items()}
    node_states = record.node_states
    tasks = [n for n, s in decoded.items() if "q" in s and n != "e"]
    nodes: list[WorkflowStep] = []
    if with_nodes:
        pending = [(n, s) for n, s in decoded.items() if "q" in s and n not in node_states]
        live = await broker.inspect.tasks([(s["q"], s["t"]) for _, s in pending])
        task_states = {n: (rec.state if rec is not None else "deleted")
                       for (n, _), rec in zip(pending, live, strict=True)}
        deps: dict[str, list[str]] = {}
        for n, s in decoded.items():
            if s.get("d") is not None:
                deps.setdefault(n, []).append(s["d"])
            for item in s.get("g", ()):
                deps.setdefault(n, []).append(item)
        for n in sorted(decoded, key=_node_order):
            s = decoded[n]
            kind = ("on_error" if n == "e" else "task") if "q" in s else (
                "join" if "g" in s else "after")
            ended = node_states.get(n)
            state = _NODE_STATES[ended] if ended else task_states.get(n, "waiting")
            nodes.append(WorkflowStep(
                node=n, kind=kind, state=state, task_id=s.get("t") or s.get("xt"),
                queue=s.get("q") or s.get("xq"), type=s.get("type"),
                depends_on=tuple(deps.get(n, ()))))
    return WorkflowInfo(
        id=workflow_id, state=summary.state, created_at=stored_datetime(summary.created_ms),
        steps=len(tasks), done=sum(1 for n in tasks if node_states.get(n) is NodeState.DONE),
        failed_step=summary.failed_node or None, error=summary.error or None,
        result=record.result, result_encoding=record.result_encoding, nodes=tuple(nodes))


def _node_order(node: str) -> tuple[int, int]:
    kind = {"x": 0, "g": 2, "e": 3}.get(node[0], 1)
    rest = node[1:] if kind != 1 else node
    return kind, int(rest) if rest.isdigit() else 0


async def list_workflows(broker: Broker, limit: int = 100) -> list[WorkflowInfo]:
    """The newest ``limit`` workflows, without their nodes; registry entries whose workflow
    expired are removed on the way."""
    out: list[WorkflowInfo] = []
    gone: list[str] = []
    for workflow_id, _ in await broker.workflows.list_ids(0, max(0, limit - 1)):
        info = await read_workflow(broker, workflow_id, with_nodes=False)
        if info is None:
            gone.append(workflow_id)
        else:
            out.append(info)
    await broker.workflows.unregister(gone)
    return out
