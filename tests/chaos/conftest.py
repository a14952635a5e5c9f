"""Fixtures of the chaos suite (fault injection into real worker processes and Redis servers).

Every test here is marked ``chaos`` and runs only with ``--run-chaos`` or
``ASYNCQ_RUN_CHAOS=1``, never inside the parallel default run; the slow ones (``slow``: the
soak) also need ``--run-slow`` or ``ASYNCQ_RUN_SLOW=1`` — ``make test-chaos`` runs them all.
The dedicated servers (``aof_server``, ``own_server``) come from ``tests/conftest.py``.
"""

from __future__ import annotations

import re
from collections.abc import AsyncIterator

import chaosapp
import pytest
from chaoslib import Ledger
from redis.asyncio import Redis


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if "chaos" in item.path.parts:
            item.add_marker(pytest.mark.chaos)


@pytest.fixture
async def ledger(request: pytest.FixtureRequest, redis_client: Redis,
                 asyncq_redis_url: str) -> AsyncIterator[Ledger]:
    """This case's ledger, on the session Redis (never the server a case faults)."""
    chaosapp.use_ledger(asyncq_redis_url)
    name = re.sub(r"[^A-Za-z0-9_-]", "_", request.node.name)[:60]
    book = Ledger(redis_client, name)
    try:
        yield book
    finally:
        await book.delete()
        await chaosapp.close_ledger_clients()
