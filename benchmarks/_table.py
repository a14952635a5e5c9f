"""The results table (Markdown) and the target ratios (issues 6 and 19), from a results
document."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

LIB_ORDER = ["asyncq", "asyncq-asynq", "asynq-go", "arq", "celery", "saq", "streaq", "taskiq"]
# The Python peers: "vs best peer" and the issue-6 targets compare asyncq with these. The Go
# reference implementation gets columns of its own (asyncq, and asyncq on asynq's wire, vs it).
PEERS = ["arq", "celery", "saq", "streaq", "taskiq"]
GO = "asynq-go"
WIRE = "asyncq-asynq"
HEADERS = {WIRE: "asyncq (asynq wire)", GO: "asynq (Go)"}

Getter = Callable[[dict[str, Any]], float | str | None]


@dataclass
class Row:
    key: str
    label: str
    scenario: str
    get: Getter
    fmt: str = "{:,.0f}"
    higher_better: bool | None = True  # None: informational, no ratio
    target: str = ""
    check: Callable[[float | None, float | None, dict[str, float]], bool | None] | None = None
    # How asyncq compares with asynq (Go) on this row: "higher" or "lower" is better, None for
    # no ratio; by default what higher_better says.
    vs_go: str | None = "auto"

    def go_direction(self) -> str | None:
        if self.vs_go != "auto":
            return self.vs_go
        return {True: "higher", False: "lower", None: None}[self.higher_better]


def _ratio_at_least(k: float) -> Callable[[float | None, float | None, dict[str, float]],
                                          bool | None]:
    def check(ratio: float | None, value: float | None, peers: dict[str, float]) -> bool | None:
        return None if ratio is None else ratio >= k
    return check


def _at_most(limit: float) -> Callable[[float | None, float | None, dict[str, float]],
                                       bool | None]:
    def check(ratio: float | None, value: float | None, peers: dict[str, float]) -> bool | None:
        return None if value is None else value <= limit
    return check


def _vs_peer(peer: str, k: float) -> Callable[[float | None, float | None, dict[str, float]],
                                             bool | None]:
    """asyncq's value is at most ``k`` times ``peer``'s (a latency)."""
    def check(ratio: float | None, value: float | None, peers: dict[str, float]) -> bool | None:
        return None if value is None or peer not in peers else value <= k * peers[peer]
    return check


def _own_at_least(k: float) -> Callable[[float | None, float | None, dict[str, float]],
                                        bool | None]:
    """asyncq's own value (a ratio to its Redis ceiling) is at least ``k``."""
    def check(ratio: float | None, value: float | None, peers: dict[str, float]) -> bool | None:
        return None if value is None else value >= k
    return check


def _sub(*keys: str) -> Getter:
    def get(r: dict[str, Any]) -> float | str | None:
        cur: Any = r
        for k in keys:
            if not isinstance(cur, dict) or cur.get(k) is None:
                return None
            cur = cur[k]
        return cur  # type: ignore[no-any-return]
    return get


def _bulk(r: dict[str, Any]) -> float | str | None:
    if "bulk" in r and r["bulk"] is None:
        return "no bulk API"
    return _sub("bulk", "ops_s")(r)


def _flat(r: dict[str, Any]) -> float | str | None:
    if "flat" not in r:
        return None
    return "yes" if r["flat"] else "NO"


ROWS = [
    Row("enqueue_single", "enqueue: awaited single (ops/s)", "enqueue", _sub("single", "ops_s"),
        target=">= 1.5x best peer", check=_ratio_at_least(1.5)),
    Row("enqueue_single_vs_bare", "  single vs bare EVALSHA round trips, same process",
        "enqueue", _sub("single", "vs_bare_evalsha"), fmt="{:.0%}", higher_better=None,
        target=">= 85%", check=_own_at_least(0.85)),
    Row("bare_single", "  ceiling: bare EVALSHA one at a time, same process (ops/s)", "enqueue",
        _sub("bare_evalsha", "single_ops_s"), higher_better=None),
    Row("enqueue_single_p50", "  single enqueue call p50 (ms)", "enqueue",
        _sub("single", "p50_ms"), fmt="{:.3f}", higher_better=None, vs_go="lower"),
    Row("producers", "enqueue: 100 concurrent producers (ops/s)", "producers", _sub("ops_s")),
    Row("producers_vs_bare", "  vs the same 100 coroutines making bare EVALSHA calls",
        "producers", _sub("vs_bare_evalsha"), fmt="{:.2f}x", higher_better=None,
        target=">= 2x", check=_own_at_least(2.0)),
    Row("bare_concurrent", "  ceiling: bare EVALSHA, 100 coroutines (ops/s)", "producers",
        _sub("bare_evalsha", "concurrent_ops_s"), higher_better=None),
    Row("bare_pipelined", "  ceiling: bare EVALSHA pipelined x100 (ops/s)", "producers",
        _sub("bare_evalsha", "pipelined_ops_s"), higher_better=None),
    Row("producers_p99", "  per-call p99 (ms)", "producers", _sub("p99_ms"), fmt="{:.2f}",
        higher_better=None, vs_go="lower"),
    Row("producers_lone_p99", "  lone call p99 (ms)", "producers", _sub("lone_p99_ms"),
        fmt="{:.3f}", higher_better=None, vs_go="lower"),
    Row("producers_bare_p99", "  bare EVALSHA, 100 coroutines: per-call p99 (ms)", "producers",
        _sub("bare_evalsha", "concurrent_p99_ms"), fmt="{:.2f}", higher_better=None),
    Row("enqueue_bulk", "enqueue: bulk API, chunks of 1000 (ops/s)", "enqueue", _bulk,
        target=">= 2x streaq enqueue_many", check=_ratio_at_least(2.0)),
    Row("drain", "drain: no-op tasks, 1 worker, c=100 (tasks/s)", "drain", _sub("tasks_s"),
        target=">= 5x best peer", check=_ratio_at_least(5.0)),
    Row("drain_worker_cpu", "  drain: worker CPU per task (us)", "drain",
        _sub("worker_cpu_us_per_task"), higher_better=None, target="<= 45 us",
        check=_at_most(45.0), vs_go="lower"),
    Row("drain_redis_cpu", "  drain: redis-server CPU per task (us)", "drain",
        _sub("redis_cpu_us_per_task"), higher_better=None, vs_go="lower"),
    Row("drain_typed", "drain: no-op typed tasks (@mux.task), c=100 (tasks/s)", "drain_typed",
        _sub("tasks_s"), higher_better=None),
    Row("drain_typed_cpu", "  typed drain: worker CPU per task (us)", "drain_typed",
        _sub("worker_cpu_us_per_task"), higher_better=None),
    Row("drain_listened", "drain while one process listens to task events (tasks/s)",
        "drain_listened", _sub("tasks_s"), higher_better=None),
    Row("drain_listened_cpu", "  worker CPU per task, listened (us)", "drain_listened",
        _sub("worker_cpu_us_per_task"), higher_better=None),
    Row("drain_listened_redis_cpu", "  redis-server CPU per task, listened (us)",
        "drain_listened", _sub("redis_cpu_us_per_task"), higher_better=None),
    Row("io", "I/O drain: sleep(10 ms) tasks, c=100 (tasks/s)", "io", _sub("tasks_s"),
        target=">= 3x best peer", check=_ratio_at_least(3.0)),
    Row("io_pct", "  I/O drain: % of ideal (100 / 10 ms = 10,000/s)", "io", _sub("pct_ideal"),
        fmt="{:.1f}%", higher_better=None, target=">= 95%", check=_own_at_least(95.0),
        vs_go=None),
    Row("pickup_p50", "idle pickup: enqueue -> handler start p50 (ms)", "latency",
        _sub("p50_ms"), fmt="{:.2f}", higher_better=False, target="<= 0.7x taskiq p50",
        check=_vs_peer("taskiq", 0.7)),
    Row("pickup_p99", "idle pickup: p99 (ms)", "latency", _sub("p99_ms"), fmt="{:.2f}",
        higher_better=False, target="<= taskiq p99", check=_vs_peer("taskiq", 1.0)),
    Row("rt_p50", "enqueue and await the result, one caller: p50 (ms)", "roundtrip",
        _sub("rt_p50_ms"), fmt="{:.2f}", higher_better=False),
    Row("rt_p99", "  round trip p99 (ms)", "roundtrip", _sub("rt_p99_ms"), fmt="{:.2f}",
        higher_better=False),
    Row("resume_p50", "  handler start -> caller resumed p50 (ms)", "roundtrip",
        _sub("resume_p50_ms"), fmt="{:.2f}", higher_better=False),
    Row("resume_p99", "  handler start -> caller resumed p99 (ms)", "roundtrip",
        _sub("resume_p99_ms"), fmt="{:.2f}", higher_better=False),
    Row("rt_concurrent", "  100 callers at once (round trips/s)", "roundtrip",
        _sub("concurrent_applies_s")),
    Row("rss_start", "worker RSS at first task (MB)", "memory", _sub("rss_start_mb"),
        fmt="{:.1f}", higher_better=None, vs_go="lower"),
    Row("rss_peak", "worker RSS peak while draining (MB)", "memory", _sub("rss_peak_mb"),
        fmt="{:.1f}", higher_better=None, vs_go="lower"),
    Row("rss_end", "worker RSS after the drain (MB)", "memory", _sub("rss_end_mb"),
        fmt="{:.1f}", higher_better=None),
    Row("rss_drift", "  RSS after vs at 10% of the tasks", "memory",
        _sub("rss_end_vs_checkpoint_pct"), fmt="{:+.1f}%", higher_better=None,
        target="within +-10%"),
    Row("rss_flat", "  flat (+-10%)", "memory", _flat, higher_better=None),
    Row("memory_tasks_s", "  memory run: drain rate (tasks/s)", "memory", _sub("tasks_s"),
        higher_better=None, vs_go="higher"),
]


def _cell(row: Row, r: dict[str, Any] | None) -> tuple[str, float | None]:
    if r is None:
        return "—", None
    status = r.get("status")
    v = row.get(r)
    if status in ("timeout", "error") and v is None:
        return status, None
    if isinstance(v, str):
        return v, None
    if v is None:
        return "—", None
    text = row.fmt.format(v)
    if row.key == "enqueue_bulk" and (r.get("bulk") or {}).get("substitute"):
        text += "†"
    if r.get("partial"):
        text += "*"
    if status == "failed-check":
        text += "!"
    if status in ("timeout", "error"):
        text += f" ({status})"
    return text, float(v)


def _exactly_once(results: dict[str, dict[str, Any]], lib: str) -> str:
    bad = []
    seen = False
    for sc, per_lib in results.items():
        r = per_lib.get(lib)
        if r is None:
            continue
        eo = r.get("exactly_once")
        if eo is not None:
            seen = True
            if not eo["ok"]:
                bad.append(f"{sc}: {eo['executions']} runs/{eo['distinct']} distinct")
        if sc in ("enqueue", "producers") and r.get("status") in ("ok", "failed-check"):
            seen = True
            if not r.get("stored_ok"):
                bad.append(f"{sc}: stored count")
        drains = ("drain", "drain_typed", "drain_listened", "io", "memory")
        if sc in drains and r.get("pre_enqueue") is not None \
                and not r["pre_enqueue"].get("stored_ok"):
            bad.append(f"{sc}: stored count")
    if not seen:
        return "—"
    return "yes" if not bad else "NO (" + "; ".join(bad) + ")"


def _vs_go(direction: str | None, mine: float | None, go: float | None) -> float | None:
    """How far ahead of asynq (Go) ``mine`` is: above 1 asyncq is ahead (a higher rate, a
    lower latency, CPU or memory), below 1 Go is."""
    if direction is None or not mine or not go:
        return None
    return mine / go if direction == "higher" else go / mine


def render(doc: dict[str, Any]) -> tuple[str, dict[str, Any]]:
    results: dict[str, dict[str, Any]] = doc.get("results", {})
    libs = [lib for lib in LIB_ORDER
            if any(lib in per_lib for per_lib in results.values())]
    go_cols = [lib for lib in ("asyncq", WIRE) if GO in libs and lib in libs]
    header = ["metric", *(HEADERS.get(lib, lib) for lib in libs), "asyncq vs best peer",
              "target", "met", *(f"{HEADERS.get(lib, lib)} vs asynq (Go)" for lib in go_cols)]
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    summary: dict[str, Any] = {}
    for row in ROWS:
        per_lib = results.get(row.scenario)
        if not per_lib:
            continue
        cells: list[str] = []
        values: dict[str, float] = {}
        for lib in libs:
            text, v = _cell(row, per_lib.get(lib))
            cells.append(text)
            if v is not None:
                values[lib] = v
        mine = values.get("asyncq")
        peers = {lib: v for lib, v in values.items() if lib in PEERS}
        ratio: float | None = None
        ratio_text = ""
        if row.key == "enqueue_bulk":
            if mine and peers.get("streaq"):
                ratio = mine / peers["streaq"]
                ratio_text = f"{ratio:.2f}x streaq"
        elif row.higher_better is True and mine and peers:
            best = max(peers, key=lambda k: peers[k])
            ratio = mine / peers[best]
            ratio_text = f"{ratio:.2f}x {best}"
        elif row.higher_better is False and mine and peers:
            best = min(peers, key=lambda k: peers[k])
            ratio = peers[best] / mine
            ratio_text = f"{best} {peers[best]:.2f} ms ({ratio:.2f}x)"
        met = row.check(ratio, mine, peers) if row.check else None
        if row.key == "rss_drift" and mine is not None:
            met = abs(mine) <= 10.0
        met_text = "" if met is None else ("yes" if met else "NO")
        go_ratios = {lib: _vs_go(row.go_direction(), values.get(lib), values.get(GO))
                     for lib in go_cols}
        go_text = ["" if go_ratios[lib] is None else f"{go_ratios[lib]:.2f}x" for lib in go_cols]
        lines.append("| " + " | ".join([row.label, *cells, ratio_text, row.target, met_text,
                                        *go_text]) + " |")
        summary[row.key] = {"label": row.label, "values": values, "ratio": ratio,
                            "target": row.target, "met": met}
        if go_cols:
            summary[row.key]["vs_asynq_go"] = go_ratios
    eo = {lib: _exactly_once(results, lib) for lib in libs}
    lines.append("| " + " | ".join(["every task ran exactly once", *(eo[lib] for lib in libs),
                                    "", "", "", *("" for _ in go_cols)]) + " |")
    summary["exactly_once"] = eo

    out = ["\n".join(lines)]
    ceiling = doc.get("redis_ceiling")
    if ceiling and "error" not in ceiling:
        c50, p16, c1 = ceiling["c50"], ceiling["c50_P16"], ceiling["c1"]
        out.append(
            "Redis ceiling (redis-benchmark, 50 clients): "
            + ", ".join(f"{k} {v['rps']:,.0f}/s" for k, v in c50.items())
            + "; pipelined -P 16: "
            + ", ".join(f"{k} {v['rps']:,.0f}/s" for k, v in p16.items())
            + f"; EVALSHA from 1 client (one round trip at a time): "
              f"{c1['EVALSHA']['rps']:,.0f}/s")
    elif ceiling:
        out.append(f"Redis ceiling: {ceiling['error']}")
    legend = ("* partial: stopped by the scenario's time budget (see JSON); "
              "! a correctness check failed; — not run")
    if GO in libs:
        legend += ("; † asynq has no bulk API: 100 goroutines calling Client.Enqueue per chunk "
                   "of 1000; vs asynq (Go): above 1x asyncq is ahead (higher rate, lower "
                   "latency, CPU or memory), below 1x Go is")
    out.append(legend)
    if doc.get("skipped"):
        out.append("skipped: " + "; ".join(f"{k}: {v.splitlines()[0]}"
                                           for k, v in doc["skipped"].items()))
    return "\n\n".join(out), summary
