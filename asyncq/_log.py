"""Loggers: one structlog logger per component; asyncq never configures logging globally.

A logger is resolved when it logs, not when it is made: one made at import time (a module's
``_log``) or before ``configure_logging`` runs still writes the way logging is configured
when it writes (JSON in ``--log-format json``), never the way structlog was set up at import.
"""

from __future__ import annotations

from typing import Any, cast

import structlog
from structlog.typing import FilteringBoundLogger

MAX_LOGGED_IDS = 20
"""Most task ids one log line lists (with the count of all of them)."""

_generation = 0
"""Bumped by ``configure_logging``: a logger resolved under an older set-up resolves again."""


def reconfigured() -> None:
    """Logging was set up anew: every asyncq logger resolves against it at its next line."""
    global _generation
    _generation += 1


class _LazyLogger:
    """A bound logger for ``context``, built from structlog's configuration in force at its
    first line and rebuilt when that configuration changes (``reconfigured``, or structlog
    configured for the first time by the application)."""

    __slots__ = ("_context", "_logger", "_token")

    def __init__(self, context: dict[str, Any]) -> None:
        self._context = context
        self._logger: Any = None
        self._token: tuple[int, bool] | None = None

    def _resolve(self) -> Any:
        token = (_generation, structlog.is_configured())
        if token != self._token:
            self._logger = structlog.get_logger("asyncq").bind(**self._context)
            self._token = token
        return self._logger

    def __getattr__(self, name: str) -> Any:
        return getattr(self._resolve(), name)


def get_logger(component: str, **context: Any) -> FilteringBoundLogger:
    """A structlog logger bound to ``component`` (and any extra key-values).

    Typed as structlog's default wrapper; asyncq calls only the methods every bound logger has
    (``debug`` ... ``exception``, ``bind``), so an application's own structlog set-up works too.
    """
    return cast(FilteringBoundLogger, _LazyLogger({"component": component, **context}))


def some_ids(ids: list[str]) -> list[str]:
    """The first ``MAX_LOGGED_IDS`` of ``ids``: a line names the tasks without growing with
    them (it gives their count beside)."""
    return ids[:MAX_LOGGED_IDS]
