"""Workflow tests: the app's handlers reach the test's Redis through WF_REDIS_URL."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest
import redis.asyncio


@pytest.fixture
async def wf_redis(asyncq_fresh_redis: str, monkeypatch: pytest.MonkeyPatch,
                   anyio_backend: object) -> AsyncIterator[redis.asyncio.Redis]:
    """The test's Redis (emptied), also named to the handlers of tests.workflows.flowapp."""
    monkeypatch.setenv("WF_REDIS_URL", asyncq_fresh_redis)
    client = redis.asyncio.Redis.from_url(asyncq_fresh_redis)
    yield client
    await client.aclose()
