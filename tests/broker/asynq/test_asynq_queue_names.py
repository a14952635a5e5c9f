"""Every queue name Go asynq accepts (issue 40, item 2): in Go's layout asyncq enqueues into,
serves (``asyncq worker -q``), inspects and operates queues named with braces, spaces or a
``*`` (served literally as ``\\*``), under Go's own keys; asyncq's own layout keeps refusing
such names, saying why, before it writes anything."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest
from redis.asyncio import Redis

from asyncq import Client, Inspector
from asyncq._broker._asynq import _keys as K
from asyncq._testing.redis_server import RedisServer
from asyncq.web import create_app
from tests.helpers.cli import Cli
from tests.web.web_helpers import web_http

pytestmark = pytest.mark.anyio

ODD = ["we{ird} x", "star*q", "}lead", "a=b"]


@pytest.fixture
async def own(own_server: RedisServer) -> AsyncIterator[tuple[str, Redis]]:
    """A Redis of this test only (its URL, a client): the tests read global keys."""
    redis = Redis.from_url(own_server.url)
    try:
        yield own_server.url, redis
    finally:
        await redis.aclose()


async def test_go_layout_serves_inspects_and_operates_every_name_go_accepts(
        own: tuple[str, Redis], cli: Cli) -> None:
    asyncq_redis_url, redis_client = own
    url = asyncq_redis_url + "?wire=asynq"
    async with Client(url) as client:
        infos = {q: await client.enqueue("pids:nap", {"s": 0}, queue=q, retention=600)
                 for q in ODD}
        paused = await client.enqueue("pids:nap", {"s": 0}, queue="has space", retention=600)
    for q, info in infos.items():  # Go's own keys: asynq:{<name>}:...
        assert await redis_client.lrange(f"asynq:{{{q}}}:pending", 0, -1) == [info.id.encode()]
    assert {m.decode() for m in await redis_client.smembers(K.QUEUES)} == {*ODD, "has space"}
    async with Inspector(url) as inspector:
        assert set(await inspector.queues()) == {*ODD, "has space"}
        assert (await inspector.queue_info("we{ird} x")).pending == 1
        await inspector.pause("has space")
    # The literal form of a '*' is '\*'; a name holding '=' takes its weight after the last '='.
    ran = await cli("worker", "tests.apps.pids:mux", "--redis-url", url, "--burst",
                    "-q", "we{ird} x=1", "-q", "star\\*q=2", "-q", "}lead", "-q", "a=b=1",
                    "-q", "has space=1")
    assert ran.returncode == 0
    async with Client(url) as client:
        for q, info in infos.items():
            assert "pid" in await client.result(info, queue=q, timeout=30)
    async with Inspector(url) as inspector:
        assert (await inspector.task_info("has space", paused.id)).state.value == "pending"
        await inspector.unpause("has space")
        assert (await inspector.queue_info("we{ird} x")).completed == 1
    # The CLI's queue commands take the names as they are.
    listed = (await cli("queue", "ls", "--redis-url", url)).stdout.decode()
    assert "we{ird} x" in listed and "star*q" in listed
    await cli("queue", "pause", "star*q", "--redis-url", url)
    assert await redis_client.exists("asynq:{star*q}:paused") == 1
    # The dashboard links them with their names URL-encoded, and shows them HTML-escaped.
    async with web_http(create_app(url)) as http:
        overview = (await http.get("/")).text
        assert "/queue?q=we%7Bird%7D+x" in overview or "we%7Bird%7D" in overview
        page = await http.get("/queue", params={"q": "we{ird} x", "state": "completed"})
        assert page.status_code == 200 and infos["we{ird} x"].id in page.text


@pytest.mark.parametrize("name", ["we{ird}", "has space", "star*q"])
async def test_asyncqs_own_layout_refuses_them_before_writing(
        own: tuple[str, Redis], cli: Cli, name: str) -> None:
    asyncq_redis_url, redis_client = own
    before = await redis_client.dbsize()
    async with Client(asyncq_redis_url) as client:
        with pytest.raises(ValueError, match=r"in asyncq's own layout.*wire=asynq"):
            await client.enqueue("pids:nap", queue=name)
    spec = name.replace("*", "\\*")
    ran = await cli("worker", "tests.apps.pids:mux", "--redis-url", asyncq_redis_url,
                    "--burst", "-q", f"{spec}=1", ok=False)
    assert ran.returncode != 0
    assert "in asyncq's own layout" in ran.stderr.decode()
    assert await redis_client.dbsize() == before


@pytest.mark.parametrize("producer_wire", ["asyncq", "asynq"])
async def test_a_worker_on_a_queue_of_the_other_layout_refuses_at_start_writing_nothing(
        own: tuple[str, Redis], cli: Cli, asyncq_queue: str, producer_wire: str) -> None:
    """(issue 40, item 6) ``--burst`` included: exit non-zero, the task still pending, and
    not one key written or changed."""
    asyncq_redis_url, redis_client = own
    other = "asynq" if producer_wire == "asyncq" else "asyncq"
    async with Client(f"{asyncq_redis_url}?wire={producer_wire}") as client:
        info = await client.enqueue("pids:nap", {"s": 0}, queue=asyncq_queue)
    async def snapshot() -> dict[bytes, bytes | None]:
        """Every key and its value (keys with a TTL, such as an idle flag, by name only: they
        may expire meanwhile)."""
        return {k: None if await redis_client.pttl(k) > 0 else await redis_client.dump(k)
                for k in await redis_client.keys("*")}

    before = await snapshot()
    for burst in (["--burst"], []):
        ran = await cli("worker", "tests.apps.pids:mux", "--redis-url",
                        f"{asyncq_redis_url}?wire={other}", "-q", f"{asyncq_queue}=1",
                        "--health-port", "0", *burst, ok=None)
        assert ran.returncode == 1, ran.stderr.decode()[-2000:]
        err = ran.stderr.decode()
        assert "asyncq: error: " in err and "nothing was written" in err, err[-2000:]
        assert "Traceback" not in err and "worker ready" not in err, err[-2000:]
    after = await snapshot()
    assert set(after) <= set(before)
    assert {k: v for k, v in after.items() if v is not None} == {
        k: v for k, v in before.items() if v is not None and k in after}
    async with Inspector(f"{asyncq_redis_url}?wire={producer_wire}") as inspector:
        assert (await inspector.task_info(asyncq_queue, info.id)).state.value == "pending"


async def test_on_cluster_a_name_hashes_up_to_its_first_closing_brace(cluster_url: str) -> None:
    """As Go's keys do: ``we{ird}`` is served by its tag ``we{ird``; a name starting with
    ``}`` leaves an empty tag, so its keys spread over slots and no script can run (Go's
    neither)."""
    async with Client(cluster_url + "?wire=asynq") as client:
        info = await client.enqueue("t", b"x", queue="we{ird} x")
        broker: Any = client.broker
        tasks, _ = await broker.dequeue("we{ird} x", 5, "own", 30_000, 1000)
        assert [t.id for t in tasks] == [info.id]
        with pytest.raises(ValueError, match=r"empty hash tag.*nothing was written"):
            await client.enqueue("t", b"x", queue="}lead")
