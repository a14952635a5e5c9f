"""Operating on a workflow from outside: cancel it, read it."""

from __future__ import annotations

from .._broker import Broker, CancelResult, NodeState
from .._clock import stored_datetime
from ._engine import drop_steps
from ._info import WorkflowInfo, WorkflowStep
from ._nodes import ON_ERROR_NODE, NodeSpec

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
    specs = {k: NodeSpec.from_json(v) for k, v in record.specs.items()}
    node_states = record.node_states
    tasks = [n for n, s in specs.items() if s.step is not None and n != ON_ERROR_NODE]
    nodes: list[WorkflowStep] = []
    if with_nodes:
        pending = [(n, s.step) for n, s in specs.items()
                   if s.step is not None and n not in node_states]
        live = await broker.inspect.tasks([step for _, step in pending])
        task_states = {n: (rec.state if rec is not None else "deleted")
                       for (n, _), rec in zip(pending, live, strict=True)}
        for n in sorted(specs, key=_node_order):
            s = specs[n]
            where = s.step or s.waits_for or (None, None)
            ended = node_states.get(n)
            state = _NODE_STATES[ended] if ended else task_states.get(n, "waiting")
            nodes.append(WorkflowStep(
                node=n, kind=_kind(n, s), state=state, task_id=where[1], queue=where[0],
                type=s.type, depends_on=(() if s.dep is None else (s.dep,)) + (s.items or ())))
    return WorkflowInfo(
        id=workflow_id, state=summary.state, created_at=stored_datetime(summary.created_ms),
        steps=len(tasks), done=sum(1 for n in tasks if node_states.get(n) is NodeState.DONE),
        failed_step=summary.failed_node or None, error=summary.error or None,
        result=record.result, result_encoding=record.result_encoding, nodes=tuple(nodes))


def _kind(node: str, spec: NodeSpec) -> str:
    if spec.step is not None:
        return "on_error" if node == ON_ERROR_NODE else "task"
    return "join" if spec.items is not None else "after"


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
