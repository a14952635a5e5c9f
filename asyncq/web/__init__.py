"""asyncq.web: the web dashboard, an ASGI app to mount in any Starlette/FastAPI app or to run
with ``asyncq web``. Needs the ``web`` extra: ``pip install 'asyncq[web]'``.

    from asyncq.web import create_app, basic_auth
    app.mount("/admin/queues", create_app(REDIS_URL, auth=basic_auth("admin", secret)))
"""

from __future__ import annotations

try:
    import jinja2  # noqa: F401
    import python_multipart  # noqa: F401
    import starlette  # noqa: F401
except ImportError as exc:  # pragma: no cover - exercised in a subprocess by the tests
    raise ImportError(f"asyncq.web needs the web extra ({exc.name} is missing): "
                      f"pip install 'asyncq[web]'") from exc

from ._app import create_app
from ._security import AuthHook, BasicAuth, basic_auth

__all__ = ["AuthHook", "BasicAuth", "basic_auth", "create_app"]
