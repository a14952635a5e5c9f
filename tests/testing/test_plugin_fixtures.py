"""The pytest plugin's fixtures for an application's tests."""

from __future__ import annotations

import pytest
import structlog.testing

from asyncq import Client, Inspector, QueueInfo, ServeMux
from asyncq.testing import WorkerFactory

pytestmark = pytest.mark.anyio


async def test_inspector_fixture_sees_what_the_client_did(
    asyncq_inspector: Inspector, asyncq_client: Client, asyncq_queue: str,
) -> None:
    await asyncq_client.enqueue("t", queue=asyncq_queue)
    assert (await asyncq_inspector.queue_info(asyncq_queue)).pending == 1


async def test_a_queue_a_worker_serves_is_known_before_its_first_task(
    asyncq_inspector: Inspector, asyncq_worker: WorkerFactory, asyncq_queue: str,
) -> None:
    async with asyncq_worker(ServeMux(), queues={asyncq_queue: 1}):
        assert asyncq_queue in await asyncq_inspector.queues()
        info = await asyncq_inspector.queue_info(asyncq_queue)
    assert isinstance(info, QueueInfo) and (info.pending, info.active) == (0, 0)


@pytest.fixture
async def leftover(asyncq_redis_url: str) -> str:
    """A task an earlier test left in the fixed queue "default"."""
    async with Client(asyncq_redis_url) as client:
        return (await client.enqueue("left:over", queue="default")).id


async def test_fresh_redis_starts_empty_for_fixed_queue_names(
    leftover: str, asyncq_fresh_redis: str,  # (in this order: the leftover comes first)
) -> None:
    async with Inspector(asyncq_fresh_redis) as inspector:
        assert "default" not in await inspector.queues()


async def test_a_worker_with_an_empty_mux_warns_at_start(
    asyncq_worker: WorkerFactory, asyncq_queue: str,
) -> None:
    with structlog.testing.capture_logs() as logs:
        async with asyncq_worker(ServeMux(), queues={asyncq_queue: 1}):
            pass
    warned = [e for e in logs if e["log_level"] == "warning"]
    assert [e["event"] for e in warned] == [
        "the ServeMux has no handlers: every task will fail with HandlerNotFoundError and be "
        "retried; register handlers with @mux.handler(...) before starting the worker"]
