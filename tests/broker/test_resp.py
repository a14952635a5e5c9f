"""The hand-packed RESP of ``asyncq._broker._resp`` is byte for byte what redis-py sends.

``pack`` replaces redis-py's own command packing on the hot pipelines (enqueue_many, the
acker); these properties pin it to ``Connection.pack_commands`` of the installed redis-py, so
an upgrade that changes the wire format fails here, not in production.
"""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st
from redis.asyncio.connection import Connection
from redis.exceptions import DataError

from asyncq._broker._resp import pack

COMMANDS = st.sampled_from(["EVALSHA", "SCRIPT", "PING", "HMGET"])
ARGS = st.one_of(
    st.text(), st.binary(), st.integers(), st.floats(allow_nan=True, allow_infinity=True),
    st.integers(min_value=-(2**70), max_value=2**70),
)


def redis_py_bytes(*args: Any) -> bytes:
    return b"".join(Connection().pack_commands([args]))


def outcome(fn: Any, *args: Any) -> tuple[str, Any]:
    """What ``fn(*args)`` gives: ("ok", bytes) or ("error", exception type)."""
    try:
        return "ok", fn(*args)
    except Exception as exc:
        return "error", type(exc)


@given(COMMANDS, st.lists(ARGS, max_size=12))
def test_pack_is_redis_py_pack_commands(command: str, args: list[Any]) -> None:
    packed = outcome(pack, (command, *args))
    assert packed == outcome(redis_py_bytes, command, *args)


@given(st.lists(st.lists(ARGS, max_size=6), min_size=1, max_size=5))
def test_packed_commands_join_as_redis_py_pipelines_them(commands: list[list[Any]]) -> None:
    try:
        ours = b"".join(pack(("EVALSHA", *c)) for c in commands)
    except UnicodeEncodeError:  # a lone surrogate: redis-py refuses it too (checked above)
        return
    theirs = b"".join(Connection().pack_commands([("EVALSHA", *c) for c in commands]))
    assert ours == theirs


@pytest.mark.parametrize("bad", [None, True, False, {"a": 1}, [1], (1,), object()])
def test_pack_refuses_what_redis_py_refuses(bad: object) -> None:
    with pytest.raises(DataError, match="Invalid input of type") as ours:
        pack(("EVALSHA", "sha", 0, bad))
    with pytest.raises(DataError) as theirs:
        redis_py_bytes("EVALSHA", "sha", 0, bad)
    assert str(ours.value) == str(theirs.value)
