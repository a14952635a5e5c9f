"""A worker process whose ``--config`` already measures (``WorkerMetrics(task_types=[...])``)
serves those metrics on ``--metrics-port``: it does not measure twice (which crashed it with
"Duplicated timeseries in CollectorRegistry")."""

from __future__ import annotations

import os
import urllib.request
from pathlib import Path

import pytest

from asyncq import Client
from asyncq.testing import wait_until
from tests.helpers.ports import free_port
from tests.helpers.processes import ROOT, worker_process

pytestmark = pytest.mark.anyio

CONFIG = """\
from asyncq import WorkerConfig
from asyncq.metrics import WorkerMetrics

config = WorkerConfig(metrics=WorkerMetrics(task_types=["slow:echo"]))
"""


def scrape(port: int) -> str | None:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as reply:
            return str(reply.read().decode())
    except OSError:
        return None


async def test_config_metrics_are_served_on_the_metrics_port(
    asyncq_redis_url: str, asyncq_client: Client, asyncq_queue: str, tmp_path: Path,
) -> None:
    (tmp_path / "lifecycle_metrics_config.py").write_text(CONFIG)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(tmp_path), str(ROOT)])}
    port = free_port()
    log = tmp_path / "worker.log"
    async with worker_process(asyncq_redis_url, asyncq_queue, log,
                              "--config", "lifecycle_metrics_config:config",
                              "--metrics-port", str(port), env=env) as proc:
        await asyncq_client.enqueue("slow:echo", {"a": 1}, queue=asyncq_queue)
        await asyncq_client.enqueue("nope:missing", {}, queue=asyncq_queue)

        def counted() -> str | None:
            assert proc.returncode is None, log.read_text()
            text = scrape(port)
            if text and 'type="slow:echo"' in text and 'type="other"' in text:
                return text
            return None

        text = await wait_until(counted, timeout=30,
                                message=lambda: f"metrics of both runs:\n{log.read_text()}")
    # The config's task_types were kept: a type not named is "other", never its own label.
    assert 'type="nope:missing"' not in text
    assert "Duplicated timeseries" not in log.read_text()
