"""Shared by the Client tests: a Client on a FakeClock, so every stored time is known to the
millisecond. The tests check the returned TaskInfo and what was written to Redis.
"""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from asyncq import (
    AsyncqError,
    Client,
    FakeClock,
    TaskInfo,
)

HOUR_MS = 3_600_000


@pytest.fixture
async def client(asyncq_redis_url: str, clock: FakeClock,
                 anyio_backend: object) -> AsyncIterator[Client]:
    async with Client(asyncq_redis_url, clock=clock) as c:
        yield c


def ok_info(result: TaskInfo | AsyncqError) -> TaskInfo:
    assert isinstance(result, TaskInfo), result
    return result


