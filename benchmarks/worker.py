"""Worker process entry: ``python -m benchmarks.worker --lib NAME --url URL ...``.

Started by the driver as a separate OS process, in the library's own venv. Logging stays at
WARNING for every library (no per-task log lines), then the library's worker runs until killed.
"""

from __future__ import annotations

import argparse
import logging
import os

from benchmarks import _probe
from benchmarks.adapters import load


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--lib", required=True)
    p.add_argument("--url", required=True)
    p.add_argument("--concurrency", type=int, default=100)
    p.add_argument("--loop", choices=["asyncio", "uvloop"], default="asyncio")
    args = p.parse_args()
    os.environ.setdefault("BENCH_REDIS_URL", args.url)
    logging.basicConfig(level=logging.WARNING)
    adapter = load(args.lib)
    _probe.install()
    adapter.run_worker(args.url, args.concurrency, args.loop)


if __name__ == "__main__":
    main()
