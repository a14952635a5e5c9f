"""Process-isolated handlers: a handler registered with ``isolate="process"`` (or any sync
handler when the worker's ``sync_handlers="process"``) runs in one of a pool of child
processes, so CPU-bound work uses every core while the event loop keeps serving other tasks.

Children are started with the ``forkserver`` context where the platform has it (else
``spawn``): forking the worker itself would copy its event loop, Redis connections and threads
into the child mid-flight. A child is sent the task's stored payload bytes and a small dict
(type, id, queue, encoding, headers, retries, deadline) and imports the handler itself by its
``module:qualname``; it sends back the result as stored (bytes or JSON) or the error. A run
whose task is cancelled (its timeout or deadline passed, a cancel request, shutdown) has its
child stopped — SIGTERM, then SIGKILL after ``kill_grace`` — and a fresh child takes its slot.
With ``max_memory_per_child`` a child reports its resident memory with each answer and one
over the cap is replaced once its task has ended (the task's outcome is kept, as in Celery).
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import importlib
import inspect
import multiprocessing
import os
import signal
import sys
import threading
import time
import traceback
from collections.abc import Callable
from multiprocessing.connection import Connection
from multiprocessing.process import BaseProcess
from typing import Any, Protocol

import orjson

from .._errors import ChildProcessDied, ProcessHandlerError, SoftTimeLimitExceeded
from .._log import get_logger
from .._model._options import ParsedOptions
from .._model._payload import encode_payload
from .._model._task import Task

ISOLATIONS = ("thread", "process")
"""What ``isolate=`` takes: a sync handler's worker thread, or a child process."""


#: A child sends a progress report to the worker at most this often (the latest wins; the
#: worker's own coalescing then writes at most one every 100 ms).
CHILD_PROGRESS_INTERVAL = 0.05

ProgressForward = Callable[[float, "str | None", "bytes | None"], None]
"""What the worker does with a child's progress report: ``(fraction, message, JSON data)``."""





def handler_ref(fn: object, what: str) -> str:
    """``module:qualname`` a child imports ``fn`` by; a function it cannot import (defined
    inside a function, a lambda, a bound method, run as ``__main__`` of a script) is a
    ValueError at registration."""
    module = getattr(fn, "__module__", None)
    qualname = getattr(fn, "__qualname__", None)
    if not isinstance(module, str) or not isinstance(qualname, str) or not (
            inspect.isfunction(fn) or isinstance(fn, type)):
        raise TypeError(f"{what}: isolate='process' needs a module-level function, got {fn!r}")
    if "<locals>" in qualname or "<lambda>" in qualname:
        raise ValueError(f"{what}: isolate='process' needs a function defined at module level "
                         f"(a child process imports it by name), but {qualname!r} is defined "
                         f"inside a function or is a lambda; move it to module level")
    if module == "__main__":
        spec = getattr(sys.modules.get("__main__"), "__spec__", None)
        if spec is None or not spec.name:
            raise ValueError(f"{what}: isolate='process' cannot import {qualname!r} from the "
                             f"script being run (__main__) in a child process; define it in "
                             f"an importable module (or run the script with python -m)")
        module = spec.name
    return f"{module}:{qualname}"


TYPED_REF = "!task"
"""Ends the ref of a typed task's function (``@mux.task``): the child runs the function as that
task (its arguments decoded from the payload), whether the module's attribute is the
definition (the decorator form) or the function itself (the call form,
``mux.task("x")(fn)`` registering a function of another module)."""


def typed_ref(fn: object, what: str) -> str:
    """``handler_ref`` of a typed task's function, marked as such (``TYPED_REF``)."""
    return handler_ref(fn, what) + TYPED_REF


# -- the child


def _resolve(ref: str) -> Callable[[Task], Any]:
    from .._typed._definition import TaskDefinition, define  # (the child's own import)
    typed = ref.endswith(TYPED_REF)
    module_name, _, qualname = ref.removesuffix(TYPED_REF).partition(":")
    obj: Any = importlib.import_module(module_name)
    for part in qualname.split("."):
        obj = getattr(obj, part)
    if isinstance(obj, TaskDefinition):
        return obj.handler()
    if not callable(obj):
        raise TypeError(f"{ref} is not a handler: {obj!r}")
    if typed:  # (the call form: the module holds the undecorated function)
        return define(qualname, obj, {}).handler()
    return obj  # type: ignore[no-any-return]


class _ChildProgress:
    """A child's progress sink: reports go to the worker over the task's pipe, at most one
    every CHILD_PROGRESS_INTERVAL, the latest winning, each as a header ``{"progress":
    [fraction, message], "d": has data}`` and the data bytes; ``close`` sends what is left
    before the answer. A timer thread sends them, never the handler's (main) thread: a soft
    time limit's signal interrupting a send there would cut a message in the pipe."""

    def __init__(self, conn: Connection) -> None:
        self._conn = conn
        self._lock = threading.Lock()
        self._sent_at = 0.0
        self._latest: tuple[float, str | None, bytes | None] | None = None
        self._timer: threading.Timer | None = None
        self._closed = False

    def __call__(self, task: Task, value: float, message: str | None,
                 data: bytes | None) -> None:
        with self._lock:
            if self._closed:
                raise RuntimeError("set_progress is only available inside a running handler")
            self._latest = (value, message, data)
            if self._timer is None:
                wait = self._sent_at + CHILD_PROGRESS_INTERVAL - time.monotonic()
                self._timer = threading.Timer(max(wait, 0.0), self._due)
                self._timer.daemon = True
                self._timer.start()

    def _due(self) -> None:
        with self._lock:
            self._timer = None
            if not self._closed:
                self._send()

    def _send(self) -> None:  # (holding the lock)
        latest, self._latest = self._latest, None
        if latest is None:
            return
        value, message, data = latest
        self._sent_at = time.monotonic()
        with contextlib.suppress(OSError, EOFError):
            self._conn.send_bytes(orjson.dumps({"progress": [value, message],
                                                "d": data is not None}))
            self._conn.send_bytes(data or b"")

    def close(self) -> None:
        with self._lock:
            if self._timer is not None:
                self._timer.cancel()
                self._timer = None
            self._send()
            self._closed = True


def _deadline(meta: dict[str, Any]) -> int:
    """The run's deadline (Unix ms, 0: none) for a handler starting now: from the limit's
    ``limit_span`` when the worker sent it (the limit counts from here), else as sent."""
    span = meta.get("limit")
    if not span:
        return int(meta["deadline_ms"])
    timeout_ms, cap_ms = span
    deadline = _now_ms() + timeout_ms if timeout_ms else 0
    return cap_ms if cap_ms and (not deadline or cap_ms < deadline) else deadline


def _child_task(payload: bytes, meta: dict[str, Any],
                progress: _ChildProgress | None = None) -> Task:
    task = Task.__new__(Task)
    task.type = meta["type"]
    task.payload = payload
    task._enc = meta["enc"]
    task.options = ParsedOptions()
    task.id = meta["id"]
    task.queue = meta["queue"]
    task.max_retry = meta["max_retry"]
    task.headers = dict(meta["headers"])
    task.retried = meta["retried"]
    task._deadline_ms = _deadline(meta)
    task._writer = None
    task._progress = _no_progress if progress is None else progress
    task._state = None
    return task


def _no_progress(task: Task, value: float, message: str | None, data: bytes | None) -> None:
    raise RuntimeError("set_progress is only available inside a running handler")


_PAGE_KIB = (os.sysconf("SC_PAGE_SIZE") if hasattr(os, "sysconf") else 4096) // 1024
_statm: list[int] = []  # [pid, fd]: this process's /proc/self/statm, kept open (1.5 us a read)


def resident_kib() -> int | None:
    """This process's resident memory now, in KiB (Linux: /proc/self/statm); elsewhere the
    peak so far (getrusage), which never goes down; None where neither exists."""
    try:
        if not _statm or _statm[0] != os.getpid():  # (an fd opened before a fork is the parent's)
            if _statm:
                os.close(_statm[1])
            _statm[:] = [os.getpid(), os.open("/proc/self/statm", os.O_RDONLY)]
        return int(os.pread(_statm[1], 128, 0).split()[1]) * _PAGE_KIB
    except (OSError, ValueError, IndexError):
        pass
    try:
        import resource
    except ImportError:
        return None
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return peak // 1024 if sys.platform == "darwin" else peak  # (bytes there, KiB here)


def _on_soft_limit(signum: int, frame: object) -> None:
    raise SoftTimeLimitExceeded("soft time limit exceeded: the task's hard limit is near")


def _on_term(signum: int, frame: object) -> None:
    raise SystemExit(128 + signum)  # (finally blocks run during the kill grace)


_STARTED = orjson.dumps({"started": True})
"""What a child sends when asked (``tell_start``) as the handler starts: it has started up and
imported the handler, so the run's limit counts from now."""


def _child_main(conn: Connection) -> None:
    """A child's loop: run one task per message until the worker closes the pipe. Only bytes
    cross the pipe (JSON headers and the payload/result as stored): never a pickle."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C is the worker's to handle
    signal.signal(signal.SIGTERM, _on_term)
    signal.signal(signal.SIGALRM, _on_soft_limit)
    handlers: dict[str, Callable[[Task], Any]] = {}
    while True:
        try:
            ref, meta = orjson.loads(conn.recv_bytes())
            payload = conn.recv_bytes()
        except (EOFError, OSError):
            return
        raw = b""
        try:
            progress = _ChildProgress(conn) if meta.get("progress") else None
            try:
                fn = handlers.get(ref) or handlers.setdefault(ref, _resolve(ref))
                if meta.get("tell_start"):  # (its limit counts from here, not from the import)
                    conn.send_bytes(_STARTED)
                    conn.send_bytes(b"")
                task = _child_task(payload, meta, progress)
                soft = meta.get("soft")
                if soft and task._deadline_ms:
                    signal.setitimer(signal.ITIMER_REAL, max(
                        (task._deadline_ms - _now_ms()) / 1000 - soft, 0.001))
                value = fn(task)
                if inspect.isawaitable(value):
                    value = asyncio.run(_awaited(value))
            finally:
                signal.setitimer(signal.ITIMER_REAL, 0)
                if progress is not None:
                    progress.close()  # (its last report goes before the answer)
            try:
                raw, enc = encode_payload(value)
            except ValueError as exc:
                raise ValueError(f"handler result cannot be stored: {exc}") from exc
            head: dict[str, Any] = {"ok": True, "enc": enc}
        except Exception as exc:  # the run's error: its type, arguments (if JSON) and text
            head = {"ok": False, "type": f"{type(exc).__module__}:{type(exc).__qualname__}",
                    "text": str(exc), "traceback": traceback.format_exc()}
            with contextlib.suppress(TypeError, orjson.JSONEncodeError):
                head["args"] = orjson.loads(orjson.dumps(list(exc.args)))
        if meta.get("rss"):  # (the worker caps memory: one small file read per task)
            head["rss_kib"] = resident_kib()
        try:
            conn.send_bytes(orjson.dumps(head))
            conn.send_bytes(raw)
        except (OSError, EOFError):
            return


async def _awaited(value: Any) -> Any:
    return await value


# -- the worker side


class _Child:
    __slots__ = ("conn", "proc", "refs", "runs")

    def __init__(self, proc: BaseProcess, conn: Connection) -> None:
        self.proc = proc
        self.conn = conn
        self.runs = 0
        self.refs: set[str] = set()
        """The handlers it has imported (a run of another one starts with its import)."""


class RunLimits(Protocol):
    """The worker's time limits of the runs given to the pool (``_running.LateStarts``): a run's
    limit counts from when its handler starts in a child, not while it waits for one."""

    def span(self, task_id: str) -> tuple[int, int]:
        """``(timeout, deadline)`` ms of the run (0: none), for its child."""

    def hold(self, task_id: str, budget_s: float | None) -> None:
        """The handler has not started: stop counting (stop the run after ``budget_s``)."""

    def restart(self, task_id: str) -> None:
        """The handler starts now: its limit counts from now."""


START_BUDGET = 60.0
"""Seconds a fresh child (or one new to a handler) may take to start up and import the
handler's module before its run is stopped as timed out; its time limit counts only after."""


_INLINE_SEND = 32 * 1024
"""Payloads up to this size are written to a child's pipe from the event loop (the pipe's
buffer holds them); larger ones from a thread."""


def _send(conn: Connection, head: bytes, payload: bytes) -> None:
    conn.send_bytes(head)
    conn.send_bytes(payload)


def start_method() -> str:
    """How children are started: "forkserver" where the platform has it, else "spawn"."""
    return "forkserver" if "forkserver" in multiprocessing.get_all_start_methods() else "spawn"


def _context() -> Any:
    """The multiprocessing context children are started with; the fork server (started by
    the first child, once per worker process) preloads this module, so asyncq is imported
    once, not by every child it forks: a replaced child starts in tens of ms. Called when a
    first child is needed, so a worker without process handlers changes nothing."""
    ctx = multiprocessing.get_context(start_method())
    if start_method() == "forkserver":
        ctx.set_forkserver_preload([__name__])
    return ctx


class ProcessPool:
    """At most ``size`` child processes running handlers; a child is started when a task
    needs one and none is idle, retired after ``max_tasks_per_child`` runs (0: never) or
    once its resident memory exceeds ``max_memory_per_child`` KiB after a task (0: no cap),
    and killed and replaced when its run is cancelled."""

    def __init__(self, size: int, *, max_tasks_per_child: int = 0,
                 max_memory_per_child: int = 0, kill_grace: float = 1.0,
                 observer: object = None) -> None:
        self.size = size
        self.max_tasks_per_child = max_tasks_per_child
        self.max_memory_per_child = max_memory_per_child
        self.kill_grace = kill_grace
        self._over_memory_hook = getattr(observer, "process_over_memory", None)
        self.limits: RunLimits | None = None
        """The worker's time limits of the runs (None: a run's limit is the worker's alone)."""
        self.start_budget = START_BUDGET
        self._ctx: Any = None  # (see _context)
        self._idle: list[_Child] = []
        self._slots: asyncio.Semaphore | None = None
        self._live: set[_Child] = set()
        self._chores: set[asyncio.Task[None]] = set()
        self.replaced = 0
        """Children killed because their run was abandoned (its limit passed, cancelled), and
        replaced."""
        self.over_memory = 0
        """Children replaced because their resident memory exceeded the cap after a task."""

    @property
    def pids(self) -> list[int]:
        """The live children's process ids."""
        return sorted(c.proc.pid for c in self._live if c.proc.pid is not None)

    def _start_child(self) -> _Child:
        if self._ctx is None:
            self._ctx = _context()
        parent, child = self._ctx.Pipe(duplex=True)
        proc = self._ctx.Process(target=_child_main, args=(child,), daemon=True,
                                 name="asyncq-handler")
        proc.start()
        child.close()
        started = _Child(proc, parent)
        self._live.add(started)
        return started

    async def run(self, ref: str, payload: bytes, meta: dict[str, Any],
                  on_progress: ProgressForward | None = None) -> Any:
        """Run the handler ``ref`` in a child on the task's bytes; its return value (as it
        will be stored: bytes, or the JSON value) or its error. Cancelling this stops the
        child (SIGTERM, SIGKILL after ``kill_grace``) and starts another in its place.
        ``on_progress`` receives the handler's progress reports (on the loop) as they come."""
        if self._slots is None:
            self._slots = asyncio.Semaphore(self.size)
        limits, task_id = self.limits, meta["id"]
        held = limits is not None and (self._slots.locked() or not self._idle)
        if held:  # (waiting for a free child, or for one to start: its limit waits too)
            assert limits is not None
            limits.hold(task_id, None if self._slots.locked() else self.start_budget)
        await self._slots.acquire()
        child: _Child | None = None
        if self.max_memory_per_child:
            meta = {**meta, "rss": True}
        if on_progress is not None:
            meta = {**meta, "progress": True}
        try:
            child = self._idle.pop() if self._idle else await asyncio.to_thread(
                self._start_child)
            on_start = None
            if limits is not None:
                meta = {**meta, "limit": limits.span(task_id)}
                if ref not in child.refs:  # it imports the handler first (a fresh child too)
                    limits.hold(task_id, self.start_budget)
                    meta["tell_start"] = True
                    on_start = functools.partial(self._started, limits, task_id, child, ref)
                elif held:
                    limits.restart(task_id)
            reply = await self._exchange(child, orjson.dumps([ref, meta]), payload,
                                         on_progress, on_start)
        except BaseException as exc:
            if child is None:
                self._slots.release()
            else:
                self._spawn(self._replace(child, lost=not isinstance(exc, ChildProcessDied)))
            raise
        child.runs += 1
        worn = bool(self.max_tasks_per_child) and child.runs >= self.max_tasks_per_child
        if self._over_memory(child, reply[0].get("rss_kib"), meta) or worn:
            self._spawn(self._replace(child, lost=False))
        else:
            self._idle.append(child)
            self._slots.release()
        return _unpack(reply)

    @staticmethod
    def _started(limits: RunLimits, task_id: str, child: _Child, ref: str) -> None:
        """The child started the handler ``ref``: the run's limit counts from now."""
        child.refs.add(ref)
        limits.restart(task_id)

    def _over_memory(self, child: _Child, rss_kib: object, meta: dict[str, Any]) -> bool:
        """Whether ``child``, which just answered, is over the memory cap: then it is logged
        and counted (its task's outcome stands; the child is replaced after it)."""
        if not (self.max_memory_per_child and isinstance(rss_kib, int)
                and rss_kib > self.max_memory_per_child):
            return False
        self.over_memory += 1
        get_logger("worker").warning(
            "handler process over max_memory_per_child after its task: replaced by a fresh "
            "one", pid=child.proc.pid, rss_kib=rss_kib,
            max_memory_per_child=self.max_memory_per_child, runs=child.runs,
            task_id=meta.get("id"), type=meta.get("type"))
        if self._over_memory_hook is not None:
            self._over_memory_hook(meta.get("queue", ""), meta.get("type", ""))
        return True

    async def _exchange(self, child: _Child, head: bytes, payload: bytes,
                        on_progress: ProgressForward | None = None,
                        on_start: Callable[[], None] | None = None,
                        ) -> tuple[dict[str, Any], bytes]:
        loop = asyncio.get_running_loop()
        answer: asyncio.Future[tuple[dict[str, Any], bytes]] = loop.create_future()
        fd = child.conn.fileno()

        def readable() -> None:
            if answer.done():
                loop.remove_reader(fd)
                return
            try:
                reply = (orjson.loads(child.conn.recv_bytes()), child.conn.recv_bytes())
                if "progress" in reply[0]:  # a progress report: the answer comes later
                    if on_progress is not None:
                        _forward(on_progress, reply)
                    return
                if "started" in reply[0]:  # the handler starts (asked for: tell_start)
                    if on_start is not None:
                        on_start()
                    return
                loop.remove_reader(fd)
                answer.set_result(reply)
            except (EOFError, OSError, ValueError):  # (ValueError: a message cut short)
                loop.remove_reader(fd)
                child.proc.join(0.1)  # (it exited: reaped at once, for its exit code)
                answer.set_exception(ChildProcessDied(
                    f"the process running the handler (pid {child.proc.pid}) exited with "
                    f"code {child.proc.exitcode} before it answered"))

        if len(payload) > _INLINE_SEND:  # (a write that could fill the pipe: not on the loop)
            await asyncio.to_thread(_send, child.conn, head, payload)
        else:
            _send(child.conn, head, payload)
        loop.add_reader(fd, readable)
        try:
            return await answer
        finally:
            loop.remove_reader(fd)

    def _spawn(self, coro: Any) -> None:
        chore = asyncio.get_running_loop().create_task(coro)
        self._chores.add(chore)
        chore.add_done_callback(self._chores.discard)

    async def _replace(self, child: _Child, *, lost: bool) -> None:
        """Stop ``child`` (killed when ``lost``: its run was abandoned; else asked to exit by
        closing its pipe), start a fresh one in its place, then give the slot back."""
        assert self._slots is not None
        try:
            await asyncio.to_thread(self._stop, child, lost)
            if lost:
                self.replaced += 1
            self._idle.append(await asyncio.to_thread(self._start_child))
        finally:
            self._slots.release()

    def _stop(self, child: _Child, kill: bool) -> None:
        self._live.discard(child)
        if kill:
            child.proc.terminate()
            child.proc.join(self.kill_grace)
            if child.proc.is_alive():
                child.proc.kill()
        child.conn.close()
        child.proc.join(self.kill_grace if not kill else None)
        if child.proc.is_alive():
            child.proc.kill()
            child.proc.join()

    async def close(self) -> None:
        """Stop every child (idle ones exit as their pipe closes; busy ones are killed)."""
        for chore in list(self._chores):
            with contextlib.suppress(BaseException):
                await chore
        idle, self._idle = set(self._idle), []
        for child in list(self._live):
            await asyncio.to_thread(self._stop, child, child not in idle)


def _forward(on_progress: ProgressForward, reply: tuple[dict[str, Any], bytes]) -> None:
    """Hand a child's progress report to the worker; one it refuses (the run was stopped,
    its lease lost) is dropped: the child cannot be told, and its run ends soon."""
    head, data = reply
    try:
        value, message = head["progress"]
        on_progress(float(value), message if isinstance(message, str) else None,
                    data if head.get("d") else None)
    except Exception as exc:
        get_logger("worker").debug("progress report of a handler process dropped",
                                   error=str(exc))


def _unpack(reply: tuple[dict[str, Any], bytes]) -> Any:
    """The value a child's reply stands for (as the worker will store it), or its error
    raised again: the handler's exception type when it can be imported and rebuilt from its
    JSON arguments, else ProcessHandlerError; the child's traceback is added as a note."""
    head, raw = reply
    if head["ok"]:
        enc = head["enc"]
        if enc == "n":
            return None
        return raw if enc == "b" else orjson.loads(raw)
    exc: BaseException | None = None
    if "args" in head:
        module_name, _, qualname = head["type"].partition(":")
        try:
            cls: Any = importlib.import_module(module_name)
            for part in qualname.split("."):
                cls = getattr(cls, part)
            if isinstance(cls, type) and issubclass(cls, Exception):
                exc = cls(*head["args"])
        except Exception:
            exc = None
    if exc is None or str(exc) != head["text"]:
        exc = ProcessHandlerError(f"{head['type'].rpartition(':')[2]}: {head['text']}")
    exc.add_note(f"raised in a handler process:\n{head['traceback']}")
    raise exc


def child_meta(task: Task, soft_timeout: float | None) -> dict[str, Any]:
    """What a child gets besides the payload bytes: the task's fields (and when to raise
    SoftTimeLimitExceeded: ``soft_timeout`` s before the deadline its run has when its
    handler starts; the pool adds the run's limit, ``limit``, that deadline counts from)."""
    return {"type": task.type, "id": task.id, "queue": task.queue, "enc": task.encoding,
            "headers": dict(task.headers), "max_retry": task.max_retry,
            "retried": task.retried, "deadline_ms": task._deadline_ms,
            "soft": soft_timeout or 0, "pid": os.getpid()}


def _now_ms() -> int:
    return int(time.time() * 1000)
