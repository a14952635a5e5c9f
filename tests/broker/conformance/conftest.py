"""The conformance suite: what every Broker does, whatever its Redis layout.

Each test here takes ``broker`` and ``client`` and runs once per layout: asyncq's own
("asyncq") and Go asynq's ("asynq", ``?wire=asynq``), both on one FakeClock over the shared
test Redis. A module that sets ``ON_CLUSTER = True`` also runs on a 3-master Redis Cluster
("asyncq-cluster", "asynq-cluster"). Tests assert through the Broker API (and the Inspector),
never on key names or field encodings: those are the per-layout modules' (tests/broker/,
tests/broker/asynq/). What a layout lacks on purpose is skipped through its capabilities
(``conformance_helpers.requires``), never by its name.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from typing import Any

import pytest
from topology.cluster import three_masters

from asyncq import Client, FakeClock
from asyncq._broker import Broker
from asyncq._broker._connection import make_broker

LAYOUTS = ("asyncq", "asynq")
CLUSTER_LAYOUTS = ("asyncq-cluster", "asynq-cluster")


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    """Parametrize ``layout`` over both layouts, and over the cluster where a module asks."""
    if "layout" in metafunc.fixturenames:
        layouts = LAYOUTS + (CLUSTER_LAYOUTS if getattr(metafunc.module, "ON_CLUSTER", False)
                             else ())
        metafunc.parametrize("layout", layouts, indirect=True)


@pytest.fixture
def layout(request: pytest.FixtureRequest) -> str:
    """The layout under test: "asyncq" or "asynq", with "-cluster" on a Redis Cluster."""
    return str(request.param)


@pytest.fixture(scope="session")
def conformance_cluster_url() -> Iterator[str]:
    """A 3-master Redis Cluster shared by the cluster runs of this pytest worker."""
    with three_masters() as cluster:
        yield cluster.url


@pytest.fixture
async def broker(layout: str, request: pytest.FixtureRequest, clock: FakeClock,
                 anyio_backend: object) -> AsyncIterator[Broker]:
    """A broker of ``layout`` on the test clock."""
    wire, _, where = layout.partition("-")
    if where == "cluster":
        url = request.getfixturevalue("conformance_cluster_url")
    else:
        url = request.getfixturevalue("asyncq_redis_url")
    b: Any = make_broker(url, clock=clock, wire=wire)  # type: ignore[arg-type]
    try:
        yield b
    finally:
        await b.close()


@pytest.fixture
async def client(broker: Broker, clock: FakeClock) -> AsyncIterator[Client]:
    """A Client on ``broker``, closed before it (its event listeners stopped; the broker it
    shares is not closed with it)."""
    c = Client(broker, clock=clock)
    try:
        yield c
    finally:
        await c.close()

