"""Cancellation of a task, shared by Client.cancel and Inspector.cancel: as Celery's revoke, a
cancelled task never runs (one waiting is removed), and a running one is stopped."""

from __future__ import annotations

import enum

from .._broker import CANCEL_ENDED, CANCEL_REMOVED, CANCEL_RUNNING, Broker


class CancelOutcome(enum.StrEnum):
    """What a cancel did; true when it did something (REMOVED, REQUESTED)."""

    REMOVED = "removed"
    """The task was waiting to run (pending, scheduled, retry, aggregating, a workflow step
    waiting for the steps before it): it is deleted and never runs. Whoever waits for it
    (``Client.result``) learns it was deleted, reason "cancelled"."""
    REQUESTED = "requested"
    """The task is running: its worker stops the handler (a process-run one is killed) and
    archives it with the error "task cancelled"."""
    ENDED = "ended"
    """The task had already ended (completed or archived): nothing was done."""
    NOT_FOUND = "not_found"
    """No such task (in the queue named, or in any registered queue)."""

    def __bool__(self) -> bool:
        return self is CancelOutcome.REMOVED or self is CancelOutcome.REQUESTED

    def told(self, task_id: str) -> str:
        """What was done, in a line (the CLI's output, the dashboard's message)."""
        return _TOLD[self].format(task_id)


_TOLD = {
    CancelOutcome.REMOVED: "task {} removed: it was waiting to run, and never will",
    CancelOutcome.REQUESTED: "cancellation recorded for running task {}: its worker stops it "
                             "and archives it",
    CancelOutcome.ENDED: "task {} has already ended: nothing to cancel",
    CancelOutcome.NOT_FOUND: "task {} not found: nothing to cancel",
}


def _name(value: object, what: str) -> str:
    if not isinstance(value, str):
        raise TypeError(f"{what} must be a str, got {value!r}")
    if not value.strip():
        raise ValueError(f"{what} must not be blank")
    return value


async def request_cancel(broker: Broker, task_id: object,
                         queue: object = None) -> CancelOutcome:
    """Cancel ``task_id`` (in ``queue``, or in whichever registered queue holds it) in one
    script: removed if it waits to run, its cancellation requested if it runs — a marker its
    worker reads at its next lease renewal or pub/sub reconnect, and a pub/sub message (the
    fast path).

    A task found in no queue still gets the message (best effort, for a queue that is not
    registered): NOT_FOUND then.
    """
    task_id = _name(task_id, "task id")
    queues = [_name(queue, "queue")] if queue is not None else await broker.inspect.queue_names()
    ended = False
    for name in queues:
        code = await broker.request_cancel(name, task_id)
        if code == CANCEL_RUNNING:
            return CancelOutcome.REQUESTED
        if code == CANCEL_REMOVED:
            return CancelOutcome.REMOVED
        ended = ended or code == CANCEL_ENDED
    if ended:
        return CancelOutcome.ENDED
    await broker.publish_cancel(task_id)
    return CancelOutcome.NOT_FOUND


async def cancel_flow(broker: Broker, workflow_id: str) -> CancelOutcome:
    """Cancel a workflow: REQUESTED when it had not ended (its steps waiting to run are
    removed, its running ones asked to stop), else ENDED, or NOT_FOUND."""
    from .._workflow._control import cancel_workflow  # (the workflow layer, used on demand)

    if await cancel_workflow(broker, workflow_id):
        return CancelOutcome.REQUESTED
    if await broker.workflows.read(workflow_id) is not None:
        return CancelOutcome.ENDED
    return CancelOutcome.NOT_FOUND
