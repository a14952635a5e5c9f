"""What a Broker's listeners yield: typed, decoded messages (the wire format stays inside).

A worker hears cancel requests and wake-ups (``listen_signals``) and the tasks handed off to
it in one hop (``listen_handoffs``); a client hears task events (``listen_events``, yielding
``asyncq.TaskEvent``).
"""

from __future__ import annotations

# (defined in ``_values``, the seam's one value module)
from ._values import CancelRequest as CancelRequest
from ._values import Handoff as Handoff
from ._values import QueuesAdded as QueuesAdded
from ._values import QueueWake as QueueWake
from ._values import WorkerSignal as WorkerSignal
