"""A handler module whose import takes 1.5 s, as a module that sets up Django or imports a
heavy library does: every fresh child imports it before it can run ``quick``."""

from __future__ import annotations

import os
import time

from asyncq import Task

IMPORT_S = 1.5
time.sleep(IMPORT_S)


def quick(task: Task) -> int:
    return os.getpid()
