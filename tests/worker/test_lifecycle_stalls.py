"""A blocked event loop, seen from a real ``asyncq worker`` process: the stall that reaches the
liveness threshold is named (task and line) before /livez fails, whatever the rate limit of
stall warnings; a Redis call that timed out because the loop was blocked is not counted (nor
logged) as Redis failing."""

from __future__ import annotations

import os
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

import pytest

from asyncq import Client
from asyncq.testing import wait_until
from tests.helpers.ports import free_port
from tests.helpers.processes import log_events, worker_process

pytestmark = pytest.mark.anyio

APP = "tests.worker.lifecycle_handlers:mux"


def get(port: int, path: str) -> tuple[int, bytes] | None:
    """Status and body of GET ``path``; None when nothing answers."""
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=5) as reply:
            return int(reply.status), bytes(reply.read())
    except urllib.error.HTTPError as exc:
        return int(exc.code), bytes(exc.read())
    except OSError:
        return None


def events(log: Path, name: str) -> list[dict[str, Any]]:
    return [e for e in log_events(log) if e["event"].startswith(name)]


async def test_a_stall_past_the_liveness_threshold_is_named_whatever_the_rate_limit(
    asyncq_redis_url: str, asyncq_client: Client, asyncq_queue: str, tmp_path: Path,
) -> None:
    log = tmp_path / "worker.log"
    port = free_port()
    async with worker_process(asyncq_redis_url, asyncq_queue, log, "--concurrency", "1",
                              "--stall-warning", "0.3", "--stall-timeout", "3",
                              "--health-port", str(port), target=APP) as proc:
        # A first short stall of the type is warned about; the rate limit (one warning per
        # minute per task type) then holds back the warning of the next one.
        await asyncq_client.enqueue("lifecycle:block", {"s": 0.6}, queue=asyncq_queue)
        await wait_until(lambda: events(log, "event loop turned again"), timeout=30,
                         message="the first stall over")
        long = await asyncq_client.enqueue("lifecycle:block", {"s": 8}, queue=asyncq_queue)

        def stalled() -> bool:
            assert proc.returncode is None, log.read_text()
            answer = get(port, "/livez")
            return answer is not None and answer[0] == 503

        await wait_until(stalled, timeout=30, message="/livez says stalled")
        # Named by the time /livez fails: the task, and the line it blocks at.
        # (Only the lines naming it: on a loaded machine the process may also miss the CPU for
        # a moment.)
        named = [e for e in events(log, "liveness threshold reached")
                 if e.get("task_id") == long.id]
        assert len(named) == 1, log.read_text()
        assert named[0]["task_type"] == "lifecycle:block"
        assert "lifecycle_handlers.py" in named[0]["where"]
        # The line saying it is over names it too.
        await wait_until(lambda: [e for e in events(log, "event loop turned again")
                                  if e.get("task_id") == long.id], timeout=30,
                         message="the long stall over, named")


async def test_a_timeout_caused_by_a_loop_stall_is_not_a_redis_error(
    asyncq_redis_url: str, asyncq_client: Client, asyncq_queue: str, tmp_path: Path,
) -> None:
    log = tmp_path / "worker.log"
    port = free_port()
    env = {**os.environ, "LIFECYCLE_REDIS_URL": asyncq_redis_url}
    async with worker_process(f"{asyncq_redis_url}?socket_timeout=2", asyncq_queue, log,
                              "--concurrency", "4", "--idle-poll-interval", "0.05",
                              "--heartbeat-interval", "1", "--stall-warning", "0.5",
                              "--metrics-port", str(port), target=APP, env=env) as proc:
        # Redis holds the worker's calls for 1.5 s (a heartbeat, sent in that time, gives up
        # after 2 s, a read after 2 s too); the worker's loop is blocked for 4 s from 1.35 s
        # on, so it reads their replies only after their timers ran out.
        await asyncq_client.enqueue("lifecycle:block_in_flight", {"pause": 1.5, "s": 4},
                                    queue=asyncq_queue)
        await wait_until(lambda: events(log, "event loop turned again"), timeout=30,
                         message="the stall over")
        # A task run after it: the worker is back to fetching.
        done = await asyncq_client.enqueue("lifecycle:block", {"s": 0}, queue=asyncq_queue)
        await asyncq_client.wait(done, timeout=60)
        assert proc.returncode is None, log.read_text()
        answer = get(port, "/metrics")
    assert answer is not None and answer[0] == 200
    # No call was taken for Redis failing ...
    assert not events(log, "redis calls failing"), log.read_text()
    errors = [line for line in answer[1].decode().splitlines()
              if line.startswith("asyncq_worker_redis_errors_total")]
    assert errors and all(line.endswith(" 0.0") for line in errors), errors
    # ... though the stall did make calls time out (else this test proves nothing).
    assert events(log, "redis call timed out while the event loop was blocked"), \
        log.read_text()
