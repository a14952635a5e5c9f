"""Shared test configuration.

asyncq's pytest plugin (asyncq.testing: redis server, queue-name and client
fixtures) is loaded through the ``pytest11`` entry point of the installed
package (``make venv`` installs it editable), so it is not listed in
``pytest_plugins`` here: registering it twice would be an error.
"""

import gc
import os
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest

from asyncq import FakeClock
from asyncq._testing.redis_server import REDIS_NOT_FOUND, RedisServer
from tests.helpers.cli import Cli

RUN_SLOW_ENV = "ASYNCQ_RUN_SLOW"
RUN_CHAOS_ENV = "ASYNCQ_RUN_CHAOS"
TESTS = Path(__file__).resolve().parent
AOF_ALWAYS = ["--appendonly", "yes", "--appendfsync", "always"]


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption("--run-slow", action="store_true", default=False,
                     help=f"also run tests marked slow (or set {RUN_SLOW_ENV}=1); "
                          "`make test-chaos` does")
    parser.addoption("--run-chaos", action="store_true", default=False,
                     help=f"also run the fault-injection cases (marked chaos: tests/chaos), or "
                          f"set {RUN_CHAOS_ENV}=1; `make test-chaos` does")


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_teardown(item: pytest.Item) -> None:
    """Collect garbage as each test ends, so a connection or socket a test left open is
    reported (and fails) on that test, not on whichever later test triggers the collector."""
    gc.collect()


#: Tests that share one pytest-xdist worker (``make test`` runs ``--dist loadgroup``), by the
#: directory or module they are in: the chaos cases each load the machine with worker
#: processes and must not overlap one another; the deployment tests share session-scoped
#: topologies (a cluster, sentinels) started once; the browser tests share one chromium.
XDIST_GROUPS = {"chaos": "chaos", "deploy": "deploy", "test_web_browser.py": "browser",
                "test_web_browser_ops.py": "browser", "test_web_browser_progress.py": "browser"}


def _group(item: pytest.Item) -> str | None:
    if not item.path.is_relative_to(TESTS):
        return None
    parts = item.path.relative_to(TESTS).parts
    return XDIST_GROUPS.get(parts[0]) or XDIST_GROUPS.get(parts[-1])


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    for item in items:
        group = _group(item)
        if group is not None:
            item.add_marker(pytest.mark.xdist_group(group))
    # The fault-injection cases load the machine with processes they kill and servers they
    # stop: they run on their own (`make test-chaos`), never inside the parallel default run.
    if not (config.getoption("--run-chaos") or os.environ.get(RUN_CHAOS_ENV) == "1"):
        skip_chaos = pytest.mark.skip(reason=f"chaos: run with --run-chaos or "
                                             f"{RUN_CHAOS_ENV}=1 (make test-chaos)")
        for item in items:
            if item.get_closest_marker("chaos") is not None or _in_chaos(item):
                item.add_marker(skip_chaos)
    if config.getoption("--run-slow") or os.environ.get(RUN_SLOW_ENV) == "1":
        return
    skip = pytest.mark.skip(reason=f"slow: run with --run-slow or {RUN_SLOW_ENV}=1 "
                                   "(make test-chaos, test-interop, test-prometheus)")
    for item in items:
        if item.get_closest_marker("slow") is not None:
            item.add_marker(skip)


def _in_chaos(item: pytest.Item) -> bool:
    """Whether ``item`` is in tests/chaos (marked chaos there, whichever hook runs first)."""
    return item.path.is_relative_to(TESTS / "chaos")


def _server(args: list[str]) -> Iterator[RedisServer]:
    if shutil.which("redis-server") is None:
        pytest.skip(REDIS_NOT_FOUND)
    with RedisServer(args) as server:
        yield server


@pytest.fixture
def aof_server() -> Iterator[RedisServer]:
    """A Redis server of this test only, persisting every write (AOF, fsync always): tests
    that restart it or cut it off never touch the session's server."""
    yield from _server(AOF_ALWAYS)


@pytest.fixture
def own_server() -> Iterator[RedisServer]:
    """A Redis server of this test only, without persistence."""
    yield from _server([])


@pytest.fixture
def clock(request: pytest.FixtureRequest) -> FakeClock:
    """A fake clock for a Client/Worker/Scheduler/broker built with ``clock=``; it starts at
    the test module's ``CLOCK_START`` (a datetime) when it defines one, else at the real now."""
    return FakeClock(getattr(request.module, "CLOCK_START", None))


@pytest.fixture
def cli(asyncq_redis_url: str) -> Cli:
    """The ``asyncq`` command, in-process, against the test Redis: ``await cli("queue", "ls")``
    (or ``cli.sync(...)`` without an event loop); ``ok=True`` asserts exit 0, ``ok=False``
    exit 1 with one ``asyncq: error:`` line, ``ok=None`` nothing (tests/helpers/cli.py)."""
    return Cli(asyncq_redis_url)
