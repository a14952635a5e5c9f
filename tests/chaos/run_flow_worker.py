"""Run one worker process of ``tests.workflows.flowapp:mux`` for the workflow chaos cases:
``python tests/chaos/run_flow_worker.py URL JSON-OPTIONS`` (the app's ledger is on
``$WF_REDIS_URL``)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from asyncq import Worker  # noqa: E402
from asyncq._cli._worker_cmd import _run_loop  # noqa: E402
from asyncq._log_setup import configure_logging  # noqa: E402
from tests.workflows.flowapp import mux  # noqa: E402

if __name__ == "__main__":
    configure_logging("warning", "json")
    options = json.loads(sys.argv[2])
    delay = options.pop("retry_delay_s", None)
    if delay is not None:
        options["retry_delay"] = lambda n, exc, task: delay
    _run_loop(Worker(sys.argv[1], mux, **options).run())
