"""Starting a workflow: validate and compile the canvas, write its state, store its steps.

Order matters for crash safety: the workflow's state (record, graph, counters) is written
before any step exists, so an outcome of a first step always finds its workflow; every
waiting step is stored before any ready step (which may run and finish at once) and before
any task it waits for (``after=``) is watched, so a release never meets a step that is not
there yet. A crash of the caller part-way leaves the workflow "starting"
(listed, and cancellable); a failure raised here cancels it first.
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping, Sequence
from typing import Any

from .._broker import (
    Broker,
    CancelResult,
    NewNode,
    StepEnd,
    StepOutcome,
    StoredStep,
    WatchState,
)
from .._defaults import WORKFLOW_RETENTION
from .._errors import TaskIDConflictError, TaskNotFoundError
from .._model._enqueue import prepare
from .._model._flow import Flow
from .._model._info import TaskInfo, TaskState, task_info
from .._model._message import TaskMessage
from .._model._options import UNSET
from .._model._task import Task
from .._validate import (
    WORKFLOW_ID_PREFIX,
    check_text,
    short,
    to_ms,
    validate_queue_name,
    workflow_queue,
)
from ._canvas import Step, as_flow
from ._compile import AfterNode, Graph, build
from ._engine import advance, drop_steps
from ._info import WorkflowHandle
from ._nodes import ON_ERROR_NODE, NodeSpec

WORKFLOW_HEADER = "asyncq-workflow"  # every step's header: the id of its workflow


def check_workflow_id(value: object) -> str:
    wf_id = check_text(value, "workflow id", name_like=True)
    if any(c in "{}#" or c.isspace() for c in wf_id):
        raise ValueError(f"workflow id {short(repr(wf_id))} must not contain '{{', '}}', '#' "
                         "or whitespace")
    if not wf_id.startswith(WORKFLOW_ID_PREFIX):
        raise ValueError(f"workflow id {short(repr(wf_id))} must start with "
                         f"{WORKFLOW_ID_PREFIX!r} (so client.wait tells it from a task id)")
    return wf_id


def _after_nodes(after: Sequence[Any], queue: str) -> list[AfterNode]:
    if isinstance(after, str | bytes) or not isinstance(after, Sequence):
        raise TypeError(f"after must be a list of tasks (TaskInfo, (queue, id) or id), "
                        f"got {after!r}")
    nodes = []
    for i, dep in enumerate(after):
        if isinstance(dep, TaskInfo):
            q, task_id = dep.queue, dep.id
        elif isinstance(dep, tuple) and len(dep) == 2:
            q, task_id = validate_queue_name(dep[0]), check_text(dep[1], "task id")
        elif isinstance(dep, str):
            q, task_id = queue, check_text(dep, "task id")
        else:
            raise TypeError(f"after item {i}: expected a TaskInfo, a (queue, id) pair or a "
                            f"task id, got {dep!r}")
        nodes.append(AfterNode(f"x{i}", q, task_id))
    return nodes


class _Plan:
    """Everything to write, computed before anything is."""

    def __init__(self, workflow_id: str, graph: Graph, on_error: Step[Any, Any] | None,
                 now: int) -> None:
        self.id = workflow_id
        self.graph = graph
        self.steps: dict[str, list[StoredStep]] = {}
        self.nodes: list[NewNode] = []
        self.task_ids: dict[str, tuple[str, str]] = {}
        succ = graph.successors()
        tasks: list[tuple[str, Step[Any, Any], str | None]] = [
            (t.id, t.step, t.dep) for t in graph.tasks]
        if on_error is not None:
            tasks.append((ON_ERROR_NODE, on_error, None))
        for node, step, dep in tasks:
            try:
                stored, spec = self._step(node, step, dep, now)
            except (TypeError, ValueError) as exc:
                raise type(exc)(f"workflow step {node} ({step.task.type}): {exc}") from None
            self.steps.setdefault(self.task_ids[node][0], []).append(stored)
            self.nodes.append(NewNode(node, spec.to_json(), succ.get(node, ()),
                                      0 if dep is None else 1))
        for j in graph.joins:
            self.nodes.append(NewNode(j.id, NodeSpec(items=tuple(j.items)).to_json(),
                                      succ.get(j.id, ()), len(j.items)))
        for a in graph.afters:
            self.nodes.append(NewNode(a.id, NodeSpec(waits_for=(a.queue, a.task_id)).to_json(),
                                      succ.get(a.id, ()), 0))

    def _step(self, node: str, step: Step[Any, Any], dep: str | None,
              now: int) -> tuple[StoredStep, NodeSpec]:
        task = step.task
        opts = step.overrides
        new = prepare(task, opts, now)
        if new.process_at_ms > now:
            raise ValueError("a workflow step runs when the steps before it are done: "
                             "process_at/process_in do not apply")
        if new.msg.group or new.unique is not None:
            raise ValueError("a workflow step cannot be in a group or unique")
        explicit = opts.get("task_id", task.options.task_id)
        msg: TaskMessage = new.msg
        msg.id = f"{self.id}.{node}" if explicit is UNSET or explicit is None else msg.id
        msg.headers = {**msg.headers, WORKFLOW_HEADER: self.id}
        if step.mode == "r" and msg.enc != "n":
            raise ValueError("a step receiving its input as payload must have no payload")
        self.task_ids[node] = (msg.queue, msg.id)
        spec = NodeSpec(queue=msg.queue, task_id=msg.id, mode=step.mode, dep=dep, type=msg.type)
        ready = dep is None and node != ON_ERROR_NODE
        return StoredStep(msg.id, msg.encode(), new.payload, self.id, node, step.mode,
                          ready), spec


async def start_workflow(broker: Broker, flow: Flow[Any, Any], *, workflow_id: str | None,
                         on_error: object, retention: float,
                         after: Sequence[Any] = ()) -> WorkflowHandle[Any]:
    """Validate, compile and start ``flow`` (see ``Flow.enqueue``)."""
    flow = as_flow(flow, "workflow")
    wf_id = (WORKFLOW_ID_PREFIX + uuid.uuid4().hex if workflow_id is None
             else check_workflow_id(workflow_id))
    retention_ms = to_ms(retention, "retention", allow_zero=False)
    error_step = None
    if on_error is not None:
        error_flow = as_flow(on_error, "on_error")
        if not isinstance(error_flow, Step):
            raise TypeError("on_error must be a single step")
        error_step = error_flow
    graph = Graph()
    dep = None
    if after:
        first = _first_queue(flow)
        graph.afters = _after_nodes(after, first)
        dep = graph.add_join([a.id for a in graph.afters])
    graph.final = build(flow, graph, dep)
    now = broker.workflows.clock.now_ms()
    plan = _Plan(wf_id, graph, error_step, now)
    await _write(broker, plan, retention_ms, now)
    return WorkflowHandle(wf_id, len(graph.tasks), flow.decoder())


def _first_queue(flow: Flow[Any, Any]) -> str:
    while not isinstance(flow, Step):
        flow = flow.parts[0]  # type: ignore[attr-defined]
    queue = flow.overrides.get("queue", flow.task.queue)
    return str(queue)


async def _write(broker: Broker, plan: _Plan, retention_ms: int, now: int) -> None:
    ops = broker.workflows
    record = TaskMessage(id=plan.id, type="workflow", queue=workflow_queue(plan.id),
                         max_retry=0, enc="n", enqueued_at_ms=now).encode()
    await ops.register(plan.id, now)
    on_error = ON_ERROR_NODE if ON_ERROR_NODE in plan.task_ids else ""
    if not await ops.create(plan.id, record, plan.graph.final, on_error, retention_ms,
                            len(plan.graph.tasks), plan.nodes):
        raise TaskIDConflictError(f"workflow {plan.id!r} already exists")
    try:
        # The waiting steps first, then the ready ones: a ready step may run and finish at
        # once, and the release that follows must find every step it names stored.
        for ready in (False, True):
            for queue, all_steps in plan.steps.items():
                steps = [s for s in all_steps if s.ready is ready]
                if not steps:
                    continue
                stored = await ops.store_steps(queue, steps)
                taken = [s.id for s, ok in zip(steps, stored, strict=True) if not ok]
                if taken:
                    raise TaskIDConflictError(f"workflow {plan.id!r}: task id {taken[0]!r} "
                                              f"already exists in queue {queue!r}")
        outcomes: list[StepOutcome] = []
        for a in plan.graph.afters:
            watched = await ops.watch(a.queue, a.task_id, plan.id, a.id)
            if watched.state is WatchState.MISSING:
                raise TaskNotFoundError(
                    f"task {a.task_id!r} of queue {a.queue!r} (after=) does not exist: it never "
                    "did, or it finished without retention (depend on tasks that keep their "
                    "result, or have not finished yet)")
            if watched.state is WatchState.SUCCEEDED:
                outcomes.append(StepOutcome(a.id, StepEnd.SUCCEEDED, watched.encoding,
                                            watched.body))
            elif watched.state is WatchState.FAILED:
                outcomes.append(StepOutcome(a.id, StepEnd.FAILED, "-", watched.body))
        if outcomes:
            await advance(broker, plan.id, outcomes)
    except BaseException:
        await _abandon(broker, plan.id)
        raise
    await ops.started(plan.id)


async def _abandon(broker: Broker, workflow_id: str) -> None:
    try:
        if (await broker.workflows.cancel(workflow_id, "workflow could not be started")
                is CancelResult.CANCELLED):
            await drop_steps(broker, workflow_id)
    except Exception:  # the original error is the one to raise
        pass


async def enqueue_after(broker: Broker, task: Task, options: Mapping[str, Any],
                        after: Sequence[Any]) -> TaskInfo:
    """``client.enqueue(task, after=[...])``: the task waits (stored, in no list) until every
    task in ``after`` succeeded, as a one-step workflow; it receives no input."""
    if not after:
        raise ValueError("after must name at least one task")
    opts = dict(options)
    if task.id is None and "task_id" not in opts:
        opts["task_id"] = str(uuid.uuid4())
    step: Step[Any, Any] = Step(task, "", overrides=opts)
    handle = await start_workflow(broker, step, workflow_id=None, on_error=None,
                                  retention=WORKFLOW_RETENTION, after=after)
    del handle
    new = prepare(task, opts, broker.workflows.clock.now_ms())
    return task_info(new.msg, new.payload, TaskState.WAITING)
