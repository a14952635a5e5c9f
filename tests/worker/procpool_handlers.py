"""Handlers the process-pool tests run in child processes: a child imports this module by name,
so they live at module level here, not inside the tests."""

from __future__ import annotations

import hashlib
import os
import time
from pathlib import Path

from asyncq import ServeMux, SoftTimeLimitExceeded, Task
from asyncq._worker._procpool import resident_kib


def meet(task: Task) -> dict[str, object]:
    """Write this child's pid into the directory named by the payload, then spin until
    ``count`` runs have written theirs: it returns only if that many run at the same time."""
    spec = task.json()
    folder, count = Path(spec["dir"]), spec["count"]
    started = time.time()
    (folder / f"{os.getpid()}-{task.id}").write_text("")
    give_up = time.monotonic() + 20
    while len(list(folder.iterdir())) < count:
        if time.monotonic() > give_up:
            raise RuntimeError("the other runs never started alongside this one")
    return {"pid": os.getpid(), "start": started, "end": time.time()}


def pid(task: Task) -> int:
    return os.getpid()


def spin_forever(task: Task) -> None:
    while True:
        pass


def catch_soft_limit(task: Task) -> str:
    try:
        while True:
            pass
    except SoftTimeLimitExceeded:
        return f"soft limit reached in {os.getpid()}"


def crunch(task: Task) -> int:
    """CPU-bound: a sum over the payload's count of integers."""
    total = 0
    for i in range(task.json()):
        total += i * i % 7
    return total


def fail(task: Task) -> None:
    raise LookupError(f"no such thing: {task.json()}")


typed = ServeMux()
"""A mux whose typed task runs in a child: the child imports ``square`` (the definition)."""


@typed.task("square", isolate="process")
def square(n: int) -> dict[str, int]:
    return {"square": n * n, "pid": os.getpid()}


def crash(task: Task) -> None:
    os._exit(3)


@typed.task("cube")
def cube(n: int) -> dict[str, int]:
    return {"cube": n ** 3, "pid": os.getpid()}


def digest(task: Task) -> str:
    return hashlib.sha256(task.payload).hexdigest()


_HELD: list[bytes] = []
"""What ``grow`` keeps alive after it returns: a leak, as a handler caching too much has."""


def grow(task: Task) -> dict[str, int]:
    """Keep allocating (every page written, so resident) until this child's resident memory
    reaches the payload's ``to_kib``; the memory stays held after the task."""
    target = task.json()["to_kib"]
    while (rss := resident_kib() or 0) < target:
        _HELD.append(b"\x01" * (4 << 20))
    return {"pid": os.getpid(), "rss_kib": rss}


def memory(task: Task) -> dict[str, int]:
    return {"pid": os.getpid(), "rss_kib": resident_kib() or 0}


def double(n: int) -> dict[str, int]:
    """A plain function of this module, registered as a typed task elsewhere by the call form
    (``mux.task("double", isolate="process")(double)``): the module holds it undecorated."""
    return {"double": 2 * n, "pid": os.getpid()}


def nap(task: Task) -> int:
    """Sleep for the payload's seconds (a run of known length), then return this child's pid."""
    time.sleep(task.json())
    return os.getpid()
