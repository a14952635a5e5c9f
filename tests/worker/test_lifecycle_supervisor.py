"""``asyncq worker --processes 2`` with one process frozen (SIGSTOP: it answers nothing, as in
a long call holding the GIL): the pod's /livez follows --stall-timeout, not the 2 s a probe
waits for an answer; its /metrics still answers, the frozen process reported down, and only
the first scrape after the freeze waits for it."""

from __future__ import annotations

import json
import os
import signal
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

import pytest

from asyncq.testing import wait_until
from tests.helpers.ports import free_ports
from tests.helpers.processes import log_events, worker_process

pytestmark = pytest.mark.anyio

STALL_TIMEOUT = 6.0


def get(port: int, path: str) -> tuple[int, bytes] | None:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=30) as reply:
            return int(reply.status), bytes(reply.read())
    except urllib.error.HTTPError as exc:
        return int(exc.code), bytes(exc.read())
    except OSError:
        return None


def live(port: int) -> tuple[int, dict[str, Any]] | None:
    answer = get(port, "/livez")
    return None if answer is None else (answer[0], json.loads(answer[1]))


async def test_a_frozen_process_fails_livez_after_its_stall_timeout_and_not_the_scrape(
    asyncq_redis_url: str, asyncq_queue: str, tmp_path: Path,
) -> None:
    log = tmp_path / "worker.log"
    health, metrics = free_ports(2)
    async with worker_process(asyncq_redis_url, asyncq_queue, log, "--processes", "2",
                              "--health-port", str(health), "--metrics-port", str(metrics),
                              "--stall-timeout", str(STALL_TIMEOUT)) as proc:
        def ready() -> bool:
            assert proc.returncode is None, log.read_text()
            answer = get(health, "/readyz")
            return answer is not None and answer[0] == 200

        await wait_until(ready, timeout=60, message="both processes ready")
        first = get(metrics, "/metrics")
        assert first is not None and b'process_up{process="2"} 1' in first[1]
        pids = {e["slot"]: e["pid"] for e in log_events(log)
                if e["event"] == "worker process started"}
        frozen = pids[2]
        answer = live(health)
        assert answer is not None and answer[0] == 200, answer
        os.kill(frozen, signal.SIGSTOP)
        try:
            stopped = time.monotonic()
            def stalled() -> dict[str, Any] | None:
                answer = live(health)
                return answer[1] if answer is not None and answer[0] == 503 else None

            body = await wait_until(stalled, timeout=60, interval=0.5,
                                    message="/livez fails for the frozen process")
            # Not before its stall_timeout (a loaded machine only makes it later).
            assert time.monotonic() - stopped >= STALL_TIMEOUT
            assert body["processes"]["2"]["status"] == "not answering"
            assert body["processes"]["2"]["stall_timeout_s"] == STALL_TIMEOUT
            assert body["processes"]["1"]["status"] == "ok"
            # The scrape answers: the frozen process is down, the other one's samples are in;
            # after the first scrape that waited for it, one does not wait as long.
            for _ in range(2):
                began = time.monotonic()
                scraped = get(metrics, "/metrics")
                took = time.monotonic() - began
                assert scraped is not None and scraped[0] == 200
                text = scraped[1]
                assert b'process_up{process="2"} 0' in text
                assert b'process_up{process="1"} 1' in text
            assert took < 4.5, took  # (a scrape used to wait 5 s for it, every time)
        finally:
            os.kill(frozen, signal.SIGCONT)

        def alive() -> bool:
            answer = live(health)
            return answer is not None and answer[0] == 200

        await wait_until(alive, timeout=60, message="/livez passes once it runs again")
        proc.send_signal(signal.SIGTERM)
        assert await proc.wait() == 0, log.read_text()
