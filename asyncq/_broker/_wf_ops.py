"""The values and the protocol of workflow operations (``broker.workflows``); the Redis
implementation is ``_workflows.RedisWorkflowOps``.

Everything that crosses this seam is typed: the workflow layer never sees a key name, a
script's reply or the one-letter codes its state is stored with.
"""

from __future__ import annotations

import enum
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass
from typing import NamedTuple, Protocol

from .._clock import Clock


class WorkflowState(enum.Enum):
    """Where a workflow is: the values stored in its record (public as
    ``asyncq.WorkflowState``)."""

    STARTING = "starting"  # its steps are being stored
    RUNNING = "running"
    SUCCEEDED = "succeeded"
    FAILED = "failed"  # a step failed for good: re-running it from the archive resumes
    CANCELLED = "cancelled"


class StepEnd(enum.Enum):
    """How a step (or a task a workflow waits for) ended, as recorded for its workflow."""

    SUCCEEDED = "s"
    FAILED = "f"  # archived: a re-run that succeeds resumes the workflow
    CANCELLED = "c"  # cancelled or deleted: it cancels the workflow


Value = tuple[str, bytes]
"""A node's value: its encoding ('j' JSON, 'b' bytes, '-' none) and its bytes."""


class StepOutcome(NamedTuple):
    """How one node of a workflow ended: the value of a step that succeeded (``encoding``
    and ``body``), else the error in ``body`` (``encoding`` '-')."""

    node: str
    end: StepEnd
    encoding: str
    body: bytes


class NodeState(enum.Enum):
    """The end of a node as its workflow recorded it (a node not finished has none)."""

    DONE = "d"
    FAILED = "f"
    CANCELLED = "x"


class Change(enum.Enum):
    """What an ``apply`` changed in the workflow's state."""

    NONE = ""
    FAILED = "failed"  # a step failed for good
    CANCELLED = "cancelled"  # a step was cancelled
    RESUMED = "resumed"  # the failed step succeeded on a re-run


class Applied(NamedTuple):
    """What ``apply`` did: the workflow's state after it (None: there is no such workflow),
    what it changed, whether the final node is done, whether an outcome was a replay (one
    recorded before: its follow-up may have been cut short), and the task nodes that became
    ready."""

    state: WorkflowState | None
    change: Change
    final_done: bool
    replay: bool
    ready: list[str]


class WatchState(enum.Enum):
    """Where a task a workflow waits for (``after=``) was when the workflow began watching."""

    MISSING = "m"  # no such task (it never existed, or ended without retention)
    WAITING = "w"  # not finished: its outcome will reach the workflow's outbox
    SUCCEEDED = "s"  # completed, its result kept
    FAILED = "f"  # archived: re-running it resumes the workflow


class Watched(NamedTuple):
    """What ``watch`` found: the task's state, and its result (``encoding`` '-' none) when it
    succeeded, or its error when it failed."""

    state: WatchState
    encoding: str = "-"
    body: bytes = b""


class CancelResult(enum.IntEnum):
    """What ``cancel`` did."""

    CANCELLED = 1  # cancelled now
    ENDED = 0  # it had ended already (succeeded or cancelled)
    MISSING = -1  # no such workflow


class DropResult(enum.IntEnum):
    """What ``drop`` did to one step."""

    GONE = 0  # finished, or gone already
    DELETED = 1
    RUNNING = 2  # active: not deleted (cancel it)


class NewNode(NamedTuple):
    """One node of a new workflow: its spec document, the nodes waiting for it, and how many
    of its inputs must be done before it is."""

    node: str
    spec: bytes
    successors: Sequence[str]
    inputs: int


class StoredStep(NamedTuple):
    """One step task to store: its id, message and payload, the workflow node it is, how it
    takes its input when released (``input``: '' not at all, 'r' as its payload, else the name
    of the argument that gets it) and whether it is pending at once (``ready``)."""

    id: str
    msg: bytes
    payload: bytes
    workflow_id: str
    node: str
    input: str
    ready: bool


class StepInput(NamedTuple):
    """What a released step receives: its id, its input and the input's encoding ('j', 'b';
    '-' no input)."""

    task_id: str
    input: bytes
    encoding: str


class OutboxRecord(NamedTuple):
    """One record taken from a queue's outbox: the step's id, the record as taken (``ack``
    deletes it only if unchanged), and ``(workflow id, outcome)`` for each workflow told of the
    step (None: the record is unreadable)."""

    task_id: str
    raw: bytes
    outcomes: list[tuple[str, StepOutcome]] | None


class WorkflowSummary(NamedTuple):
    """The fields of a workflow's record the workflow layer works with."""

    state: WorkflowState
    created_ms: int
    final: str  # the node whose value is the workflow's
    on_error: str  # the error callback's node, '' none
    failed_node: str  # '' none
    error: str  # why it failed or was cancelled, '' none
    retention_ms: int  # how long it is kept once it ended


@dataclass(frozen=True, slots=True)
class WorkflowRecord:
    """A whole workflow as stored: its summary, its value (once succeeded), the end of each
    finished node and each node's spec document (as written by ``create``)."""

    summary: WorkflowSummary
    result: bytes | None
    result_encoding: str
    node_states: dict[str, NodeState]
    specs: dict[str, bytes]


class WorkflowOps(Protocol):
    """What workflows read and write (``broker.workflows``). Every method raises BrokerError
    when Redis fails."""

    clock: Clock

    async def register(self, workflow_id: str, created_ms: int) -> None:
        """Add the workflow to the registry (what ``list_ids`` reads)."""
        ...

    async def unregister(self, workflow_ids: Sequence[str]) -> None:
        """Drop workflows (expired ones) from the registry."""
        ...

    async def list_ids(self, start: int, stop: int) -> list[tuple[str, int]]:
        """Registered workflows, newest first, by rank: ``(id, created ms)``."""
        ...

    async def create(self, workflow_id: str, msg: bytes, final: str, on_error: str,
                     retention_ms: int, steps: int, nodes: Sequence[NewNode]) -> bool:
        """Write a new workflow's record (``msg``: laid out like a task message) and graph;
        False when a workflow with this id exists (nothing written)."""
        ...

    async def store_steps(self, queue: str, steps: Sequence[StoredStep]) -> list[bool]:
        """Store steps of one queue: waiting, or pending when ready; one flag per step, False
        where a task with its id exists (nothing written for it)."""
        ...

    async def started(self, workflow_id: str) -> WorkflowState | None:
        """Every step is stored: starting -> running. The state now (a fast step may have
        ended it already); None when there is no such workflow."""
        ...

    async def apply(self, workflow_id: str, outcomes: Sequence[StepOutcome]) -> Applied:
        """Record how nodes ended (idempotent: an outcome recorded before is a replay) and
        find the task nodes that may run now."""
        ...

    async def ready(self, workflow_id: str) -> list[str]:
        """Every task node whose inputs are done and that may not be released yet, sorted."""
        ...

    async def specs(self, workflow_id: str, nodes: Sequence[str]) -> list[bytes | None]:
        """The spec documents of ``nodes`` (None: no such node)."""
        ...

    async def results(self, workflow_id: str, nodes: Sequence[str]) -> list[Value]:
        """The values of task ``nodes`` ('-' for a node that has none: not done, failed)."""
        ...

    async def release(self, queue: str, steps: Sequence[StepInput]) -> list[bool]:
        """Make waiting steps pending with their inputs; one flag per step, False where it
        was not waiting (nothing done: releasing twice never runs a step twice)."""
        ...

    async def park(self, queue: str, task_ids: Sequence[str], ttl_ms: int) -> int:
        """Let the waiting steps expire after ``ttl_ms``; returns how many were waiting."""
        ...

    async def drop(self, queue: str, task_ids: Sequence[str]) -> list[DropResult]:
        """Delete steps of a cancelled workflow that are not running."""
        ...

    async def finish(self, workflow_id: str, encoding: str, result: bytes) -> bool:
        """The workflow succeeded with ``result``; False when it was not running."""
        ...

    async def cancel(self, workflow_id: str, why: str) -> CancelResult:
        """Cancel a workflow that has not ended (a failed one too)."""
        ...

    async def watch(self, queue: str, task_id: str, workflow_id: str, node: str) -> Watched:
        """Tell a task to record its outcome for node ``node`` of the workflow (``after=``),
        atomically with reading where it is now."""
        ...

    async def take(self, queue: str, owner: str, lock_ms: int, limit: int,
                   idle_ms: int) -> list[OutboxRecord] | None:
        """Up to ``limit`` records of ``queue``'s outbox for advancer ``owner``, which holds
        the outbox for ``lock_ms``; None when another advancer drains it. Empty: the outbox
        is empty, and the next record written wakes the listeners (for ``idle_ms``)."""
        ...

    async def ack(self, queue: str, taken: Sequence[OutboxRecord]) -> int:
        """Delete applied records (each only if unchanged since taken); returns how many."""
        ...

    async def outbox_size(self, queue: str) -> int:
        """How many records ``queue``'s outbox holds."""
        ...

    def listen_outboxes(self, queues: Sequence[str]) -> AsyncIterator[None]:
        """Yield once subscribed, then each time an outbox of ``queues`` got a record while
        an advancer waited for one, until the connection fails (BrokerError)."""
        ...

    async def summary(self, workflow_id: str) -> WorkflowSummary | None:
        """The workflow's summary; None when there is no such workflow."""
        ...

    async def read(self, workflow_id: str) -> WorkflowRecord | None:
        """The whole workflow; None when there is no such workflow (or it expired)."""
        ...
