"""The A/B guard's numbers: which metrics each scenario reports, their medians, spreads and
B/A ratios, and the printed table (stdlib only, no I/O: kept apart so the maths is easy to
check by hand)."""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class Metric:
    """One number of one scenario's driver result (``key`` is a dotted path into it)."""

    scenario: str
    key: str
    label: str
    unit: str
    higher_better: bool

    @property
    def name(self) -> str:
        return f"{self.scenario}.{self.key}"


_CPU = "µs/task"
METRICS: tuple[Metric, ...] = (
    Metric("drain", "tasks_s", "drain no-op", "tasks/s", True),
    Metric("drain", "worker_cpu_us_per_task", "  worker CPU", _CPU, False),
    Metric("drain", "redis_cpu_us_per_task", "  redis-server CPU", _CPU, False),
    Metric("drain_call", "tasks_s", "drain, handler makes 1 Redis call", "tasks/s", True),
    Metric("drain_call", "worker_cpu_us_per_task", "  worker CPU", _CPU, False),
    Metric("drain_call", "redis_cpu_us_per_task", "  redis-server CPU", _CPU, False),
    Metric("enqueue", "single.ops_s", "single awaited enqueue", "tasks/s", True),
    Metric("enqueue", "single.vs_bare_evalsha", "  vs bare EVALSHA, same process", "x", True),
    Metric("enqueue", "single.client_cpu_us_per_task", "  producer CPU", _CPU, False),
    Metric("enqueue", "single.redis_cpu_us_per_task", "  redis-server CPU", _CPU, False),
    Metric("enqueue", "bulk.ops_s", "enqueue_many, chunks of 1000", "tasks/s", True),
    Metric("producers", "ops_s", "100 concurrent producers", "tasks/s", True),
    Metric("producers", "vs_bare_evalsha", "  vs bare EVALSHA, same process", "x", True),
    Metric("producers", "client_cpu_us_per_task", "  producer CPU", _CPU, False),
    Metric("producers", "redis_cpu_us_per_task", "  redis-server CPU", _CPU, False),
    Metric("producers", "p99_ms", "  call p99", "ms", False),
    Metric("latency", "p50_ms", "idle pickup p50 (enqueue -> start)", "ms", False),
    Metric("latency", "p99_ms", "idle pickup p99", "ms", False),
)


def metrics_of(scenario: str) -> list[Metric]:
    return [m for m in METRICS if m.scenario == scenario]


def extract(result: dict[str, Any], key: str) -> float | None:
    """The number at dotted ``key`` of a driver result, None when absent or not a number."""
    value: Any = result
    for part in key.split("."):
        if not isinstance(value, dict):
            return None
        value = value.get(part)
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return float(value)


# Rounds whose pairs must all agree before the verdict drops its "?": all of 3 pairs on one
# side of 1 by chance alone is 1 in 4, all of 6 is 1 in 32.
SURE_PAIRS = 3


@dataclass
class Compared:
    """One metric over every round of both sides (failed runs left out)."""

    metric: Metric
    a: list[float]
    b: list[float]
    paired: list[float]  # B/A of the rounds where both sides have a value

    @property
    def a_median(self) -> float | None:
        return statistics.median(self.a) if self.a else None

    @property
    def b_median(self) -> float | None:
        return statistics.median(self.b) if self.b else None

    @property
    def ratio(self) -> float | None:
        """B's median over A's."""
        a, b = self.a_median, self.b_median
        if a is None or b is None or a == 0:
            return None
        return b / a

    @property
    def verdict(self) -> str:
        """"better" or "worse" (for B) when B beat, or lost to, A in every round's back-to-back
        pair, else "~"; with a "?" when fewer than ``SURE_PAIRS`` rounds say so."""
        if not self.paired:
            return "n/a"
        if all(r > 1 for r in self.paired):
            word = "better" if self.metric.higher_better else "worse"
        elif all(r < 1 for r in self.paired):
            word = "worse" if self.metric.higher_better else "better"
        else:
            return "~"
        return word if len(self.paired) >= SURE_PAIRS else word + "?"

    def as_json(self) -> dict[str, Any]:
        m = self.metric
        return {"scenario": m.scenario, "key": m.key, "label": m.label.strip(), "unit": m.unit,
                "better": "higher" if m.higher_better else "lower", "a": self.a, "b": self.b,
                "a_median": self.a_median, "b_median": self.b_median,
                "a_range": [min(self.a), max(self.a)] if self.a else None,
                "b_range": [min(self.b), max(self.b)] if self.b else None,
                "ratio_b_over_a": self.ratio, "paired_ratios": self.paired,
                "paired_range": [min(self.paired), max(self.paired)] if self.paired else None,
                "verdict": self.verdict}


def compare(metric: Metric, a: Sequence[float | None], b: Sequence[float | None]) -> Compared:
    """``a[i]``/``b[i]`` are round i's values (None: that run failed or has no such number)."""
    paired = [y / x for x, y in zip(a, b, strict=False)
              if x is not None and y is not None and x != 0]
    return Compared(metric, [x for x in a if x is not None], [y for y in b if y is not None],
                    paired)


def fmt(value: float | None) -> str:
    """A number with as many digits as its size deserves."""
    if value is None:
        return "-"
    size = abs(value)
    if size >= 1000:
        return f"{value:,.0f}".replace(",", " ")
    if size >= 100:
        return f"{value:.0f}"
    if size >= 10:
        return f"{value:.1f}"
    return f"{value:.2f}"


def cell(values: list[float], rounds: int) -> str:
    """``median (min-max)``, with ``[k/N]`` when only k of N rounds gave a value."""
    if not values:
        return "-"
    text = f"{fmt(statistics.median(values))} ({fmt(min(values))}-{fmt(max(values))})"
    if len(values) < rounds:
        text += f" [{len(values)}/{rounds}]"
    return text


def table(rows: list[Compared], rounds: int, a_name: str, b_name: str) -> str:
    """The A/B table: one line per metric, medians with min-max, B/A and the verdict."""
    head = ["metric", "unit", "better", f"A {a_name}", f"B {b_name}", "B/A",
            "per round", "B is"]
    lines: list[list[str]] = [head]
    for c in rows:
        m = c.metric
        ratio = "-" if c.ratio is None else f"{c.ratio:.3f}"
        paired = f"{min(c.paired):.2f}-{max(c.paired):.2f}" if c.paired else "-"
        lines.append([m.label, m.unit, "↑ higher" if m.higher_better else "↓ lower",
                      cell(c.a, rounds), cell(c.b, rounds), ratio, paired, c.verdict])
    widths = [max(len(line[i]) for line in lines) for i in range(len(head))]
    right = {3, 4, 5, 6}
    out = []
    for n, line in enumerate(lines):
        out.append("  ".join(v.rjust(w) if i in right else v.ljust(w)
                             for i, (v, w) in enumerate(zip(line, widths, strict=True)))
                   .rstrip())
        if n == 0:
            out.append("  ".join("-" * w for w in widths))
    return "\n".join(out)


LEGEND = (
    "Medians over the rounds, (min-max) across them. B/A is B's median over A's: for ↑ rows\n"
    "above 1 means B is better, for ↓ rows (CPU per task, latency) below 1 does. \"per round\":\n"
    "the lowest and highest B/A of one round's A and B runs, which ran back to back. \"B is\"\n"
    "better / worse: so in every round; ~: not in every round (within the noise, not a\n"
    "finding); a ? when fewer than 3 rounds say so. [k/N]: only k of N runs gave a number.")
