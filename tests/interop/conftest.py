"""Fixtures of the interop suite: asyncq beside Go's asynq (the real library, built from
``tests/interop/go``) on the same Redis.

Every test here is marked ``interop`` and runs in one pytest-xdist worker (they start Go
processes and Redis servers of their own); the long scenarios are also marked ``slow``, so
``make test`` leaves them to ``--run-slow`` (see tests/conftest.py). The Go programs are built
by ``tests/interop/go/build.sh`` (what ``make interop-bin`` runs) on first use, and reused
while up to date; without Go the fixtures fail, saying so: nothing is skipped silently.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from goharness import ASYNQ_VERSIONS, DEFAULT_ASYNQ, GoBuildError, GoPrograms, build

from asyncq._testing.redis_server import RedisServer

HERE = Path(__file__).resolve().parent
#: A bound on each interop test, the first build of the Go programs included (about 80 s for
#: both asynq versions on an empty Go module and build cache, 0.3 s once built).
INTEROP_TIMEOUT = 300


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "interop: asyncq beside Go's asynq (tests/interop)")


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if not item.path.is_relative_to(HERE):
            continue
        item.add_marker(pytest.mark.interop)
        item.add_marker(pytest.mark.xdist_group("interop"))
        if item.get_closest_marker("timeout") is None:
            item.add_marker(pytest.mark.timeout(INTEROP_TIMEOUT))


class GoBuilds:
    """The programs of each asynq version, built once per session on first use."""

    def __init__(self) -> None:
        self._built: dict[str, GoPrograms] = {}

    def get(self, version: str = DEFAULT_ASYNQ) -> GoPrograms:
        if version not in self._built:
            try:
                self._built[version] = GoPrograms(version, build(version))
            except GoBuildError as exc:
                pytest.fail(str(exc), pytrace=False)
        return self._built[version]


@pytest.fixture(scope="session")
def go_builds() -> GoBuilds:
    return GoBuilds()


@pytest.fixture
def asynq_go(go_builds: GoBuilds) -> GoPrograms:
    """The Go programs built against asynq v0.26.0."""
    return go_builds.get(DEFAULT_ASYNQ)


@pytest.fixture(params=ASYNQ_VERSIONS)
def asynq_go_each(request: pytest.FixtureRequest, go_builds: GoBuilds) -> GoPrograms:
    """The Go programs built against each asynq version tested (v0.26.0, v0.24.1)."""
    version: str = request.param
    return go_builds.get(version)


@pytest.fixture
def interop_redis(own_server: RedisServer) -> Iterator[str]:
    """A Redis server of this test only (asynq's global keys, ``asynq:queues`` and
    ``asynq:servers``, then list exactly what this test made), as a plain URL."""
    yield own_server.url


@pytest.fixture
def workdir(tmp_path: Path) -> Path:
    """Where this test's Go servers write their ledgers and logs."""
    return tmp_path
