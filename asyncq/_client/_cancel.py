"""Cancellation of a running task, shared by Client.cancel and Inspector.cancel."""

from __future__ import annotations

from .._broker import Broker


def _name(value: object, what: str) -> str:
    if not isinstance(value, str):
        raise TypeError(f"{what} must be a str, got {value!r}")
    if not value.strip():
        raise ValueError(f"{what} must not be blank")
    return value


async def request_cancel(broker: Broker, task_id: object, queue: object = None) -> bool:
    """Cancel ``task_id`` if it is active (in ``queue``, or in whichever registered queue holds
    it): True when it was and the cancellation is recorded — a marker its worker reads at its
    next lease renewal or pub/sub reconnect, and a pub/sub message (the fast path).

    A task found in no queue still gets the message (best effort, as before markers existed:
    a queue that is not registered); False then.
    """
    task_id = _name(task_id, "task id")
    queues = [_name(queue, "queue")] if queue is not None else await broker.inspect.queue_names()
    for name in queues:
        if await broker.request_cancel(name, task_id):
            return True
    await broker.publish_cancel(task_id)
    return False
