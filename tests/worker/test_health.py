"""Health probes of a worker: ``asyncq worker --health-port`` (a real process) answers /livez
503 while a handler blocks its event loop and names that task in one log line; /readyz follows
Redis going away and coming back, SIGTSTP and shutdown; ``Worker(health_port=...)`` offers the
same, and the loop's lag and stalls are metrics."""

from __future__ import annotations

import signal
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

import anyio
import orjson
import pytest
import structlog
from prometheus_client import CollectorRegistry, generate_latest

from asyncq import Client, ServeMux, Task, Worker
from asyncq._testing.redis_server import RedisServer
from asyncq.metrics import WorkerMetrics
from asyncq.testing import wait_until
from tests.helpers.processes import log_events, worker_process
from tests.helpers.prom import key, samples

pytestmark = pytest.mark.anyio

APP = "tests.apps.blocking:mux"


def _get(port: int, path: str) -> tuple[int, dict[str, Any]]:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=10) as reply:
            return reply.status, orjson.loads(reply.read())
    except urllib.error.HTTPError as exc:
        return exc.code, orjson.loads(exc.read())


async def probe(port: int, path: str) -> tuple[int, dict[str, Any]]:
    """GET a probe: its status and JSON body."""
    return await anyio.to_thread.run_sync(_get, port, path)


async def answers(port: int, path: str, status: int, timeout: float = 10) -> dict[str, Any]:
    """Poll the probe until it answers ``status``; its body then."""
    async def check() -> dict[str, Any] | None:
        got, body = await probe(port, path)
        return body if got == status else None
    return await wait_until(check, timeout=timeout, message=f"{path} answering {status}")


async def served_port(log: Path, event: str = "serving health probes") -> int:
    """The port a worker process logged it serves its probes on (started with port 0)."""
    def logged() -> int | None:
        found = [e["port"] for e in log_events(log) if e["event"] == event]
        return found[0] if found else None
    port: int = await wait_until(logged, timeout=30, message=f"'{event}' logged")
    return port


async def test_a_handler_blocking_the_loop_fails_livez_and_is_named_in_one_log_line(
    asyncq_redis_url: str, asyncq_client: Client, asyncq_queue: str, tmp_path: Path,
) -> None:
    log = tmp_path / "worker.log"
    async with worker_process(asyncq_redis_url, asyncq_queue, log, "--health-port", "0",
                              "--stall-timeout", "1", "--stall-warning", "0.5",
                              target=APP) as proc:
        port = await served_port(log)
        assert (await answers(port, "/livez", 200))["status"] == "ok"
        await answers(port, "/readyz", 200)
        info = await asyncq_client.enqueue("blocking:sleep", {"s": 4}, queue=asyncq_queue)
        stalled = await answers(port, "/livez", 503)
        assert stalled["status"] == "stalled" and stalled["blocked_s"] >= 1
        # Answered from a thread while the loop is blocked; readiness fails with it.
        status, ready = await probe(port, "/readyz")
        assert status == 503 and ready["status"] == "event loop blocked"
        # Once the handler returns, the loop turns and the worker is live again.
        await answers(port, "/livez", 200)
        proc.send_signal(signal.SIGTERM)
        with anyio.fail_after(15):
            assert await proc.wait() == 0
    # One line per stall, while it lasts. (Only those naming the task: on a loaded machine
    # the process may also miss the CPU for a moment.)
    warnings = [e for e in log_events(log) if e["event"].startswith("event loop blocked")
                and e.get("task_id") == info.id]
    assert len(warnings) == 1, warnings
    line = warnings[0]
    assert line["task_type"] == "blocking:sleep" and line["task_id"] == info.id
    assert line["where"].endswith("in sleep") and "tests/apps/blocking.py" in line["where"]
    assert line["level"] == "warning" and line["blocked_s"] >= 0.5
    resumed = [e for e in log_events(log) if e["event"] == "event loop turned again"]
    assert len([e for e in resumed if e["blocked_s"] >= 3]) == 1, log.read_text()


async def test_readyz_fails_while_redis_is_down_and_after_sigtstp(
    own_server: RedisServer, tmp_path: Path,
) -> None:
    log = tmp_path / "worker.log"
    async with worker_process(own_server.url, "default", log, "--health-port", "0",
                              target=APP) as proc:
        port = await served_port(log)
        assert await answers(port, "/readyz", 200) == {"status": "ok"}
        own_server.stop()
        down = await answers(port, "/readyz", 503)
        assert down["status"] == "redis unreachable" and "cannot reach Redis" in down["error"]
        assert (await probe(port, "/livez"))[0] == 200  # the process is fine: not restarted
        own_server.start()
        await answers(port, "/readyz", 200)
        proc.send_signal(signal.SIGTSTP)
        assert (await answers(port, "/readyz", 503))["status"] == "stopped fetching"
        assert (await probe(port, "/livez"))[0] == 200
        proc.send_signal(signal.SIGTERM)
        with anyio.fail_after(15):
            assert await proc.wait() == 0


async def test_worker_api_serves_the_probes_and_says_when_it_stops(
    asyncq_redis_url: str, asyncq_queue: str,
) -> None:
    worker = Worker(asyncq_redis_url, ServeMux(), queues={asyncq_queue: 1}, health_port=0)
    assert worker.health_port is None
    async with worker:
        port = worker.health_port
        assert port
        assert (await probe(port, "/readyz"))[0] == 200
        assert (await probe(port, "/livez"))[0] == 200
        worker.stop()
        assert (await answers(port, "/readyz", 503))["status"] == "stopping"
    assert worker.health_port is None
    with pytest.raises(OSError):
        await probe(port, "/livez")  # closed with the worker


async def test_a_port_in_use_is_a_startup_error_naming_it(
    asyncq_redis_url: str, asyncq_queue: str,
) -> None:
    first = Worker(asyncq_redis_url, ServeMux(), queues={asyncq_queue: 1}, health_port=0)
    async with first:
        second = Worker(asyncq_redis_url, ServeMux(), queues={asyncq_queue: 1},
                        health_port=first.health_port)
        with pytest.raises(Exception, match=f"cannot serve health probes on 127.0.0.1:"
                                            f"{first.health_port}"):
            await second.run(handle_signals=False)


def test_bad_health_settings_are_refused_saying_what_to_pass() -> None:
    with pytest.raises(ValueError, match="health_port must be a TCP port"):
        Worker("redis://127.0.0.1:1/0", ServeMux(), health_port=70000)
    with pytest.raises(ValueError, match="stall_timeout"):
        Worker("redis://127.0.0.1:1/0", ServeMux(), stall_timeout=0)


async def test_loop_lag_and_stalls_are_metrics_and_repeated_stalls_log_once(
    asyncq_redis_url: str, asyncq_client: Client, asyncq_queue: str,
) -> None:
    registry = CollectorRegistry()
    mux = ServeMux()

    @mux.handler("stall")
    async def stall(task: Task) -> None:
        import time
        time.sleep(0.4)  # noqa: ASYNC251 (the mistake being measured)

    worker = Worker(asyncq_redis_url, mux, queues={asyncq_queue: 1}, stall_warning=0.2,
                    metrics=WorkerMetrics(registry), concurrency=1)
    with structlog.testing.capture_logs() as logs:
        await run_stalls(worker, asyncq_client, asyncq_queue, registry)
    # Three stalls of the same task type within a minute: one warning.
    blocked = [e for e in logs if e["event"].startswith("event loop blocked")
               and e.get("task_type") == "stall"]
    assert len(blocked) == 1, blocked


async def run_stalls(worker: Worker, client: Client, queue: str,
                     registry: CollectorRegistry) -> None:
    async with worker:
        for _ in range(3):
            await client.enqueue("stall", queue=queue)

        def stalls() -> float:
            found = samples(generate_latest(registry).decode())
            return found.get(key("asyncq_worker_event_loop_stalls_total"), 0)
        await wait_until(lambda: stalls() >= 3, timeout=15, message="3 stalls counted")
        found = samples(generate_latest(registry).decode())
        assert found[key("asyncq_worker_event_loop_lag_seconds_count")] > 0
        assert found[key("asyncq_worker_event_loop_lag_seconds_bucket", le="+Inf")] > 0
        assert found[key("asyncq_worker_event_loop_lag_seconds_bucket", le="0.1")] < \
            found[key("asyncq_worker_event_loop_lag_seconds_count")]
        assert 0 <= found[key("asyncq_worker_event_loop_blocked_seconds")] < 10
        assert worker.loop_watch.stalls >= 3
