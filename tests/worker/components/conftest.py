"""Fixtures of the tests in this directory (defined in component_helpers.py)."""

from component_helpers import make_worker  # noqa: F401
