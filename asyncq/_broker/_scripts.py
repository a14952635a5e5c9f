"""Loads the Lua scripts shipped in ``lua/`` once and names them by SHA1.

A line ``-- @include NAME.lua`` is replaced by that file, so shared helpers live in one place.
A script that moves or shrinks data starts with ``#!lua flags=allow-oom`` (Redis 7): a full
Redis (``maxmemory`` + ``noeviction``) still runs it, so workers keep draining what fills it.
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass
from functools import cache
from importlib import resources

_INCLUDE = re.compile(r"^-- @include (\S+)$", re.MULTILINE)


@dataclass(frozen=True, slots=True)
class Script:
    """One Lua script: its name, full source and SHA1 (what EVALSHA takes)."""

    name: str
    source: str
    sha: str


def _read(name: str) -> str:
    return (resources.files("asyncq._broker") / "lua" / name).read_text(encoding="utf-8")


@cache
def load_scripts() -> dict[str, Script]:
    """Every script in ``lua/`` (files starting with ``_`` are include-only), keyed by name."""
    scripts: dict[str, Script] = {}
    for entry in (resources.files("asyncq._broker") / "lua").iterdir():
        filename = entry.name
        if not filename.endswith(".lua") or filename.startswith("_"):
            continue
        source = _INCLUDE.sub(lambda m: _read(m.group(1)), _read(filename))
        name = filename.removesuffix(".lua")
        sha = hashlib.sha1(source.encode(), usedforsecurity=False).hexdigest()
        scripts[name] = Script(name, source, sha)
    return scripts
