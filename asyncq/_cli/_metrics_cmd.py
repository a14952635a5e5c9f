"""``asyncq metrics``: serve the queue metrics of the whole deployment to Prometheus."""

from __future__ import annotations

import argparse
import sys
from typing import Any

from .._defaults import METRICS_HOST, METRICS_PORT
from ._common import CLIError, add_log_args, add_redis_args


def register(sub: Any) -> None:
    p: argparse.ArgumentParser = sub.add_parser(
        "metrics", help="serve queue metrics to Prometheus",
        description="Serve every queue's metrics (sizes, latency, counters, live workers) in "
                    "Prometheus's text format, read from Redis at each scrape. One exporter "
                    "serves the whole deployment. Needs: pip install 'asyncq[prometheus]'.")
    add_redis_args(p)
    p.add_argument("--host", default=METRICS_HOST,
                   help=f"address to listen on (default {METRICS_HOST}: this machine only)")
    p.add_argument("--port", type=int, default=METRICS_PORT,
                   help=f"port (default {METRICS_PORT})")
    p.add_argument("--per-host", action="store_true",
                   help="label the live workers' totals by host (asyncq_host_servers, "
                        "asyncq_server_concurrency, asyncq_server_active_tasks); off by "
                        "default: under Kubernetes each pod is a new host, so a new series")
    p.add_argument("--alert-rules", action="store_true",
                   help="print the Prometheus alert rules shipped with asyncq (for "
                        "rule_files: in prometheus.yml) and exit")
    add_log_args(p)
    p.set_defaults(func=run)


def alert_rules() -> str:
    """The alert rules file shipped in the package (asyncq/metrics/alerts.yml), read without
    importing asyncq.metrics, so it prints without the prometheus extra."""
    from importlib.resources import files

    return (files("asyncq") / "metrics" / "alerts.yml").read_text(encoding="utf-8")


def run(args: argparse.Namespace) -> int:
    if args.alert_rules:
        sys.stdout.write(alert_rules())
        return 0
    from .._log_setup import configure_logging

    configure_logging(args.log_level, args.log_format)
    try:
        import uvicorn

        from ..metrics import queue_metrics_app
    except ImportError as exc:
        raise CLIError(f"asyncq metrics needs the prometheus extra: pip install "
                       f"'asyncq[prometheus]' ({exc})") from exc
    app = queue_metrics_app(args.redis_url, per_host=args.per_host)
    print(f"asyncq metrics on http://{args.host}:{args.port}/metrics", flush=True)
    uvicorn.run(app, host=args.host, port=args.port, log_level="warning", lifespan="on")
    return 0
