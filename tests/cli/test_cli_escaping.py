"""Human CLI output escapes control characters, so a task's type, id, queue, group or error
can neither drive the terminal nor forge output lines; --json stays exact."""

from __future__ import annotations

import orjson
import pytest
from redis.asyncio import Redis

from asyncq import Client
from asyncq._broker import _keys as K
from asyncq._text import printable
from tests.helpers.cli import Cli

pytestmark = pytest.mark.anyio

EVIL = "\x1b]0;pwned\x07\x1b[2J"


def test_printable_escapes_controls_and_keeps_the_rest() -> None:
    assert printable("plain text, ünïcode ✓") == "plain text, ünïcode ✓"
    assert printable(EVIL) == "\\x1b]0;pwned\\x07\\x1b[2J"
    assert printable("line\nforged") == "line\\nforged"
    assert printable("right-to-left \u202eoverride") == "right-to-left \\u202eoverride"


async def test_listings_and_inspect_escape_what_tasks_carry(
    asyncq_client: Client, asyncq_queue: str, cli: Cli, redis_client: Redis,
) -> None:
    async def run(*args: str) -> tuple[str, str]:
        ran = await cli(*args)
        return ran.stdout.decode(), ran.stderr.decode()

    # Written as another producer (or an older version) could have: not through validation.
    info = await asyncq_client.enqueue("t", queue=asyncq_queue, max_retry=0)
    qk = K.queue_keys(asyncq_queue)
    await redis_client.hset(qk.task(info.id), mapping={
        "error": f"boom{EVIL}\n2026-11-23 [info] forged line", "state": "archived"})
    await redis_client.lrem(qk.pending, 0, info.id)
    await redis_client.zadd(qk.archived, {info.id: 1})
    for args in (["task", "ls", "-q", asyncq_queue, "-s", "archived"],
                 ["task", "inspect", "-q", asyncq_queue, info.id]):
        stdout, _ = await run(*args)
        assert "\x1b" not in stdout and "\x07" not in stdout
        assert "forged line" not in stdout.splitlines()[-1] or "\\n" in stdout
        assert not any(line.startswith("2026-11-23 [info]") for line in stdout.splitlines())
    stdout, _ = await run("task", "inspect", "-q", asyncq_queue, info.id, "--json")
    assert EVIL in orjson.loads(stdout)["last_error"]  # --json is exact
