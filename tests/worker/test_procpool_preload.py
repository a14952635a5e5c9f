"""``preload``: modules the fork server of the handler processes imports once, so a heavy
import (a Django project's set-up) is paid once per pool, not by a task's time limit, and not
again by a child that replaces a recycled one."""

from __future__ import annotations

from pathlib import Path

import pytest
from redis.asyncio import Redis

from asyncq import Client, Worker
from asyncq.testing import wait_until
from tests.helpers.dataplane import task_hash
from tests.helpers.processes import worker_process
from tests.worker import preload_handlers
from tests.worker.test_worker_process import server_of

pytestmark = pytest.mark.anyio

HEAVY = "tests.worker.preload_heavy_handlers"


async def test_a_preloaded_heavy_import_costs_no_task_its_limit(
    asyncq_redis_url: str, asyncq_client: Client, asyncq_queue: str, redis_client: Redis,
    tmp_path: Path,
) -> None:
    """A worker process with --preload of a module taking 1.2 s to import, a 0.5 s limit on
    the handler that imports it, each child recycled after 2 tasks: all 6 tasks complete, in
    3 children, none of which imported the module itself (the fork server did, once)."""
    infos = [await asyncq_client.enqueue("heavy:use", queue=asyncq_queue, max_retry=0,
                                         retention=120) for _ in range(6)]
    log = tmp_path / "worker.log"
    async with worker_process(asyncq_redis_url, asyncq_queue, log, "--concurrency", "1",
                              "--process-pool-size", "1", "--max-tasks-per-child", "2",
                              "--preload", HEAVY,
                              target="tests.worker.preload_handlers:mux") as proc:
        await wait_until(lambda: server_of(redis_client, proc.pid), timeout=15,
                         message="the worker process ready")
        runs = [await asyncq_client.result(i.id, queue=asyncq_queue, timeout=60)
                for i in infos]
    for info in infos:
        fields = await task_hash(redis_client, asyncq_queue, info.id)
        assert (fields["state"], fields.get("error")) == (b"completed", None)
    children = {run["pid"] for run in runs}
    imported_in = {run["imported_in"] for run in runs}
    assert len(children) == 3 and len(imported_in) == 1
    assert not imported_in & children  # imported before any child was forked


def test_preload_names_modules_that_can_be_imported() -> None:
    """A misspelt module is refused when the worker is built, not by its first child."""
    mux = preload_handlers.mux
    with pytest.raises(ValueError, match=r"no module named 'tests\.worker\.no_such_module'"):
        Worker("redis://127.0.0.1:1/0", mux, preload=("tests.worker.no_such_module",))
    with pytest.raises(TypeError, match="preload must be a tuple of module names"):
        Worker("redis://127.0.0.1:1/0", mux, preload=HEAVY)
    with pytest.raises(ValueError, match="is not a module name"):
        Worker("redis://127.0.0.1:1/0", mux, preload=("tests/worker",))
    assert Worker("redis://127.0.0.1:1/0", mux, preload=[HEAVY]).config.preload == (HEAVY,)
