"""Where the stand-alone benchmark scripts save what they measured."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

RESULTS = Path(__file__).resolve().parent / "results"


def save_result(name: str, doc: Any) -> Path:
    """Write ``doc`` as ``benchmarks/results/<name>-<UTC time>.json``, print and return the
    path."""
    RESULTS.mkdir(parents=True, exist_ok=True)
    path = RESULTS / f"{name}-{datetime.now(UTC).strftime('%Y%m%dT%H%M%SZ')}.json"
    path.write_text(json.dumps(doc, indent=2) + "\n")
    print(f"\nsaved {path}")
    return path
