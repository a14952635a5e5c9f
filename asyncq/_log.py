"""Loggers: one structlog logger per component; asyncq never configures logging globally."""

from __future__ import annotations

from typing import Any

import structlog
from structlog.typing import FilteringBoundLogger


def get_logger(component: str, **context: Any) -> FilteringBoundLogger:
    """A structlog logger bound to ``component`` (and any extra key-values).

    Typed as structlog's default wrapper; asyncq calls only the methods every bound logger has
    (``debug`` ... ``exception``, ``bind``), so an application's own structlog set-up works too.
    """
    logger: FilteringBoundLogger = structlog.get_logger("asyncq").bind(component=component,
                                                                       **context)
    return logger
