"""``asyncq web``: serve the web dashboard with uvicorn, on loopback unless told otherwise.

A host other than loopback without auth is refused (anyone who reaches the port could delete
every task) unless ``--allow-public-without-auth`` says the operator means it. Requests are
answered only for the loopback names, the address listened on and each ``--allowed-host``
(any other ``Host``, such as a DNS-rebinding domain's, gets a 400). Redis unreachable
at start is said on stderr, not fatal: the dashboard answers 503 until Redis is back.
"""

from __future__ import annotations

import argparse
import os
import sys
from typing import Any

from .._defaults import WEB_HOST, WEB_PORT, WEB_TITLE
from ._common import CLIError, add_redis_args

PASSWORD_ENV = "ASYNCQ_WEB_PASSWORD"


def register(sub: Any) -> None:
    p: argparse.ArgumentParser = sub.add_parser(
        "web", help="serve the web dashboard (needs the web extra: pip install 'asyncq[web]')")
    add_redis_args(p)
    p.add_argument("--host", default=WEB_HOST,
                   help=f"address to listen on (default {WEB_HOST}: loopback)")
    p.add_argument("--port", type=int, default=WEB_PORT, help=f"default {WEB_PORT}")
    p.add_argument("--read-only", action="store_true", help="show, but allow no action")
    p.add_argument("--basic-auth", metavar="USER:PASSWORD", default=None,
                   help=f"require HTTP basic auth; USER alone takes the password from "
                        f"${PASSWORD_ENV}")
    p.add_argument("--title", default=WEB_TITLE,
                   help=f"shown in the header (default {WEB_TITLE})")
    p.add_argument("--root-path", default="",
                   help="the path prefix a reverse proxy serves the dashboard under")
    p.add_argument("--allowed-origin", action="append", default=[], metavar="ORIGIN",
                   help="accept actions posted from this origin (scheme://host[:port]) besides "
                        "the request's own host: behind a proxy that rewrites Host; repeatable")
    p.add_argument("--allowed-host", action="append", default=[], metavar="HOST",
                   help="answer requests for this Host name besides the loopback names and "
                        "--host ('ops.example.com', '.example.com' for a domain and its "
                        "subdomains, '*' for any); other names get a 400; repeatable")
    p.add_argument("--allow-public-without-auth", action="store_true",
                   help="listen on a non-loopback address without --basic-auth")
    p.set_defaults(func=cmd_web)


def is_loopback(host: str) -> bool:
    """Whether ``host`` names this machine only (localhost, 127.0.0.0/8, ::1)."""
    import ipaddress

    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def parse_basic_auth(value: str | None) -> tuple[str, str] | None:
    """``user:password``, or ``user`` with the password in $ASYNCQ_WEB_PASSWORD."""
    if value is None:
        return None
    user, sep, password = value.partition(":")
    if not sep:
        password = os.environ.get(PASSWORD_ENV, "")
        if not password:
            raise CLIError(f"--basic-auth {user!r} has no password: give USER:PASSWORD or "
                           f"set {PASSWORD_ENV}")
    if not user or not password:
        raise CLIError("--basic-auth expects USER:PASSWORD, both non-empty")
    return user, password


def cmd_web(args: argparse.Namespace) -> int:
    credentials = parse_basic_auth(args.basic_auth)
    if credentials is None and not is_loopback(args.host) and not args.allow_public_without_auth:
        raise CLIError(f"refusing to serve the dashboard on {args.host} without auth: add "
                       f"--basic-auth USER:PASSWORD (or --allow-public-without-auth)")
    if not 0 < args.port < 65536:
        raise CLIError(f"--port must be 1-65535, got {args.port}")
    import asyncio

    from .._broker import check_reachable
    from .._errors import BrokerError

    try:
        import uvicorn

        from ..web import basic_auth, create_app
    except ImportError as exc:
        raise CLIError(f"{exc}; asyncq web needs the web extra: pip install 'asyncq[web]'"
                       ) from None
    auth = basic_auth(*credentials) if credentials else None
    try:
        app = create_app(args.redis_url, read_only=args.read_only, auth=auth, title=args.title,
                         allowed_origins=args.allowed_origin,
                         allowed_hosts=[args.host, *args.allowed_host])
    except (ValueError, TypeError) as exc:
        raise CLIError(str(exc)) from None
    try:
        asyncio.run(check_reachable(args.redis_url))
    except (ValueError, TypeError) as exc:  # a malformed URL: nothing to wait for
        raise CLIError(str(exc)) from None
    except BrokerError as exc:
        if not exc.transient:
            raise CLIError(str(exc)) from None
        # Redis restarting or not up yet: serve anyway, pages answer 503 until it answers.
        print(f"asyncq web: {str(exc).rstrip('.')}; serving anyway: pages answer 503 until "
              f"Redis is back", file=sys.stderr, flush=True)
    print(f"asyncq web: http://{args.host}:{args.port}{args.root_path}/"
          f"{' (read-only)' if args.read_only else ''}", flush=True)
    if not is_loopback(args.host) and not args.allowed_host:
        print(f"asyncq web: only requests for {args.host} and the loopback names are answered; "
              f"add --allowed-host NAME for each name browsers reach the dashboard by",
              file=sys.stderr, flush=True)
    uvicorn.run(app, host=args.host, port=args.port, root_path=args.root_path,
                log_level="warning", timeout_graceful_shutdown=3)
    return 0
