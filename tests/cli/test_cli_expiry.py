"""The CLI and expiry: ``task enqueue --expires-in/--expires-at`` set it (refused with what to
do when it would never run), ``task inspect`` and ``--json`` show it, ``queue inspect`` counts
the tasks archived unrun because they expired."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from asyncq import Client, FakeClock
from asyncq._broker._connection import make_broker
from tests.helpers.cli import Cli, err, js, out

pytestmark = pytest.mark.anyio



async def test_enqueue_sets_the_expiry_and_inspect_shows_it(cli: Cli, asyncq_queue: str) -> None:
    before = datetime.now(UTC)
    doc = js(await cli("task", "enqueue", "-t", "push", "-q", asyncq_queue,
                       "--expires-in", "5m", "--json"))
    expires = datetime.fromisoformat(doc["expires_at"])
    assert before + timedelta(minutes=5) <= expires <= datetime.now(UTC) + timedelta(minutes=5)
    text = out(await cli("task", "inspect", doc["id"], "-q", asyncq_queue))
    assert "expires at:" in text and expires.strftime("%Y-%m-%d %H:%M:%S") in text
    shown = js(await cli("task", "inspect", doc["id"], "-q", asyncq_queue, "--json"))
    assert shown["expires_at"] == doc["expires_at"]
    at = js(await cli("task", "enqueue", "-t", "push", "-q", asyncq_queue,
                      "--expires-at", "2099-01-01T00:00:00Z", "--json"))
    assert at["expires_at"].startswith("2099-01-01T00:00:00")
    plain = js(await cli("task", "enqueue", "-t", "push", "-q", asyncq_queue, "--json"))
    assert plain["expires_at"] is None


@pytest.mark.parametrize(("args", "says"), [
    (["--expires-in", "0"], "expires_in must be more than 0 seconds"),
    (["--expires-at", "2001-01-01T00:00:00Z"], "is not in the future: the task would never "
                                               "run"),
    (["--expires-in", "1m", "--expires-at", "2099-01-01T00:00:00Z"], "not both"),
    (["--expires-in", "1m", "--process-in", "2m"], "before it is due"),
])
async def test_an_expiry_that_would_never_let_it_run_is_refused(
        cli: Cli, asyncq_queue: str, args: list[str], says: str) -> None:
    proc = await cli("task", "enqueue", "-t", "push", "-q", asyncq_queue, *args, ok=False)
    assert says in err(proc)


async def test_queue_inspect_counts_expired_tasks(
    cli: Cli, asyncq_redis_url: str, asyncq_queue: str,
) -> None:
    clock = FakeClock()
    broker = make_broker(asyncq_redis_url, clock=clock)
    try:
        await Client(broker, clock=clock).enqueue("t", queue=asyncq_queue, expires_in=1)
        clock.advance(2)
        await broker.dequeue(asyncq_queue, 1, "owner", 30_000, 1000)
    finally:
        await broker.close()
    assert "expired tasks:   1" in out(await cli("queue", "inspect", asyncq_queue))
    [doc] = js(await cli("queue", "inspect", asyncq_queue, "--json"))
    assert doc["expired_total"] == 1
