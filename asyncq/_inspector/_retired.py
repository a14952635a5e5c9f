"""Retired spellings: each still works for one release and warns, naming the word that
replaced it (one word per concept on every surface). The Inspector's aliases use
:func:`deprecated`; the command line says the same on stderr."""

from __future__ import annotations

import warnings

#: How long a retired spelling keeps working, as its warning says.
REMOVED_IN = "the next release"


def deprecated(old: str, new: str) -> None:
    """Warn (``DeprecationWarning``, pointing at the caller's caller) that ``old`` is retired
    and ``new`` replaces it."""
    warnings.warn(f"{old} is deprecated and is removed in {REMOVED_IN}; use {new}",
                  DeprecationWarning, stacklevel=3)
