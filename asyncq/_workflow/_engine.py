"""Advancing a workflow: apply step outcomes to its state, release the steps that may run,
finish, fail or cancel it. Shared by the worker's advancer (outcomes from outboxes) and by
the client (tasks an ``after=`` workflow found finished already).

Every action is idempotent, so the whole sequence may be replayed after a crash at any
point: an outcome already recorded changes nothing, releasing a step that is not waiting does
nothing (a step runs at most once), finishing a finished workflow does nothing, and deleting
the steps of a cancelled workflow twice deletes nothing more.
"""

from __future__ import annotations

import base64
from collections.abc import Sequence

import orjson

from .._broker import (
    Broker,
    Change,
    DropResult,
    StepInput,
    StepOutcome,
    Value,
    WorkflowOps,
    WorkflowState,
)
from .._log import get_logger
from ._nodes import NodeSpec

_log = get_logger("workflow")



def json_of(value: Value) -> bytes:
    """A value as JSON text: bytes become their base64 text (as typed tasks store bytes)."""
    enc, body = value
    if enc == "j":
        return body
    if enc == "b":
        return orjson.dumps(base64.b64encode(body).decode("ascii"))
    return b"null"


class Values:
    """Reads node values of one workflow, each at most once."""

    def __init__(self, ops: WorkflowOps, workflow_id: str) -> None:
        self.ops = ops
        self.id = workflow_id
        self.specs: dict[str, NodeSpec] = {}
        self.values: dict[str, Value] = {}

    async def load_specs(self, nodes: Sequence[str]) -> None:
        missing = [n for n in dict.fromkeys(nodes) if n not in self.specs]
        if missing:
            for node, raw in zip(missing, await self.ops.specs(self.id, missing), strict=True):
                self.specs[node] = NodeSpec.from_json(raw)

    async def value(self, node: str) -> Value:
        """The value of ``node``: a task's result, or a join's list of its items' values."""
        if node in self.values:
            return self.values[node]
        # Expand joins (breadth first) to the task nodes whose results are needed.
        pending, leaves, seen = [node], [], set()
        while pending:
            await self.load_specs(pending)
            nxt: list[str] = []
            for n in pending:
                if n in seen or n in self.values:
                    continue
                seen.add(n)
                items = self.specs[n].items
                if items is None:
                    leaves.append(n)
                else:
                    nxt.extend(items)
            pending = nxt
        if leaves:
            found = await self.ops.results(self.id, leaves)
            self.values.update(zip(leaves, found, strict=True))
        return self._assemble(node)

    def _assemble(self, node: str) -> Value:
        # Joins built bottom-up without recursion limits on long groups.
        order, stack = [], [node]
        while stack:
            n = stack.pop()
            if n in self.values:
                continue
            order.append(n)
            stack.extend(i for i in self._items(n) if i not in self.values)
        for n in reversed(order):
            if n not in self.values:
                self.values[n] = ("j", b"[" + b",".join(json_of(self.values[i])
                                                        for i in self._items(n)) + b"]")
        return self.values[node]

    def _items(self, join: str) -> tuple[str, ...]:
        items = self.specs[join].items
        if items is None:
            raise KeyError(f"workflow {self.id}: node {join} is no join")
        return items


def input_for(mode: str, value: Value) -> tuple[bytes, str]:
    """What a released step gets for its input mode: ('', '-') nothing; a payload as it was
    stored ('r'); a JSON argument (a typed step)."""
    if not mode:
        return b"", "-"
    if mode == "r":
        if value[0] == "-":
            return b"null", "j"
        return value[1], value[0]
    return json_of(value), "j"


async def release(ops: WorkflowOps, values: Values, nodes: Sequence[str]) -> int:
    """Release ready task nodes (waiting -> pending, with their inputs); returns how many
    were released now (a node not waiting any more is left alone)."""
    await values.load_specs(nodes)
    by_queue: dict[str, list[StepInput]] = {}
    for node in nodes:
        spec = values.specs[node]
        if spec.step is None:
            continue
        queue, task_id = spec.step
        dep = spec.dep
        value = await values.value(dep) if dep is not None and spec.mode else ("-", b"")
        payload, enc = input_for(spec.mode, value)
        by_queue.setdefault(queue, []).append(StepInput(task_id, payload, enc))
    released = 0
    for queue, steps in by_queue.items():
        released += sum(await ops.release(queue, steps))
    return released


async def advance(broker: Broker, workflow_id: str,
                  outcomes: Sequence[StepOutcome]) -> WorkflowState | None:
    """Apply ``outcomes`` to the workflow and do what follows; returns its state after (None:
    there is no such workflow)."""
    ops = broker.workflows
    applied = await ops.apply(workflow_id, outcomes)
    state = applied.state
    if state is None:
        return state
    values = Values(ops, workflow_id)
    if state in (WorkflowState.RUNNING, WorkflowState.STARTING):
        ready = applied.ready
        if applied.replay or applied.change is Change.RESUMED:
            ready = await ops.ready(workflow_id)
        if ready:
            await release(ops, values, ready)
        if applied.final_done:
            await finish(broker, values)
    elif state is WorkflowState.FAILED and (applied.change is Change.FAILED or applied.replay):
        await failed(broker, values)
    elif state is WorkflowState.CANCELLED and (applied.change is Change.CANCELLED
                                               or applied.replay):
        await drop_steps(broker, workflow_id)
    return state


async def finish(broker: Broker, values: Values) -> None:
    ops = values.ops
    summary = await ops.summary(values.id)
    if summary is None:
        return  # (it expired: nothing to finish)
    final, on_error = summary.final, summary.on_error
    enc, body = await values.value(final)
    if enc == "-":
        enc, body = "j", b"null"
    if await ops.finish(values.id, enc, body):
        _log.debug("workflow succeeded", workflow_id=values.id)
    if on_error:
        await _drop(broker, values, [on_error])


async def failed(broker: Broker, values: Values) -> None:
    """Run the error callback (once: releasing is idempotent) and let the waiting steps
    expire with the workflow unless a re-run resumes it."""
    summary = await values.ops.summary(values.id)
    if summary is None:
        return  # (it expired: nothing to run or to park)
    on_error, node, error = summary.on_error, summary.failed_node, summary.error
    if on_error:
        await values.load_specs([on_error, node])
        spec = values.specs[on_error]
        failed_spec = values.specs[node]
        info = {"workflow_id": values.id, "step_id": failed_spec.task_id or node,
                "type": failed_spec.type, "error": error}
        payload, enc = input_for(spec.mode, ("j", orjson.dumps(info)))
        if spec.step is not None:
            queue, task_id = spec.step
            await values.ops.release(queue, [StepInput(task_id, payload, enc)])
    record = await values.ops.read(values.id)
    specs = {} if record is None else record.specs
    for queue, ids in _task_ids_by_queue(specs, skip=on_error).items():
        await values.ops.park(queue, ids, summary.retention_ms or 1)


async def drop_steps(broker: Broker, workflow_id: str) -> None:
    """Delete the steps of a cancelled workflow that are not running; cancel running ones."""
    record = await broker.workflows.read(workflow_id)
    if record is None:
        return
    for queue, ids in _task_ids_by_queue(record.specs).items():
        codes = await broker.workflows.drop(queue, ids)
        for task_id, code in zip(ids, codes, strict=True):
            if code is DropResult.RUNNING:
                await broker.request_cancel(queue, task_id)


async def _drop(broker: Broker, values: Values, nodes: Sequence[str]) -> None:
    await values.load_specs(nodes)
    for node in nodes:
        step = values.specs[node].step
        if step is not None:
            await broker.workflows.drop(step[0], [step[1]])


def _task_ids_by_queue(specs: dict[str, bytes], skip: str = "") -> dict[str, list[str]]:
    by_queue: dict[str, list[str]] = {}
    for node, raw in specs.items():
        step = NodeSpec.from_json(raw).step
        if step is not None and node != skip:
            by_queue.setdefault(step[0], []).append(step[1])
    return by_queue

