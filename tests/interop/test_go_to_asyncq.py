"""Go's asynq client -> asyncq worker (``?wire=asynq``) on one Redis, Go's Inspector as the
referee: every scenario of ``interop_scenarios`` with the Go producer, consumed by an asyncq worker
(``asyncq``) and, as the baseline proving each assertion is asynq's own behaviour, by Go's
server (``go``)."""

from __future__ import annotations

from pathlib import Path

import interop_scenarios as sc
import pytest
from goharness import GoPrograms

pytestmark = pytest.mark.anyio


@pytest.fixture(params=["asyncq", "go_baseline"])
def consumer(request: pytest.FixtureRequest, asynq_go: GoPrograms,
             interop_redis: str, workdir: Path) -> sc.Consumer:
    if request.param == "asyncq":
        return sc.AsyncqConsumer(interop_redis)
    return sc.GoConsumer(asynq_go, interop_redis, workdir)


def second_client(consumer: sc.Consumer, go: GoPrograms, url: str) -> sc.Producer:
    """The other client of the unique scenario: asyncq's beside an asyncq worker, Go's again
    in the Go baseline."""
    return sc.AsyncqProducer(url) if consumer.name == "asyncq" else sc.GoProducer(go, url)


@pytest.mark.slow
@pytest.mark.timeout(900)
async def test_10000_tasks_run_once_with_exact_payloads(consumer: sc.Consumer,
                                                        asynq_go: GoPrograms,
                                                        interop_redis: str,
                                                        asyncq_queue: str) -> None:
    await sc.bulk_exact(sc.GoProducer(asynq_go, interop_redis), consumer, asynq_go,
                        interop_redis, asyncq_queue, 10_000)


async def test_payload_bytes_and_headers_exact(consumer: sc.Consumer, asynq_go_each: GoPrograms,
                                               interop_redis: str, asyncq_queue: str) -> None:
    headers = {"trace": "abc", "tenant": "\u00e9t\u00e9"}
    await sc.payload_edges(sc.GoProducer(asynq_go_each, interop_redis), consumer,
                           interop_redis, asyncq_queue,
                           headers if asynq_go_each.version == "v0.26.0" else None)


async def test_retried_then_archived(consumer: sc.Consumer, asynq_go: GoPrograms,
                                     interop_redis: str, asyncq_queue: str) -> None:
    await sc.retried_then_archived(sc.GoProducer(asynq_go, interop_redis), consumer, asynq_go,
                                   interop_redis, asyncq_queue)


async def test_scheduled(consumer: sc.Consumer, asynq_go: GoPrograms, interop_redis: str,
                         asyncq_queue: str) -> None:
    await sc.scheduled(sc.GoProducer(asynq_go, interop_redis), consumer, asynq_go,
                       interop_redis, asyncq_queue)


async def test_unique_and_task_ids(consumer: sc.Consumer, asynq_go_each: GoPrograms,
                                   interop_redis: str, asyncq_queue: str) -> None:
    await sc.unique_and_task_ids(sc.GoProducer(asynq_go_each, interop_redis),
                                 second_client(consumer, asynq_go_each, interop_redis),
                                 consumer, interop_redis, asyncq_queue)


async def test_groups(consumer: sc.Consumer, asynq_go: GoPrograms, interop_redis: str,
                      asyncq_queue: str) -> None:
    await sc.groups(sc.GoProducer(asynq_go, interop_redis), consumer, asynq_go, interop_redis,
                    asyncq_queue)


async def test_timeout_and_deadline(consumer: sc.Consumer, asynq_go: GoPrograms,
                                    interop_redis: str, asyncq_queue: str) -> None:
    await sc.timeout_and_deadline(sc.GoProducer(asynq_go, interop_redis), consumer, asynq_go,
                                  interop_redis, asyncq_queue)


async def test_servers_listed_and_cancel(consumer: sc.Consumer, asynq_go_each: GoPrograms,
                                         interop_redis: str, asyncq_queue: str) -> None:
    await sc.servers_and_cancel(sc.GoProducer(asynq_go_each, interop_redis), consumer,
                                asynq_go_each, interop_redis, asyncq_queue)


async def test_pause(consumer: sc.Consumer, asynq_go: GoPrograms, interop_redis: str,
                     asyncq_queue: str) -> None:
    await sc.pause(sc.GoProducer(asynq_go, interop_redis), consumer, asynq_go, interop_redis,
                   asyncq_queue)


async def test_odd_queue_names(consumer: sc.Consumer, asynq_go: GoPrograms,
                               interop_redis: str) -> None:
    await sc.odd_queue_names(sc.GoProducer(asynq_go, interop_redis), consumer, asynq_go,
                             interop_redis)
