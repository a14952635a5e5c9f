"""The wire=asynq Lua scripts as files, checked as asyncq's own are (tests/broker/
test_lua_scripts.py): each opens with its header naming every KEYS/ARGV position its code reads
and what it returns; the asyncq-only keys they name are those ``_asynq/_keys.py`` builds; the
scheduler's claim prologue runs before each store script, unchanged."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from asyncq._broker._asynq import _keys as K
from asyncq._broker._asynq import _scripts
from tests.broker.test_lua_scripts import code_of, documented, header_of

LUA = Path(_scripts.__file__).parent / "lua"
FILES = {p.name: p.read_text(encoding="utf-8") for p in sorted(LUA.glob("*.lua"))}
SCRIPTS = sorted(name for name in FILES if not name.startswith("_"))


@pytest.mark.parametrize("name", SCRIPTS)
def test_every_script_has_its_header(name: str) -> None:
    text = FILES[name]
    header = header_of(text)
    assert header.startswith(f"-- {name.removesuffix('.lua')}: "), name
    assert "Returns" in header, name
    code = code_of(text)
    for what in ("KEYS", "ARGV"):
        used = {int(n) for n in re.findall(rf"{what}\[(\d+)\]", code)}
        single, ranges = documented(header, what)
        for n in used:
            assert n in single or any(a <= n and (b is None or n <= b) for a, b in ranges), (
                f"{name}: {what}[{n}] is not documented in its header")


def test_the_asyncq_only_keys_named_are_the_key_modules() -> None:
    base = K.asyncq_base("q")
    keyset = K.limit_keyset(K.limit_base("q", "c", "x"))
    assert keyset == f"{base}limit:c:1:x:keys"  # what the headers write as limit:...:keys
    extra = K.extra_keys("q")
    schema = {K.scheduler_ticks_key("q"), K.limits_registry("q"), base + "...",
              f"{base}limit:...:keys", extra.listening, extra.events, extra.waiters,
              extra.idle, extra.marks, extra.handoff("<owner>"), extra.handoff_channel("<owner>"),
              K.queue_keys("q").minutes}
    named = {key for text in FILES.values()
             for key in re.findall(r"asynq:\{q\}:asyncq:[^\s,)']*", text)}
    assert len(named) >= 3
    assert named <= schema


@pytest.mark.parametrize("store", ["enqueue", "schedule", "add_to_group"])
def test_each_firing_is_the_claim_then_the_store_script(store: str) -> None:
    scripts = _scripts.asynq_scripts()
    fire = scripts[f"asynq_sched_{store}"].source
    claim = (LUA.parents[1] / "lua" / "_scheduler_claim.lua").read_text(encoding="utf-8")
    assert claim in fire
    body = [line for line in FILES[f"asynq_{store}.lua"].splitlines()
            if line.strip() and not line.lstrip().startswith("--")]  # code, includes resolved
    assert fire.index(claim) < fire.index(body[0])
