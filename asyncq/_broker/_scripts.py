"""Loads the Lua scripts shipped in ``lua/`` once and names them by SHA1.

A line ``-- @include NAME.lua`` is replaced by that file, its own includes resolved the same
way, so shared helpers live in one place and a file names only what it uses itself. A file is
inlined once per script: included again (directly or through another include), its line becomes
a comment. An include cycle is an error (:class:`IncludeError`).
A script that moves or shrinks data starts with ``#!lua flags=allow-oom`` (Redis 7): a full
Redis (``maxmemory`` + ``noeviction``) still runs it, so workers keep draining what fills it.
A transition that Go asynq's layout runs too keeps its code in ``lua/_<script>_body.lua``: the
script is its header, an include of its layout's hooks (the functions the body calls for what
differs between layouts) and one of the body (see ``_asynq/_scripts.py``).
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Callable
from dataclasses import dataclass
from functools import cache
from importlib import resources

_INCLUDE = re.compile(r"^-- @include (\S+)$", re.MULTILINE)
_SHEBANG = "#!"


class IncludeError(ValueError):
    """An ``-- @include`` that cannot be resolved: a cycle, a missing file, or an included file
    with a ``#!lua`` line (only a script's first line may hold one)."""


@dataclass(frozen=True, slots=True)
class Script:
    """One Lua script: its name, full source and SHA1 (what EVALSHA takes)."""

    name: str
    source: str
    sha: str


def read_lua(name: str) -> str:
    """The text of the broker's own ``lua/NAME``."""
    return (resources.files("asyncq._broker") / "lua" / name).read_text(encoding="utf-8")


def resolve_includes(name: str, read: Callable[[str], str] = read_lua) -> str:
    """The source of file ``name`` with every ``-- @include`` line replaced by the included
    file, resolved recursively, depth first. A file already inlined (``name`` itself, or an
    earlier include at any depth) is not inlined again: its line becomes
    ``-- @include FILE: inlined above``. ``read`` gives a file's text by name (tests pass their
    own); a missing file raises FileNotFoundError or KeyError.

    Raises:
        IncludeError: an include cycle (the message names it, ``a.lua -> b.lua -> a.lua``), a
            missing included file, or an included file starting with ``#!``.
    """
    inlined = {name}

    def expand(current: str, path: tuple[str, ...]) -> str:
        def include(match: re.Match[str]) -> str:
            target = match.group(1)
            if target in path:
                cycle = (*path[path.index(target):], target)
                raise IncludeError(f"include cycle: {' -> '.join(cycle)}")
            if target in inlined:
                return f"-- @include {target}: inlined above"
            inlined.add(target)
            return expand(target, (*path, target))

        try:
            text = read(current)
        except (FileNotFoundError, KeyError) as exc:
            if len(path) < 2:
                raise
            raise IncludeError(f"{path[-2]} includes {current}, which does not exist") from exc
        if len(path) > 1 and text.startswith(_SHEBANG):
            raise IncludeError(f"{path[-2]} includes {current}, which starts with a '#!' line: "
                               "only a script's first line may hold one")
        return _INCLUDE.sub(include, text)

    return expand(name, (name,))


@cache
def load_scripts() -> dict[str, Script]:
    """Every script in ``lua/`` (files starting with ``_`` are include-only), keyed by name."""
    scripts: dict[str, Script] = {}
    for entry in (resources.files("asyncq._broker") / "lua").iterdir():
        filename = entry.name
        if not filename.endswith(".lua") or filename.startswith("_"):
            continue
        source = resolve_includes(filename)
        name = filename.removesuffix(".lua")
        sha = hashlib.sha1(source.encode(), usedforsecurity=False).hexdigest()
        scripts[name] = Script(name, source, sha)
    return scripts
