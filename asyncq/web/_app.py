"""``create_app``: the dashboard as a Starlette app, its routes, static files and lifespan."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Iterable

from starlette.applications import Starlette
from starlette.middleware import Middleware
from starlette.routing import Mount, Route
from starlette.staticfiles import StaticFiles

from .._broker import Broker, RedisLike
from .._defaults import WEB_TITLE
from .._errors import BrokerError
from . import _actions, _limit_actions, _live, _pages, _workflows
from ._security import AuthHook, SecurityMiddleware, check_hosts, check_origins
from ._state import Dashboard, Settings


def create_app(redis: RedisLike | Broker, *, read_only: bool = False,
               auth: AuthHook | None = None, title: str = WEB_TITLE,
               allowed_origins: Iterable[str] = (),
               allowed_hosts: Iterable[str] = ()) -> Starlette:
    """The dashboard: an ASGI app showing and operating the queues of ``redis`` (a URL, a
    ``redis.asyncio`` client, or a Broker: ``create_app(client.broker)``).

    Serve it alone (``uvicorn``, ``asyncq web``) or mount it: ``app.mount("/admin/queues",
    create_app(url, auth=basic_auth("admin", pw)))``; links follow the mount path and a
    proxy's ``root_path``. A request whose ``Host`` is neither a loopback name (``localhost``,
    ``127.0.0.1``, ``::1``) nor in ``allowed_hosts`` is refused (400), as Django's
    ``ALLOWED_HOSTS`` does: list the names browsers reach the dashboard by
    (``["ops.example.com"]``, ``".example.com"`` for a domain and its subdomains, ``"*"`` for
    any, behind something that checks ``Host`` itself). ``read_only`` hides every action and
    refuses them (403). ``auth`` receives each request and returns (or awaits to) True to let
    it in, else 401. An action (POST) whose ``Origin``/``Referer`` is not an allowed host on
    the request's port is refused (403) unless that origin is in ``allowed_origins``
    (``["https://ops.example.com"]``: for a proxy that rewrites ``Host``).

    The connection opens on the first request; the app's lifespan closes it when it is served
    on its own. While Redis cannot be reached, pages answer 503 with a page that says so and
    reloads itself (one warning logged per failed request, no traceback); nothing needs a
    restart once Redis is back. Mounted, where Starlette runs only the parent's lifespan, call
    ``await app.state.dashboard.close()`` in that lifespan to close it at shutdown.
    """
    if not isinstance(read_only, bool):
        raise TypeError(f"read_only must be a bool, got {read_only!r}")
    if auth is not None and not callable(auth):
        raise TypeError(f"auth must be a callable(request) -> bool, got {auth!r}")
    if not isinstance(title, str) or not title.strip():
        raise ValueError("title must be a non-empty str")
    hosts = check_hosts(allowed_hosts)
    dashboard = Dashboard(redis, Settings(read_only=read_only, title=title,
                                          allowed_origins=check_origins(allowed_origins),
                                          allowed_hosts=hosts))

    @contextlib.asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        try:
            yield
        finally:
            await dashboard.close()

    routes = [
        Route("/", _pages.overview, name="overview"),
        Route("/queue", _pages.queue_page, name="queue"),
        Route("/task", _pages.task_page, name="task"),
        Route("/workers", _pages.workers_page, name="workers"),
        Route("/scheduler", _pages.scheduler_page, name="scheduler"),
        # Retired page addresses, redirected for one release (bookmarks, runbooks).
        Route("/servers", _pages.moved_to("/workers")),
        Route("/periodic", _pages.moved_to("/scheduler")),
        Route("/groups", _pages.groups_page, name="groups"),
        Route("/limits", _pages.limits_page, name="limits"),
        Route("/workflows", _workflows.workflows_page, name="workflows"),
        Route("/live", _live.live, name="live"),
        Route("/events", _live.events, name="events"),
        Route("/action/task", _actions.task_action, methods=["POST"]),
        Route("/action/state", _actions.state_action, methods=["POST"]),
        Route("/action/tasks", _actions.selected_action, methods=["POST"]),
        Route("/action/queue", _actions.queue_action, methods=["POST"]),
        Route("/action/limit", _limit_actions.limit_action, methods=["POST"]),
        Mount("/static", StaticFiles(packages=[("asyncq.web", "static")]), name="static"),
    ]
    app = Starlette(routes=routes, lifespan=lifespan,
                    middleware=[Middleware(SecurityMiddleware, auth=auth, allowed_hosts=hosts)],
                    exception_handlers={BrokerError: _pages.redis_failed})
    app.state.dashboard = dashboard
    return app
