"""Fixtures of the tests in this directory (defined in broker_helpers.py)."""

from broker_helpers import broker, client  # noqa: F401
