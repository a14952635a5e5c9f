"""Rendering a page: the Jinja environment (autoescaped, strict), the context every page
shares (base path, title, CSRF token, flash message) and the links built from the base path,
so the dashboard works mounted under any path and behind a proxy's ``root_path``."""

from __future__ import annotations

from typing import Any
from urllib.parse import urlencode

import jinja2
from starlette.requests import Request
from starlette.responses import HTMLResponse

from .. import __version__
from . import _format
from ._state import Dashboard

ENV = jinja2.Environment(
    loader=jinja2.PackageLoader("asyncq.web", "templates"),
    autoescape=True,
    undefined=jinja2.StrictUndefined,
    trim_blocks=True,
    lstrip_blocks=True,
)
ENV.filters.update(bytes=_format.human_bytes, duration=_format.human_duration,
                   when=_format.when, ago=_format.ago, run_length=_format.run_length,
                   run_summary=_format.run_summary, time_limit=_format.time_limit)
ENV.globals.update(error_rate=_format.error_rate, version=__version__)


def dashboard(request: Request) -> Dashboard:
    dash: Dashboard = request.app.state.dashboard
    return dash


def base_path(request: Request) -> str:
    """Where the dashboard is mounted (``""`` at the root): every link starts with it."""
    return str(request.scope.get("root_path") or "").rstrip("/")


def link(request: Request, path: str, **params: object) -> str:
    """``base + path`` with the query ``params`` that are not None."""
    query = urlencode({k: v for k, v in params.items() if v is not None})
    return f"{base_path(request)}{path}" + (f"?{query}" if query else "")


def render(request: Request, template: str, context: dict[str, Any],
           status_code: int = 200) -> HTMLResponse:
    dash = dashboard(request)
    live = context.pop("live", None)  # the query of /live and /events, None: a static page
    page = {
        "request": request,
        "base": base_path(request),
        "title": dash.settings.title,
        "read_only": dash.settings.read_only,
        "csrf": request.scope.get("state", {}).get("csrf", ""),
        "flash_ok": request.query_params.get("ok"),
        "flash_error": request.query_params.get("error"),
        "here": request.url.path + (f"?{request.url.query}" if request.url.query else ""),
        "link": lambda path, **params: link(request, path, **params),
        **context,
        "live": live is not None,
        "live_query": urlencode({k: v for k, v in (live or {}).items() if v is not None},
                                doseq=True),
    }
    html = ENV.get_template(template).render(page)
    return HTMLResponse(html, status_code, headers={"Cache-Control": "no-store"})


def render_fragment(template: str, context: dict[str, Any]) -> str:
    return ENV.get_template(template).render(context)
