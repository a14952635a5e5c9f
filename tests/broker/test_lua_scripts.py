"""The Lua scripts as files: every script loads (one server, every master of a 3-master
cluster), its includes resolve (nested, once, cycles refused), its header documents what it
takes and returns, and every key name a script builds itself exists in ``_keys.py``'s schema.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Iterator
from pathlib import Path

import pytest
import redis
from redis.asyncio import Redis
from topology.cluster import three_masters

from asyncq._broker import _keys as K
from asyncq._broker import _scripts
from asyncq._broker._scripts import IncludeError, load_scripts, resolve_includes

LUA = Path(_scripts.__file__).parent / "lua"
FILES = {p.name: p.read_text(encoding="utf-8") for p in sorted(LUA.glob("*.lua"))}
SCRIPTS = sorted(name for name in FILES if not name.startswith("_"))
INCLUDE = re.compile(r"^-- @include (\S+)$", re.MULTILINE)
ASYNQ_LUA = LUA.parent / "_asynq" / "lua"
ASYNQ_FILES = {p.name: p.read_text(encoding="utf-8") for p in sorted(ASYNQ_LUA.glob("*.lua"))}
ASYNQ_SCRIPTS = sorted(name for name in ASYNQ_FILES if not name.startswith("_"))
SHARED = "asyncq:"  # an asynq-layout include of the broker's own lua/ (_asynq/_scripts.py)


def code_of(text: str) -> str:
    """The Lua code of a file without its comments (whole-line and trailing ``--``)."""
    lines = []
    for line in text.splitlines():
        if line.lstrip().startswith(("--", "#!")):
            continue
        lines.append(re.sub(r"\s+--\s.*$", "", line))
    return "\n".join(lines)


def header_of(text: str) -> str:
    """The comment block a script opens with (after its ``#!lua`` line, if any)."""
    lines = text.splitlines()
    if lines and lines[0].startswith("#!"):
        lines = lines[1:]
    block = []
    for line in lines:
        if not line.startswith("--"):
            break
        block.append(line)
    return "\n".join(block)


# ---------------------------------------------------------------- loading


def test_every_script_resolves_all_its_includes() -> None:
    scripts = load_scripts()
    assert sorted(f"{name}.lua" for name in scripts) == SCRIPTS
    for script in scripts.values():
        assert not INCLUDE.search(script.source), script.name
        # a helper is defined once per script, however many includes bring it
        defined = re.findall(r"^local function (\w+)", script.source, re.MULTILINE)
        assert len(defined) == len(set(defined)), script.name


@pytest.mark.anyio
async def test_every_script_loads_on_one_server(redis_client: Redis) -> None:
    for script in load_scripts().values():
        sha = await redis_client.script_load(script.source)
        assert sha == script.sha, script.name


@pytest.fixture(scope="module")
def cluster_masters() -> Iterator[list[int]]:
    """The ports of the masters of a fresh 3-master cluster (as tests/deploy starts it)."""
    with three_masters() as cluster:
        yield cluster.master_ports()


def test_every_script_loads_on_every_cluster_master(cluster_masters: list[int]) -> None:
    scripts = list(load_scripts().values())
    assert len(cluster_masters) == 3
    for port in cluster_masters:
        with redis.Redis(port=port, decode_responses=True) as node:
            for script in scripts:
                assert node.script_load(script.source) == script.sha, (port, script.name)
            assert all(node.script_exists(*(s.sha for s in scripts)))


# ---------------------------------------------------------------- include resolution


def resolve(files: dict[str, str], name: str = "main.lua") -> str:
    return resolve_includes(name, files.__getitem__)


def test_includes_resolve_recursively() -> None:
    files = {"main.lua": "-- @include _a.lua\nmain()\n",
             "_a.lua": "-- @include _b.lua\na()\n",
             "_b.lua": "b()\n"}
    assert resolve(files) == "b()\n\na()\n\nmain()\n"


def test_a_file_included_twice_is_inlined_once() -> None:
    files = {"main.lua": "-- @include _a.lua\n-- @include _b.lua\n-- @include _b.lua\nmain()\n",
             "_a.lua": "-- @include _b.lua\na()\n",
             "_b.lua": "b()\n"}
    assert resolve(files) == ("b()\n\na()\n\n-- @include _b.lua: inlined above\n"
                              "-- @include _b.lua: inlined above\nmain()\n")


def test_a_script_including_another_script_gets_its_includes_once() -> None:
    files = {"outer.lua": "-- @include _lib.lua\n-- @include inner.lua\nouter()\n",
             "inner.lua": "-- @include _lib.lua\ninner()\n",
             "_lib.lua": "lib()\n"}
    assert resolve(files, "outer.lua") == (
        "lib()\n\n-- @include _lib.lua: inlined above\ninner()\n\nouter()\n")


@pytest.mark.parametrize(("files", "cycle"), [
    ({"main.lua": "-- @include main.lua\n"}, "main.lua -> main.lua"),
    ({"main.lua": "-- @include _a.lua\n", "_a.lua": "-- @include _a.lua\n"},
     "_a.lua -> _a.lua"),
    ({"main.lua": "-- @include _a.lua\n", "_a.lua": "-- @include _b.lua\n",
      "_b.lua": "-- @include _c.lua\n", "_c.lua": "-- @include _a.lua\n"},
     "_a.lua -> _b.lua -> _c.lua -> _a.lua"),
])
def test_an_include_cycle_is_an_error_naming_it(files: dict[str, str], cycle: str) -> None:
    with pytest.raises(IncludeError, match=f"^include cycle: {re.escape(cycle)}$"):
        resolve(files)


def test_an_include_of_a_missing_file_names_the_includer() -> None:
    with pytest.raises(IncludeError, match=r"^_a\.lua includes _nope\.lua, which does not exist$"):
        resolve({"main.lua": "-- @include _a.lua\n", "_a.lua": "-- @include _nope.lua\n"})


def test_an_included_file_may_not_carry_a_shebang() -> None:
    with pytest.raises(IncludeError, match=r"inner\.lua, which starts with a '#!' line"):
        resolve({"main.lua": "#!lua flags=allow-oom\n-- @include inner.lua\n",
                 "inner.lua": "#!lua flags=allow-oom\ninner()\n"})


def includes_of(name: str) -> set[str]:
    """Every file ``name`` brings in, directly or not."""
    seen: set[str] = set()
    todo = INCLUDE.findall(FILES[name])
    while todo:
        inc = todo.pop()
        if inc not in seen:
            seen.add(inc)
            todo += INCLUDE.findall(FILES[inc])
    return seen


def test_no_file_lists_an_include_that_another_of_its_includes_brings() -> None:
    redundant = []
    for name, text in FILES.items():
        direct = INCLUDE.findall(text)
        for inc in direct:
            if any(inc in includes_of(other) for other in direct if other != inc):
                redundant.append(f"{name}: {inc}")
    assert redundant == []


# ---------------------------------------------------------------- headers


def documented(header: str, what: str) -> tuple[set[int], list[tuple[int, int | None]]]:
    """The ``KEYS``/``ARGV`` positions a header names: single ones, and ranges (``[3..8]``,
    ``[5..]``, ``[6...]``; end None: open)."""
    single = {int(n) for n in re.findall(rf"{what}\[(\d+)\]", header)}
    ranges = [(int(a), int(b) if b else None)
              for a, b in re.findall(rf"{what}\[(\d+)\.\.\.?(\d*)\]", header)]
    return single, ranges


def own_code(files: dict[str, str], name: str) -> str:
    """The code a script runs as its own: its file's, and that of the transition body and
    layout hooks it includes (``_*_body.lua``, ``_*_hooks.lua``), which read its KEYS and
    ARGV by number; not the shared helpers, which take what they use as arguments."""
    code = [code_of(files[name])]
    for inc in INCLUDE.findall(files[name]):
        shared = inc.startswith(SHARED)
        inc = inc.removeprefix(SHARED)
        if inc.endswith(("_body.lua", "_hooks.lua")):
            code.append(code_of(FILES[inc] if shared or files is FILES else files[inc]))
    return "\n".join(code)


@pytest.mark.parametrize(("files", "name"), [(FILES, n) for n in SCRIPTS]
                         + [(ASYNQ_FILES, n) for n in ASYNQ_SCRIPTS])
def test_every_script_has_its_header(files: dict[str, str], name: str) -> None:
    """``-- <name>: what it does``, then every KEYS and ARGV position its own code (with its
    transition's body and its layout's hooks) reads by number, then what it returns: in both
    layouts, whose scripts share bodies."""
    text = files[name]
    header = header_of(text)
    assert header.startswith(f"-- {name.removesuffix('.lua')}: "), name
    assert "Returns" in header, name
    code = own_code(files, name)
    for what in ("KEYS", "ARGV"):
        used = {int(n) for n in re.findall(rf"{what}\[(\d+)\]", code)}
        single, ranges = documented(header, what)
        if used or re.search(rf"{what}\[", code):
            assert f"{what}[" in header, f"{name}: {what} used but not documented"
        for n in used:
            assert n in single or any(a <= n and (b is None or n <= b) for a, b in ranges), (
                f"{name}: {what}[{n}] is not documented in its header")


# ---------------------------------------------------------------- key names: Lua and _keys.py


def head(name: str) -> str:
    """The first segment of a key name below a queue's base: ``t:<id>`` -> ``t:``."""
    first, sep, _ = name.partition(":")
    return first + sep


def queue_schema() -> set[str]:
    """Every name below ``asyncq:{q}:`` that _keys.py defines, by its first segment."""
    q = K.queue_keys("q")
    names = {getattr(q, f.name) for f in dataclasses.fields(q)}
    names |= {q.task("x"), q.cancel("x"), q.group("x"), q.aggregation_set("x", "y"),
              q.dequeued("x"), q.handoff("x"), q.handoff_channel("x"), q.processed_day("x"),
              q.failed_day("x"), q.unique("x", None), K.scheduler_ticks_key("q"),
              K.limits_registry("q"), K.limit_keyset(K.limit_base("q", "c", "x"))}
    return {head(n.removeprefix(q.base)) for n in names if n.startswith(q.base) and n != q.base}


def limit_state_schema() -> set[str]:
    """The suffixes of one limit key's state (``<p>held``...), as K.limit_state documents them."""
    doc = K.limit_state.__doc__ or ""
    return set(re.findall(r"``<that>(\w+)``", doc))


def built_suffixes() -> dict[str, set[str]]:
    """Per file, the key suffixes its code appends to a key base itself: every ``.. 'name'``
    (a literal made of letters and '_', maybe ending in ':') and the suffix argument of
    asyncq_base / asyncq_events (``asyncq_base(key, 'pending')``)."""
    out = {}
    for name, text in FILES.items():
        code = code_of(text)
        found = set(re.findall(r"\.\.\s*'([a-z_]+:?)'", code))
        found |= set(re.findall(r"\basyncq_(?:base|events)\([^,()]+,\s*'([a-z_]+:?)'", code))
        out[name] = found
    return out


def test_every_key_suffix_a_script_builds_is_in_the_schema() -> None:
    known = queue_schema() | limit_state_schema()
    unknown = {f"{name}: {s!r}" for name, found in built_suffixes().items() for s in found
               if s not in known}
    assert unknown == set()
    # the check sees what it is meant to: the scripts do build these
    every = set().union(*built_suffixes().values())
    assert {"t:", "pending", "listening", "events", "idle", "handoff:", "to:", "wfout",
            "held", "tat"} <= every


NAMED = re.compile(r"asyncq:(?:[^\s,)'<]|<[^>]*>)*")


def test_every_key_a_script_names_is_in_the_schema() -> None:
    """The key names in the headers and comments (``asyncq:{q}:pending``...)."""
    q = K.queue_keys("q")
    schema = queue_schema()
    wf = K.workflow_keys("<id>")
    wf_base = wf.record.removesuffix("t:<id>")
    others = {K.QUEUES, K.queue_keys("queue").base, K.server_key("<server id>"),
              K.workers_key("<server id>"), K.scheduler_entries_key("<scheduler id>"),
              K.scheduler_history_key("<entry id>")}
    wrong = set()
    for name, text in FILES.items():
        for key in NAMED.findall(text):
            if key == q.base + "...":  # any key of the queue
                ok = True
            elif key.startswith(q.base):
                ok = head(key.removeprefix(q.base)) in schema
            elif key.startswith(wf_base):
                ok = key in wf.all()
            else:
                ok = key in others
            if not ok:
                wrong.add(f"{name}: {key}")
    assert wrong == set()


def test_every_queue_key_of_the_schema_is_named_by_the_scripts() -> None:
    """And the other way: the schema has no queue key the scripts neither name (in a header:
    what Python passes) nor build."""
    q = K.queue_keys("q")
    named = {head(k.removeprefix(q.base)) for text in FILES.values()
             for k in NAMED.findall(text) if k.startswith(q.base)}
    named |= set().union(*built_suffixes().values())
    assert queue_schema() - named == set()


# ---------------------------------------------------------------- one rule for big results


def test_the_result_too_large_rule_lives_in_lib_only() -> None:
    """A completion event leaves out a result over the limit: asyncq_result_too_big and
    asyncq_completed_event in _lib.lua decide and shape it; no other file does it its own way."""
    elsewhere = [name for name, text in FILES.items()
                 if name != "_lib.lua" and re.search(r"\bbig\s*=|#\S+\s*>\s*tonumber",
                                                     code_of(text))]
    assert elsewhere == []
    for name in ("_done_lib.lua", "mark_complete.lua", "workflow_finish.lua"):
        assert "asyncq_completed_event(" in code_of(FILES[name]), name


def test_the_asynq_layouts_scripts_share_the_brokers_key_free_helpers() -> None:
    """``-- @include asyncq:NAME.lua`` in an asynq-layout script inlines the broker's own
    ``lua/NAME.lua`` (one copy of the limit helpers for both layouts); every asynq script
    resolves all its includes and defines each helper once."""
    from asyncq._broker._asynq._scripts import asynq_scripts

    shared = (LUA / "_limit_lib.lua").read_text(encoding="utf-8")
    scripts = asynq_scripts()
    for name in ("asynq_limit_acquire", "asynq_limit_release", "asynq_limit_set"):
        assert shared in scripts[name].source, name
    for name in ("limit_acquire", "limit_release", "limit_set"):
        assert shared in load_scripts()[name].source, name
    for script in scripts.values():
        assert not INCLUDE.search(script.source), script.name
        defined = re.findall(r"^local function (\w+)", script.source, re.MULTILINE)
        assert len(defined) == len(set(defined)), script.name
    # the helpers name no key and read no clock: what makes them layout-free
    assert not re.search(r"asyncq:\{|asynq:\{|'TIME'|_now", shared)


# ---------------------------------------------------------------- one body per transition


def body_includes(files: dict[str, str], name: str) -> list[str]:
    """The transition bodies script ``name`` includes, by their file name in lua/."""
    return [inc.removeprefix(SHARED) for inc in INCLUDE.findall(files[name])
            if inc.removeprefix(SHARED).endswith("_body.lua")]


def test_each_transition_body_serves_one_script_of_each_layout() -> None:
    """A ``lua/_*_body.lua`` is the one body of a transition: one script of asyncq's layout and
    one of Go asynq's include it, each after its layout's hooks; a body includes nothing (what
    it calls comes from the including script, so it resolves the same in either layout)."""
    bodies = sorted(name for name in FILES if name.endswith("_body.lua"))
    assert len(bodies) >= 12
    mine = {body: [n for n in SCRIPTS if body in body_includes(FILES, n)] for body in bodies}
    theirs = {body: [n for n in ASYNQ_SCRIPTS if body in body_includes(ASYNQ_FILES, n)]
              for body in bodies}
    for body in bodies:
        assert not INCLUDE.search(FILES[body]), body
        assert len(mine[body]) == 1 and len(theirs[body]) == 1, (body, mine[body], theirs[body])
        # the same transition: asynq_[inspect_]<name>.lua beside [inspect_]<name>.lua
        assert (theirs[body][0].removeprefix("asynq_").removeprefix("inspect_")
                == mine[body][0].removeprefix("inspect_")), (body, mine[body], theirs[body])


def test_the_limit_scripts_differ_by_their_layouts_hooks_only() -> None:
    """The four limit scripts of both layouts run one body each; what differs (lease units,
    ownership, where a deferred task goes, events, wake-up) is a hook each layout defines
    under the same name."""
    hooks = {"limit_lease_end", "limit_server_ms", "limit_claimable", "limit_pace_least",
             "limit_pace_due", "limit_defer_at", "limit_drop_lease", "limit_deferred",
             "limit_events", "limit_wake"}
    ours = set(re.findall(r"^local function (\w+)", FILES["_limit_hooks.lua"]
                          + FILES["_limit_wake_hooks.lua"], re.MULTILINE))
    go = set(re.findall(r"^local function (\w+)", ASYNQ_FILES["_asynq_limit_hooks.lua"],
                        re.MULTILINE))
    assert ours == go == hooks
    for name in ("limit_acquire", "limit_release", "limit_set", "limit_usage"):
        assert body_includes(FILES, f"{name}.lua") == [f"_{name}_body.lua"]
        assert body_includes(ASYNQ_FILES, f"asynq_{name}.lua") == [f"_{name}_body.lua"]


def test_what_go_asynqs_layout_takes_from_the_brokers_lua_is_layout_free() -> None:
    """Every file an asynq-layout script includes from the broker's own lua/ (``asyncq:NAME``:
    helpers and transition bodies) names no key of either layout and reads no clock: each
    layout passes its keys and times, or gives them through its hooks."""
    shared = {inc.removeprefix(SHARED) for text in ASYNQ_FILES.values()
              for inc in INCLUDE.findall(text) if inc.startswith(SHARED)}
    assert {"_limit_lib.lua", "_limit_acquire_body.lua", "_inspect_shared_lib.lua",
            "_event_lib.lua", "_handoff_lib.lua", "_active_lib.lua"} <= shared
    for name in sorted(shared):
        assert not re.search(r"asyncq:\{|asynq:\{|'TIME'|_now_ms\(", code_of(FILES[name])), name
