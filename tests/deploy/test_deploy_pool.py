"""More concurrent calls than connections on every deployment: callers wait, none fails."""

from __future__ import annotations

import asyncio
import uuid

import pytest

from asyncq import Client, ConnectionOptions

from .conftest import Deployment

pytestmark = pytest.mark.anyio


async def test_concurrent_enqueues_beyond_the_pool_all_succeed(deployment: Deployment) -> None:
    q = f"pool-{uuid.uuid4().hex[:8]}"
    async with Client(deployment.url, connection=ConnectionOptions(max_connections=4)) as client:
        results = await asyncio.gather(*[client.enqueue("t", i, queue=q) for i in range(600)],
                                       return_exceptions=True)
    assert [r for r in results if isinstance(r, BaseException)] == []
