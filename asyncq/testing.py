"""pytest plugin for testing asyncq applications (and asyncq itself).

It is registered automatically through the ``pytest11`` entry point once asyncq
is installed; nothing needs to be added to ``conftest.py``.

Fixtures
--------

``anyio_backend`` (session)
    ``"asyncio"``.  anyio's own default is module-scoped and parametrized over
    every installed backend; asyncq only runs on asyncio, and a session scope
    lets session-scoped async fixtures share one event loop.  Mark async tests
    with ``@pytest.mark.anyio`` (or set ``anyio_mode = "auto"``).  A project
    that defines its own ``anyio_backend`` (in a conftest or a test module)
    overrides this one.

``asyncq_redis_url`` (session)
    URL of the Redis server to test against: ``$ASYNCQ_TEST_REDIS_URL`` if set,
    otherwise that of a throwaway ``redis-server`` started for the session (see
    ``asyncq_redis_server``).  Tests share the server, so they should keep
    their keys apart, e.g. with ``asyncq_queue``.

``asyncq_redis_server`` (session)
    The :class:`~asyncq._testing.redis_server.RedisServer` behind
    ``asyncq_redis_url``, for tests that stop, kill or restart it.  Such tests
    are skipped when ``ASYNCQ_TEST_REDIS_URL`` is set, as that server is not
    ours to control.

``asyncq_queue`` (function)
    A queue name unique to the test, like ``"t-1a2b3c4d5e6f"``.

``redis_client`` (function, async)
    A ``redis.asyncio.Redis`` connected to ``asyncq_redis_url`` (bytes
    replies), closed after the test.

``asyncq_client`` (function, async)
    An ``asyncq.Client`` on ``asyncq_redis_url``.

``asyncq_worker`` (function)
    A factory running an in-process worker::

        async with asyncq_worker(mux, queues={queue: 1}, concurrency=5) as w:
            await client.enqueue("email:send", {...}, queue=queue)
            await w.wait_drained()

    ``asyncq_worker.build(mux, **config)`` makes a Worker that is not started (the test
    drives it: ``run()``, its components), closed after the test.

Helpers: ``wait_until(predicate, timeout=...)`` polls a sync or async predicate with a
deadline; ``queue_counts(redis, queue)`` returns the size of each state of a queue.
"""

from __future__ import annotations

import os
import types
import uuid
from collections.abc import AsyncIterator, Iterator

import pytest
import redis.asyncio

from asyncq._testing.harness import (
    RunningWorker,
    WorkerFactory,
    queue_counts,
    wait_drained,
    wait_until,
)
from asyncq._testing.redis_server import RedisServer

from ._broker._redis_url import redact
from ._client._client import Client
from ._inspector._inspector import Inspector

__all__ = [
    "REDIS_URL_ENV",
    "RunningWorker",
    "WorkerFactory",
    "asyncq_client",
    "asyncq_fresh_redis",
    "asyncq_inspector",
    "asyncq_queue",
    "asyncq_redis_server",
    "asyncq_redis_url",
    "asyncq_worker",
    "queue_counts",
    "redis_client",
    "wait_drained",
    "wait_until",
]

_OUR_ASYNC_FIXTURES = frozenset({"asyncq_client", "asyncq_worker", "asyncq_inspector",
                                 "asyncq_fresh_redis", "redis_client"})


def pytest_runtest_setup(item: pytest.Item) -> None:
    """A test marked for pytest-asyncio (explicitly, or by its auto mode) that uses asyncq's
    async fixtures fails at once with what to do: those fixtures run on anyio, and mixing the
    two runs fixture and test on different event loops ("Event loop is closed")."""
    used = _OUR_ASYNC_FIXTURES & set(getattr(item, "fixturenames", ()))
    if (used and item.get_closest_marker("asyncio") is not None
            and item.get_closest_marker("anyio") is None):
        pytest.fail(f"asyncq's fixtures ({', '.join(sorted(used))}) run on anyio: mark the "
                    "test @pytest.mark.anyio (or set pytestmark = pytest.mark.anyio) instead "
                    "of @pytest.mark.asyncio", pytrace=False)


#: Environment variable naming an existing Redis server to test against.
REDIS_URL_ENV = "ASYNCQ_TEST_REDIS_URL"
#: Set to 1 to let ``asyncq_fresh_redis`` empty the server ``REDIS_URL_ENV`` names.
ALLOW_FLUSH_ENV = "ASYNCQ_TEST_ALLOW_FLUSH"


# ---------------------------------------------------------------- anyio


_ANYIO_BACKEND_PLUGIN = "asyncq-anyio-backend"


def pytest_configure(config: pytest.Config) -> None:
    """Register the ``anyio_backend`` fixture.

    Fixtures of plugins loaded from entry points override each other in load
    order, which is not defined.  Registering it from ``pytest_configure``,
    after every entry-point plugin (anyio's included), makes it win over
    anyio's default; conftest and test-module fixtures are registered later
    still, so a project's own ``anyio_backend`` wins over this one.
    """
    if config.pluginmanager.has_plugin(_ANYIO_BACKEND_PLUGIN):
        return

    @pytest.fixture(scope="session")
    def anyio_backend() -> str:
        return "asyncio"

    holder = types.ModuleType(f"{__name__}._anyio_backend")
    holder.__dict__["anyio_backend"] = anyio_backend
    config.pluginmanager.register(holder, _ANYIO_BACKEND_PLUGIN)


# ---------------------------------------------------------------- redis


@pytest.fixture(scope="session")
def asyncq_redis_server() -> Iterator[RedisServer]:
    """A ``redis-server`` subprocess for the whole session (see module docs)."""
    if os.environ.get(REDIS_URL_ENV):
        pytest.skip(f"{REDIS_URL_ENV} is set: the Redis server is external, not ours to control")
    with RedisServer() as server:
        yield server


@pytest.fixture(scope="session")
def asyncq_redis_url(request: pytest.FixtureRequest) -> str:
    """``$ASYNCQ_TEST_REDIS_URL``, or the URL of ``asyncq_redis_server``."""
    url = os.environ.get(REDIS_URL_ENV)
    if url:
        return url
    server: RedisServer = request.getfixturevalue("asyncq_redis_server")
    return server.url


@pytest.fixture
def asyncq_queue() -> str:
    """A queue name unique to this test."""
    return f"t-{uuid.uuid4().hex[:12]}"


@pytest.fixture
async def redis_client(
    asyncq_redis_url: str, anyio_backend: object
) -> AsyncIterator[redis.asyncio.Redis]:
    """A ``redis.asyncio.Redis`` on ``asyncq_redis_url``, closed after the test.

    Depends on ``anyio_backend`` so that anyio's plugin runs it even when it
    is requested indirectly.
    """
    client = redis.asyncio.Redis.from_url(asyncq_redis_url, decode_responses=False)
    try:
        yield client
    finally:
        await client.aclose()


# ---------------------------------------------------------------- asyncq


@pytest.fixture
async def asyncq_client(asyncq_redis_url: str, anyio_backend: object) -> AsyncIterator[Client]:
    """An ``asyncq.Client`` on ``asyncq_redis_url``, closed after the test."""
    async with Client(asyncq_redis_url) as client:
        yield client


@pytest.fixture
async def asyncq_inspector(asyncq_redis_url: str,
                           anyio_backend: object) -> AsyncIterator[Inspector]:
    """An ``asyncq.Inspector`` on ``asyncq_redis_url``, closed after the test."""
    async with Inspector(asyncq_redis_url) as inspector:
        yield inspector


@pytest.fixture
async def asyncq_fresh_redis(asyncq_redis_url: str, anyio_backend: object) -> str:
    """``asyncq_redis_url`` emptied (FLUSHDB) before the test, for apps whose queue names are
    fixed ("default", "mail"...) and must not see an earlier test's tasks. Refuses to empty an
    external ``$ASYNCQ_TEST_REDIS_URL`` unless ``ASYNCQ_TEST_ALLOW_FLUSH=1``."""
    if os.environ.get(REDIS_URL_ENV) and os.environ.get(ALLOW_FLUSH_ENV) != "1":
        pytest.fail(f"asyncq_fresh_redis would FLUSHDB {redact(asyncq_redis_url)} (from "
                    f"{REDIS_URL_ENV}); set {ALLOW_FLUSH_ENV}=1 if that server is for tests")
    client = redis.asyncio.Redis.from_url(asyncq_redis_url, decode_responses=False)
    try:
        await client.flushdb()
    finally:
        await client.aclose()
    return asyncq_redis_url


@pytest.fixture
async def asyncq_worker(asyncq_redis_url: str,
                        anyio_backend: object) -> AsyncIterator[WorkerFactory]:
    """Runs a worker in-process: ``async with asyncq_worker(mux, **config) as w:``.

    ``w.worker`` is the ``Worker``; ``await w.wait_drained("q1", ...)`` waits until those queues
    have no pending or active task and every outcome was written. The worker shuts down
    gracefully when the block ends. ``asyncq_worker.build(mux, **config)`` returns a Worker
    that is not started, for a test that drives it itself; it is closed after the test.
    """
    factory = WorkerFactory(asyncq_redis_url)
    try:
        yield factory
    finally:
        await factory.aclose()
