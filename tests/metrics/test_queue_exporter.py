"""The queue metrics exporter against a real Redis and worker: values after a known workload,
the stand-alone `asyncq metrics` process, and a scrape while Redis is down."""

from __future__ import annotations

import socket
import sys
from typing import Any

import anyio
import httpx
import pytest

import asyncq
from asyncq._testing.redis_server import RedisServer
from asyncq.metrics import queue_metrics_app
from asyncq.testing import WorkerFactory, wait_until
from tests.helpers.ports import free_port
from tests.helpers.prom import Key, key, outcome_mux, samples

pytestmark = pytest.mark.anyio


async def scrape(app: Any) -> dict[Key, float]:
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app),
                                 base_url="http://metrics") as http:
        response = await http.get("/metrics")
    assert response.status_code == 200
    assert response.headers["content-type"].startswith("text/plain")
    return samples(response.text)


def q(name: str, queue: str, **labels: str) -> Key:
    return key(name, queue=queue, **labels)


async def test_a_scrape_reports_what_a_known_workload_left(
    asyncq_client: asyncq.Client, asyncq_queue: str, asyncq_worker: WorkerFactory,
    asyncq_redis_url: str,
) -> None:
    work, waiting, stopped = (f"{asyncq_queue}-{s}" for s in ("work", "wait", "stop"))
    mux = outcome_mux()
    await asyncq_client.enqueue_many([asyncq.Task("ok", i, queue=work) for i in range(3)]
                                     + [asyncq.Task("bad", i, queue=work, max_retry=0)
                                        for i in range(2)])
    await asyncq_client.enqueue_many([asyncq.Task("ok", i, queue=waiting) for i in range(5)]
                                     + [asyncq.Task("ok", queue=waiting, process_in=600)] * 2)
    await asyncq_client.enqueue("ok", queue=stopped)
    async with asyncq.Inspector(asyncq_redis_url) as inspector:
        await inspector.pause(stopped)
    app = queue_metrics_app(asyncq_redis_url)
    try:
        async with asyncq_worker(mux, queues={work: 1}, concurrency=5) as w:
            await w.wait_drained(work)
            m = await scrape(app)
            assert m[("asyncq_servers", ())] >= 1
            # Totals, neither per worker id nor per host: a restarted worker, or a new pod
            # (a new host name), continues the same series.
            assert m[("asyncq_server_concurrency", ())] >= 5
            assert not any(k[0].startswith(("asyncq_server", "asyncq_host"))
                           and ({"server", "host"} & dict(k[1]).keys()) for k in m)
            # per host on request (machines that keep their name)
            per_host = queue_metrics_app(asyncq_redis_url, per_host=True)
            try:
                by_host = await scrape(per_host)
            finally:
                await per_host.aclose()
            host = socket.gethostname()  # (what a worker reports as its host)
            assert by_host[key("asyncq_host_servers", host=host)] >= 1
            assert by_host[key("asyncq_server_concurrency", host=host)] >= 5
    finally:
        await app.aclose()
    assert m[("asyncq_up", ())] == 1
    assert m[q("asyncq_tasks_processed_total", work)] == 5
    assert m[q("asyncq_tasks_failed_total", work)] == 2
    assert m[q("asyncq_tasks_processed_today", work)] == 5
    assert m[q("asyncq_tasks", work, state="archived")] == 2
    assert m[q("asyncq_tasks", work, state="pending")] == 0
    assert m[q("asyncq_tasks", waiting, state="pending")] == 5
    assert m[q("asyncq_tasks", waiting, state="scheduled")] == 2
    assert m[q("asyncq_queue_size", waiting)] == 7
    assert m[q("asyncq_queue_latency_seconds", waiting)] >= 0
    assert m[q("asyncq_queue_memory_usage_bytes", waiting)] > 0
    assert m[q("asyncq_queue_paused", stopped)] == 1
    assert m[q("asyncq_queue_paused", waiting)] == 0
    assert m[("asyncq_queues", ())] >= 3


async def test_the_backlog_counts_unfinished_tasks_and_the_size_every_stored_one(
    asyncq_client: asyncq.Client, asyncq_queue: str, asyncq_worker: WorkerFactory,
    asyncq_redis_url: str,
) -> None:
    # After a drain, the backlog is 0 however many results are kept: what an on-call
    # alerts on. The size still counts the kept results and the archive; a task that returned
    # nothing leaves only a completion mark, which no size counts.
    work, waiting = f"{asyncq_queue}-work", f"{asyncq_queue}-wait"
    mux = outcome_mux()

    @mux.handler("value")
    async def value(task: asyncq.Task) -> int:
        return 42

    await asyncq_client.enqueue_many(
        [asyncq.Task("ok", i, queue=work) for i in range(3)]
        + [asyncq.Task("value", i, queue=work) for i in range(2)]
        + [asyncq.Task("bad", i, queue=work, max_retry=0) for i in range(2)])
    await asyncq_client.enqueue_many([asyncq.Task("ok", i, queue=waiting) for i in range(5)]
                                     + [asyncq.Task("ok", queue=waiting, process_in=600)] * 2)
    app = queue_metrics_app(asyncq_redis_url)
    try:
        async with asyncq_worker(mux, queues={work: 1}, concurrency=5) as w:
            await w.wait_drained(work)
        m = await scrape(app)
    finally:
        await app.aclose()
    assert m[q("asyncq_tasks", work, state="completed")] == 2  # the 3 marks are not counted
    assert m[q("asyncq_tasks", work, state="archived")] == 2
    assert m[q("asyncq_queue_backlog", work)] == 0
    assert m[q("asyncq_queue_size", work)] == 4
    assert m[q("asyncq_queue_backlog", waiting)] == 7  # 5 pending + 2 scheduled
    assert m[q("asyncq_queue_size", waiting)] == 7


async def test_a_scrape_while_redis_is_down_answers_with_up_0_and_recovers() -> None:
    with RedisServer() as server:
        async with asyncq.Client(server.url) as client:
            await client.enqueue("t", queue="q1")
        app = queue_metrics_app(server.url, timeout=2)
        try:
            assert (await scrape(app))[("asyncq_up", ())] == 1
            server.stop()
            for _ in range(3):  # every scrape answers, none is a 500
                app.exporter.expire()
                down = await scrape(app)
                assert down[("asyncq_up", ())] == 0
                assert not any(name == "asyncq_tasks" for name, _ in down)
            assert down[("asyncq_scrape_failures_total", ())] == 3
            server.start()

            async def back_up() -> bool:
                app.exporter.expire()
                return (await scrape(app))[("asyncq_up", ())] == 1
            await wait_until(back_up, timeout=20, message="exporter reads Redis again")
            async with asyncq.Client(server.url) as client:  # (a restarted test server is empty)
                await client.enqueue("t", queue="q2")
            app.exporter.expire()
            assert (await scrape(app))[q("asyncq_tasks", "q2", state="pending")] == 1
        finally:
            await app.aclose()


async def test_the_asyncq_metrics_command_serves_prometheus(
    asyncq_client: asyncq.Client, asyncq_queue: str, asyncq_redis_url: str,
) -> None:
    await asyncq_client.enqueue("t", queue=asyncq_queue)
    port = free_port()
    async with await anyio.open_process(
            [sys.executable, "-m", "asyncq", "metrics", "--port", str(port),
             "--redis-url", asyncq_redis_url]) as proc:
        try:
            async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}") as http:
                async def served() -> bool:
                    try:
                        return (await http.get("/metrics")).status_code == 200
                    except httpx.TransportError:
                        return False
                await wait_until(served, timeout=20, message="asyncq metrics serving")
                m = samples((await http.get("/metrics")).text)
        finally:
            proc.terminate()
            await proc.wait()
    assert m[("asyncq_up", ())] == 1
    assert m[q("asyncq_tasks", asyncq_queue, state="pending")] == 1


def test_without_the_extra_asyncq_imports_and_metrics_names_the_extra() -> None:
    import subprocess

    code = ("import sys; sys.modules['prometheus_client'] = None\n"
            "import asyncq, asyncq._cli\n"
            "assert 'asyncq.metrics' not in sys.modules\n"
            "import asyncq.metrics\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         timeout=60, check=False)
    assert out.returncode == 1
    assert "pip install 'asyncq[prometheus]'" in out.stderr
