"""What a workflow looks like from outside: its handle, its state and its steps.

``WorkflowState`` is the broker's (``_broker._wf_ops``): the values a workflow's record holds.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Generic, Protocol, TypeVar

from .._broker import WorkflowState as WorkflowState
from .._model._info import TaskFailedError, TaskInfo, TaskState
from .._validate import WORKFLOW_ID_PREFIX

O = TypeVar("O", covariant=True)  # noqa: E741


def is_workflow_id(value: object) -> bool:
    return isinstance(value, str) and value.startswith(WORKFLOW_ID_PREFIX)


class ResultSource(Protocol):
    """What a handle reads its workflow's value from: a ``Client`` (kept as a protocol so the
    workflow model does not depend on the client that starts workflows)."""

    async def result(self, task: str, *, timeout: float | None = None) -> Any: ...


@dataclass(frozen=True, slots=True)
class WorkflowHandle(Generic[O]):
    """A started workflow: ``await handle.result(client)`` (or ``client.result(handle.id)``)
    waits for its value, decoded to the type of its last piece."""

    id: str
    steps: int
    decode: Callable[[Any], Any] = field(repr=False)

    async def result(self, client: ResultSource, *, timeout: float | None = None) -> O:
        """The workflow's value; TaskFailedError (with the failing step's error) when it
        failed or was cancelled, TimeoutError after ``timeout`` seconds."""
        value: O = self.decode(await client.result(self.id, timeout=timeout))
        return value


@dataclass(frozen=True, slots=True)
class WorkflowStep:
    """One node of a workflow as the Inspector shows it: a task step (``task_id``,
    ``queue``, ``type``), a join of a group (``kind`` "join"), or a task it waits for
    (``kind`` "after")."""

    node: str
    kind: str  # "task", "join", "after" or "on_error"
    state: str  # "done", "failed", "cancelled", or the task's state (waiting, pending...)
    task_id: str | None = None
    queue: str | None = None
    type: str | None = None
    error: str | None = None
    depends_on: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class WorkflowInfo:
    """A snapshot of a workflow (``Inspector.workflow``)."""

    id: str
    state: WorkflowState
    created_at: datetime | None
    steps: int
    done: int
    failed_step: str | None = None
    error: str | None = None
    result: bytes | None = None
    result_encoding: str = "j"
    nodes: tuple[WorkflowStep, ...] = ()

    @property
    def task_state(self) -> TaskState:
        """The state ``client.wait`` reports for it."""
        return {WorkflowState.SUCCEEDED: TaskState.COMPLETED,
                WorkflowState.FAILED: TaskState.ARCHIVED,
                WorkflowState.CANCELLED: TaskState.ARCHIVED,
                WorkflowState.STARTING: TaskState.PENDING}.get(self.state, TaskState.ACTIVE)


#: The prefix of the error a workflow records when a step's end cancelled it.
_CANCELLED_PREFIX = "workflow cancelled: "


def workflow_failed(info: TaskInfo, workflow: WorkflowInfo | None) -> TaskFailedError:
    """``Client.result`` of a workflow that failed or was cancelled: a TaskFailedError (``info``
    is the workflow's final TaskInfo) whose message names the workflow and the step that ended
    it — its node, task id, type and queue, as ``Inspector.workflow`` shows them — not the
    internal queue its record lives in."""
    err = TaskFailedError(info)
    cancelled = workflow is not None and workflow.state is WorkflowState.CANCELLED
    how = "was cancelled" if cancelled else "failed"
    error = (workflow.error if workflow is not None else None) or info.last_error or ""
    step = None
    if workflow is not None and workflow.failed_step is not None:
        step = next((n for n in workflow.nodes if n.node == workflow.failed_step), None)
        how += f" at step {workflow.failed_step}"
        if cancelled and error.startswith(_CANCELLED_PREFIX):
            error = error[len(_CANCELLED_PREFIX):]
    if step is not None and step.task_id is not None:
        how += f" (task {step.task_id!r} of type {step.type!r} in queue {step.queue!r})"
    err.args = (f"workflow {info.id!r} {how}" + (f": {error}" if error else ""),)
    return err
