"""What a Broker's listeners yield: typed, decoded messages (the wire format stays inside).

A worker hears cancel requests and wake-ups (``listen_signals``) and the tasks handed off to
it in one hop (``listen_handoffs``); a client hears task events (``listen_events``, yielding
``asyncq.TaskEvent``).
"""

from __future__ import annotations

from typing import NamedTuple

from ._values import RawTask


class CancelRequest(NamedTuple):
    """Cancel ``task_id`` if this worker runs it."""

    task_id: str


class QueueWake(NamedTuple):
    """Work may be ready in ``queue``: now (``due_ms`` None), or at ``due_ms`` (Unix ms),
    a task scheduled for later having become the queue's earliest."""

    queue: str
    due_ms: int | None = None


class QueuesAdded(NamedTuple):
    """``queues`` were just added to the queue registry (the first task of a new queue was
    stored, or a worker registered the queues it serves): what a worker serving a pattern
    (``tenant:*``) hears to serve a matching new queue at once."""

    queues: tuple[str, ...]


#: What ``Broker.listen_signals`` yields once subscribed.
WorkerSignal = CancelRequest | QueueWake | QueuesAdded


class Handoff(NamedTuple):
    """A task handed off in one hop: already leased to the worker hearing it, until
    ``lease_until_ms`` (Unix ms of the server's clock)."""

    queue: str
    task: RawTask
    lease_until_ms: int
