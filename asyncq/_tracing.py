"""The seam tracing plugs into: nothing here imports a tracing library.

``asyncq.otel.instrument()`` installs a Tracer; until then ``active`` is None and the client
and worker pay one attribute read per task for it.
"""

from __future__ import annotations

from contextlib import AbstractContextManager
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from ._broker import NewTask
    from ._model._message import TaskMessage
    from ._model._task import Task


class Tracer(Protocol):
    def producing(self, tasks: list[NewTask]) -> AbstractContextManager[object]:
        """Around storing ``tasks``: may add trace headers to their messages first."""
        ...

    def consuming(self, msg: TaskMessage, task: Task) -> AbstractContextManager[object]:
        """Around one run of a handler (exceptions pass through it)."""
        ...

    def log_context(self) -> dict[str, Any]:
        """Fields to add to a log line written now (trace and span ids), or {}."""
        ...


#: The installed tracer, or None (tracing off).
active: Tracer | None = None


def install(tracer: Tracer | None) -> None:
    global active
    active = tracer
