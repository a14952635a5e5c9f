"""The interop on a 3-master Redis Cluster: Go client -> asyncq worker and asyncq client -> Go
server, with Go client -> Go server as the baseline (asynq's keys are hash-tagged per queue,
``asynq:{<queue>}:...``, so each queue's scripts run on one node)."""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import interop_scenarios as sc
import pytest
from goharness import GoPrograms

from tests.topology.cluster import LocalCluster

pytestmark = pytest.mark.anyio

N = 300


@dataclass(frozen=True)
class ClusterURLs:
    go: str  # the Go programs' form (-cluster host:port,...)
    asyncq: str  # asyncq's redis+cluster:// URL


@pytest.fixture
def cluster_urls() -> Iterator[ClusterURLs]:
    if shutil.which("redis-cli") is None:
        pytest.fail("the Cluster interop test needs redis-cli (it comes with redis-server)")
    with LocalCluster(masters=3) as topo:
        yield ClusterURLs("cluster://" + ",".join(topo.addresses), topo.url)


@pytest.mark.parametrize("pair", ["go_to_go_baseline", "go_to_asyncq", "asyncq_to_go"])
async def test_tasks_run_once_with_exact_payloads_on_cluster(
        pair: str, asynq_go: GoPrograms, cluster_urls: ClusterURLs, asyncq_queue: str,
        workdir: Path) -> None:
    producer: sc.Producer = (sc.AsyncqProducer(cluster_urls.asyncq) if pair == "asyncq_to_go"
                             else sc.GoProducer(asynq_go, cluster_urls.go))
    consumer: sc.Consumer = (sc.AsyncqConsumer(cluster_urls.asyncq) if pair == "go_to_asyncq"
                             else sc.GoConsumer(asynq_go, cluster_urls.go, workdir))
    await sc.bulk_exact(producer, consumer, asynq_go, cluster_urls.go, asyncq_queue, N)
    slot = await asynq_go.inspect(cluster_urls.go, "cluster-slot", "-queue", asyncq_queue)
    assert 0 <= slot < 16384
