"""The worker runtime: ServeMux routing, the Worker and its background components.

The path of one task, in two files: ``_processor`` fetches it (a dequeue, or a one-hop
hand-off), admits it through the limits gate and runs its handler; ``_outcomes`` decides what
the run becomes (and why a stopped run ended: ``_running.Stop``); the acker (``_acker``)
writes that outcome. ``_worker`` wires every component and writes down the shutdown order.
"""

from ._config import WorkerConfig
from ._mux import Handler, Middleware, ServeMux
from ._retry import default_retry_delay
from ._worker import Worker

__all__ = ["Handler", "Middleware", "ServeMux", "Worker", "WorkerConfig", "default_retry_delay"]
