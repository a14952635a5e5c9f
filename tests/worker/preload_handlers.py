"""Handlers of the preload tests: light to import, but the first call in a process imports
``preload_heavy_handlers`` (over a second), as a handler that calls ``django.setup()`` lazily
does. A worker that preloads that module runs them well under a 0.5 s limit."""

from __future__ import annotations

import os

from asyncq import ServeMux, Task

mux = ServeMux()


@mux.handler("heavy:use", isolate="process", timeout=0.5)
def uses_heavy(task: Task) -> dict[str, int]:
    from tests.worker import preload_heavy_handlers as heavy

    return {"pid": os.getpid(), "imported_in": heavy.IMPORTED_IN}
