"""The wire=asynq scripts of ``lua/`` beside this file, loaded like the broker's own (includes
resolved by ``_scripts.resolve_includes``, named by file, run by SHA1). An include named
``asyncq:NAME.lua`` is the broker's own ``lua/NAME.lua``: what builds no key name and reads no
clock serves both layouts from one file. That is helpers (``_limit_lib.lua``,
``_inspect_shared_lib.lua``, ``_event_lib.lua``, ``_handoff_lib.lua``) and the body of a
transition both layouts run (``_limit_acquire_body.lua``...): a script here is its header, its
layout's hooks (``_asynq_limit_hooks.lua``: lease units, ownership, where a deferred task
goes, events, wake-up) and that body. A shared file includes nothing itself: its includes
would resolve in this directory."""

from __future__ import annotations

import hashlib
from functools import cache
from importlib import resources

from .._scripts import Script, read_lua, resolve_includes

PACKAGE = "asyncq._broker._asynq"
SHARED = "asyncq:"  # an include from the broker's own lua/


def _read(name: str) -> str:
    if name.startswith(SHARED):
        return read_lua(name.removeprefix(SHARED))
    return (resources.files(PACKAGE) / "lua" / name).read_text(encoding="utf-8")


@cache
def asynq_scripts() -> dict[str, Script]:
    """Every script of this package's ``lua/`` (``_*.lua`` are include-only), by name; every
    name starts with ``asynq_``, so they sit beside the broker's own in one ScriptRunner."""
    scripts: dict[str, Script] = {}
    for entry in (resources.files(PACKAGE) / "lua").iterdir():
        filename = entry.name
        if not filename.endswith(".lua") or filename.startswith("_"):
            continue
        source = resolve_includes(filename, _read)
        name = filename.removesuffix(".lua")
        sha = hashlib.sha1(source.encode(), usedforsecurity=False).hexdigest()
        scripts[name] = Script(name, source, sha)
    return scripts
