"""The pytest plugin's Redis fixtures and the RedisServer helper."""

from __future__ import annotations

import shutil

import pytest
import redis
import redis.asyncio

from asyncq._testing.redis_server import REDIS_NOT_FOUND, RedisServer

_queues: list[str] = []


@pytest.mark.anyio
async def test_server_answers_ping(
    redis_client: redis.asyncio.Redis, asyncq_redis_url: str
) -> None:
    assert asyncq_redis_url.startswith("redis://")
    assert await redis_client.ping() is True
    await redis_client.set(b"asyncq:test:ping", b"\x00\xffbytes", ex=10)
    assert await redis_client.get(b"asyncq:test:ping") == b"\x00\xffbytes"


@pytest.mark.parametrize("round_", [1, 2])
def test_queue_names_are_unique(asyncq_queue: str, round_: int) -> None:
    assert asyncq_queue.startswith("t-")
    assert len(asyncq_queue) == 14
    # (both rounds run in one process unless pytest-xdist splits them: then each checks alone)
    assert asyncq_queue not in _queues
    _queues.append(asyncq_queue)


@pytest.mark.skipif(shutil.which("redis-server") is None, reason=REDIS_NOT_FOUND)
def test_restart_keeps_port_and_dir() -> None:
    with RedisServer(["--appendonly", "yes", "--appendfsync", "always"]) as server:
        port, directory, url = server.port, server.dir, server.url
        assert port != 6379
        assert url == f"redis://127.0.0.1:{port}/0"
        first_pid = server.pid
        client = redis.Redis.from_url(url)
        try:
            client.set("asyncq:test:restart", "kept")
            server.kill()
            assert not server.running
            server.restart()
            assert server.running
            assert server.pid != first_pid
            assert (server.port, server.dir, server.url) == (port, directory, url)
            # AOF lives in the same --dir, so the data survived the crash.
            assert client.get("asyncq:test:restart") == b"kept"
        finally:
            client.close()
    assert not server.running
    assert not directory.exists()
