"""The Celery side of workflow_chord.py, run inside benchmarks/.venv-peers/celery (Celery 5,
Redis broker and Redis result backend on the benchmark's Redis).

``python -m benchmarks._wf_chord_celery app``-style use: ``celery -A
benchmarks._wf_chord_celery worker --pool threads`` runs the tasks; ``python -m
benchmarks._wf_chord_celery N`` sends one chord of N no-op members and prints the time from
the start of the send to the start of the callback, as JSON."""

from __future__ import annotations

import json
import os
import sys
import time

import redis
from celery import Celery, chord

URL = os.environ.get("BENCH_REDIS_URL", "redis://127.0.0.1:6379")
STAMP = "bench:wfchord:celery_callback_started"
app = Celery("wfchord", broker=f"{URL}/1", backend=f"{URL}/2")
app.conf.update(worker_prefetch_multiplier=4, task_acks_late=False,
                result_expires=3600, worker_hijack_root_logger=False)


@app.task(name="wfchord.noop")
def noop(i: int) -> None:
    return None


@app.task(name="wfchord.callback")
def callback(results: list[object]) -> int:
    redis.Redis.from_url(f"{URL}/0").set(STAMP, repr(time.time()))
    return len(results)


def main(n: int) -> None:
    r = redis.Redis.from_url(f"{URL}/0")
    r.delete(STAMP)
    started = time.time()
    result = chord(noop.s(i) for i in range(n))(callback.s())
    sent = time.time()
    deadline = time.time() + 600
    while not r.exists(STAMP):
        if time.time() > deadline:
            raise TimeoutError("the chord callback never started")
        time.sleep(0.005)
    began = float(r.get(STAMP) or 0)
    value = result.get(timeout=600)
    print(json.dumps({"enqueue_s": sent - started, "to_callback_start_s": began - started,
                      "value": value}))


if __name__ == "__main__":
    main(int(sys.argv[1]))
