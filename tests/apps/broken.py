"""A module that raises while it is imported (a worker target's typo)."""

from __future__ import annotations

SETTINGS: dict[str, str] = {}
DATABASE_URL = SETTINGS["DATABASE_URL"]  # raises KeyError at import
