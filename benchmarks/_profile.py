"""Summaries of py-spy collapsed-stack files (``--format raw``), main thread only."""

from __future__ import annotations

import re
from collections import Counter
from pathlib import Path
from typing import Any

# Frames every stack shares (interpreter start, the event loop's own machinery, the harness):
# left out of the inclusive ranking so the library's own frames show.
_GENERIC = re.compile(r"<frozen|runpy|asyncio/(base_events|runners|events)\.py|"
                      r"benchmarks/(worker|adapters/__init__)\.py|Adapter\.run_worker \(")
_FRAME = re.compile(r"^(?P<fn>.*) \((?P<file>.*?)(?::\d+)?\)$")


def _short(frame: str) -> str:
    m = _FRAME.match(frame)
    if not m:
        return frame
    file = m["file"].split("site-packages/")[-1]
    file = re.sub(r"^.*?/(asyncq|benchmarks)/", r"\1/", file)
    return f"{m['fn']} ({file})"


def summarize(path: Path, top: int = 30) -> dict[str, Any]:
    """Top functions by own samples and by inclusive samples, as % of main-thread samples."""
    own: Counter[str] = Counter()
    incl: Counter[str] = Counter()
    total = 0
    idle = 0
    for line in path.read_text(errors="replace").splitlines():
        stack, _, count = line.rstrip().rpartition(" ")
        if not stack or not count.isdigit():
            continue
        frames = stack.split(";")
        if "_run_module_as_main" not in frames[0]:
            continue  # other threads (the probe's reporter)
        n = int(count)
        total += n
        names = [_short(f) for f in frames]
        own[names[-1]] += n
        if "select (selectors.py)" in names[-1] or "run_forever" in names[-1]:
            idle += n
        for name in set(names):
            if not _GENERIC.search(name):
                incl[name] += n
    if not total:
        return {"samples": 0}

    def pct(c: Counter[str]) -> list[tuple[str, float]]:
        return [(k, round(100 * v / total, 1)) for k, v in c.most_common(top)]

    return {"samples": total, "idle_pct": round(100 * idle / total, 1), "self": pct(own),
            "inclusive": pct(incl)}
