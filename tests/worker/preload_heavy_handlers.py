"""A module that takes over a second to import (as a Django project's ``django.setup()``
does), imported lazily by ``preload_handlers.uses_heavy``. It notes the process that imported
it: with ``preload``, the fork server, once; without, each child before its first task."""

from __future__ import annotations

import os
import time

IMPORT_S = 1.2
time.sleep(IMPORT_S)
IMPORTED_IN = os.getpid()
