"""Loggers: one structlog logger per component; asyncq never configures logging globally."""

from __future__ import annotations

from typing import Any

import structlog


def get_logger(component: str, **context: Any) -> Any:
    """A structlog logger bound to ``component`` (and any extra key-values)."""
    return structlog.get_logger("asyncq").bind(component=component, **context)
