"""The worker runtime: ServeMux routing, the Worker and its background components."""

from ._config import WorkerConfig
from ._mux import Handler, Middleware, ServeMux
from ._retry import default_retry_delay
from ._worker import Worker

__all__ = ["Handler", "Middleware", "ServeMux", "Worker", "WorkerConfig", "default_retry_delay"]
