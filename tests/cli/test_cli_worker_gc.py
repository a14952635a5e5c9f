"""``asyncq worker`` keeps the objects alive at start (modules, app, handlers) out of the
garbage collector's full scans while it serves, and gives the collector back when it stops."""

from __future__ import annotations

import gc

import anyio
import pytest

from asyncq import Client
from tests.helpers.cli import Cli

pytestmark = pytest.mark.anyio


async def test_a_serving_worker_freezes_its_startup_objects_and_unfreezes_them_at_exit(
    asyncq_redis_url: str, asyncq_queue: str, cli: Cli,
) -> None:
    assert gc.get_freeze_count() == 0
    async with Client(asyncq_redis_url) as client:
        info = await client.enqueue("gc:frozen", {"s": 10}, queue=asyncq_queue, retention=600)
        with anyio.fail_after(60):
            await cli("worker", "tests.apps.gcprobe:mux", "--burst",
                      "--queue", f"{asyncq_queue}=1")
        frozen = await client.result(info, timeout=10)
    assert frozen > 1000  # the interpreter's modules at least, while it served
    assert gc.get_freeze_count() == 0  # in-process: the caller's collector is whole again
