"""Fixtures of the tests in this directory (defined in client_helpers.py)."""

from client_helpers import client  # noqa: F401
