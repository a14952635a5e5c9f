"""Changing limits from the command line while a worker runs: ``asyncq queue concurrency`` (a
queue's concurrency limit, shown by ``queue inspect`` too) and ``asyncq limit set|clear`` (an
operator's value over a declared limit, shown by ``limit ls``), as text and ``--json``."""

from __future__ import annotations

import asyncio

import pytest

import asyncq
from asyncq.testing import WorkerFactory, wait_until
from tests.helpers.cli import Cli, err, js, out

pytestmark = pytest.mark.anyio



class Held:
    """A handler that holds every task until ``go`` is set, counting those running."""

    def __init__(self) -> None:
        self.now = 0
        self.most = 0
        self.go = asyncio.Event()

    async def __call__(self, task: asyncq.Task) -> None:
        self.now += 1
        self.most = max(self.most, self.now)
        try:
            await self.go.wait()
        finally:
            self.now -= 1


async def test_queue_concurrency_limits_a_running_worker_and_shows_in_inspect(
    cli: Cli, asyncq_client: asyncq.Client, asyncq_worker: WorkerFactory, asyncq_queue: str,
) -> None:
    q = asyncq_queue
    held = Held()
    assert out(await cli("queue", "concurrency", q)).strip() == f"queue {q}: concurrency limit none"
    assert out(await cli("queue", "concurrency", q, "--limit", "1")).strip() == (
        f"queue {q}: concurrency limit at most 1 at once (0 running, 0 waiting) (was none)")
    async with asyncq_worker(held, queues={q: 1}, concurrency=10) as w:
        await asyncq_client.enqueue_many(asyncq.Task("t", queue=q) for _ in range(4))

        async def waiting(n: int) -> bool:
            doc = js(await cli("queue", "concurrency", q, "--json"))
            return doc == [{"queue": q, "concurrency_limit": 1, "concurrency_in_use": 1,
                            "concurrency_waiting": n, "previous_limit": 1, "started": 0}]

        await wait_until(lambda: waiting(3), timeout=10, message="1 running, 3 waiting")
        assert held.now == 1
        (info,) = js(await cli("queue", "inspect", q, "--json"))
        assert (info["concurrency_limit"], info["concurrency_in_use"],
                info["concurrency_waiting"]) == (1, 1, 3)
        (line,) = [x for x in out(await cli("queue", "inspect", q)).splitlines()
                   if x.startswith("concurrency:")]
        assert line.split(None, 1)[1] == "at most 1 at once (1 running, 3 waiting)"

        raised = out(await cli("queue", "concurrency", q, "--limit", "3")).splitlines()
        assert raised[0].endswith("(was at most 1 at once)")
        assert raised[1].strip() == "2 waiting task(s) started"
        await wait_until(lambda: held.now == 3, timeout=10, message="3 running")
        (doc,) = js(await cli("queue", "concurrency", q, "--clear", "--json"))
        assert (doc["concurrency_limit"], doc["previous_limit"], doc["started"]) == (None, 3, 1)
        await wait_until(lambda: held.now == 4, timeout=10, message="all 4 running")
        held.go.set()
        await w.wait_drained(include_scheduled=True, timeout=10)
    assert held.most == 4
    (info,) = js(await cli("queue", "inspect", q, "--json"))
    assert (info["concurrency_limit"], info["concurrency_in_use"]) == (None, 0)
    assert "concurrency:" in out(await cli("queue", "inspect", q))


async def test_limit_set_and_clear_override_a_declared_limit(
    cli: Cli, asyncq_client: asyncq.Client, asyncq_worker: WorkerFactory, asyncq_queue: str,
) -> None:
    q = asyncq_queue
    held = Held()
    mux = asyncq.ServeMux()
    mux.handle("api", held, limits=[asyncq.ConcurrencyLimit(1)])
    async with asyncq_worker(mux, queues={q: 1}, concurrency=10) as w:
        await asyncq_client.enqueue_many(asyncq.Task("api", queue=q) for _ in range(3))
        await wait_until(lambda: held.now == 1, timeout=10, message="1 running (declared)")
        said = out(await cli("limit", "set", "api", "--concurrency", "3", "-q", q)).splitlines()
        assert said == [f"concurrency limit 'api' of queue {q}: 3, set by operator (code: 1)",
                        "  2 waiting task(s) started"]
        await wait_until(lambda: held.now == 3, timeout=10, message="3 running (operator)")
        table = out(await cli("limit", "ls", "-q", q))
        assert "SET BY" in table and "operator (code: 1)" in table
        (use,) = js(await cli("limit", "ls", "-q", q, "--json"))
        assert (use["limit"], use["runtime"], use["declared"], use["in_use"]) == (3, True, 1, 3)
        doc = js(await cli("limit", "clear", "api", "--kind", "concurrency", "-q", q, "--json"))
        assert doc == {"queue": q, "kind": "concurrency", "name": "api", "limit": 1,
                       "period_ms": 0, "runtime": False, "started": 0}
        held.go.set()
        await w.wait_drained(include_scheduled=True, timeout=10)
    assert held.most == 3


async def test_limit_values_are_checked(cli: Cli, asyncq_queue: str) -> None:
    q = asyncq_queue
    assert "--limit: a queue's concurrency limit must be between 1 and" in err(
        await cli("queue", "concurrency", q, "--limit", "0", ok=False))
    both = await cli("queue", "concurrency", q, "--limit", "2", "--clear", ok=None)
    assert both.returncode == 2 and "not allowed with argument" in err(both)
    assert "burst (10) must be at most its count (5)" in err(
        await cli("limit", "set", "x", "--rate", "5/s", "--burst", "10", "-q", q, ok=False))
    assert "--concurrency N or --rate RATE" in err(
        await cli("limit", "set", "x", "-q", q, ok=False))
    assert "--burst goes with --rate" in err(
        await cli("limit", "set", "x", "--concurrency", "5", "--burst", "2", "-q", q, ok=False))
    said = out(await cli("limit", "set", "stripe", "--rate", "50/s", "-q", q)).splitlines()
    assert said[0] == f"rate limit 'stripe' of queue {q}: 50/1s, set by operator"
    assert "applies once one does" in said[1]
    assert out(await cli("limit", "clear", "stripe", "--kind", "rate", "-q", q)).strip() == (
        f"rate limit 'stripe' of queue {q}: no value set at run time, and no handler "
        f"declared it yet")
