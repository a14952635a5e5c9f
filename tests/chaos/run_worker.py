"""Run one asyncq worker process for the chaos suite.

``python tests/chaos/run_worker.py --redis-url URL --options JSON`` runs
``tests.chaos.chaosapp:mux`` with the worker options in JSON, like ``asyncq worker`` does (same
logging set-up, signals, exit code), but with every ``WorkerConfig`` option available, plus:

* ``"retry_delay_ms": N`` — a constant retry delay (a callable can't be passed as JSON).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from asyncq import Worker  # noqa: E402
from asyncq._cli._worker_cmd import _run_loop  # noqa: E402
from asyncq._log_setup import configure_logging  # noqa: E402
from tests.chaos.chaosapp import mux  # noqa: E402


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--redis-url", required=True)
    parser.add_argument("--options", default="{}")
    parser.add_argument("--log-level", default="info")
    args = parser.parse_args()
    options: dict[str, Any] = json.loads(args.options)
    delay_ms = options.pop("retry_delay_ms", None)
    if delay_ms is not None:
        options["retry_delay"] = lambda n, exc, task: delay_ms / 1000
    configure_logging(args.log_level, "json")
    worker = Worker(args.redis_url, mux, **options)
    _run_loop(worker.run())
    return 0


if __name__ == "__main__":
    sys.exit(main())
