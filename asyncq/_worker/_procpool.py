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

A child leads its own process group: a run stopped at its limit, on cancel or at shutdown has
the whole group stopped, so a process the handler started does not outlive it; a child that
exits is noticed when it exits (its process sentinel), not when the last process holding its
pipe does. A result larger than ``RESULT_MAX_BYTES`` is refused in the child, and an answer
of more than a few KiB is read and decoded in a thread, never on the event loop.
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

from .._errors import (
    ChildProcessDied,
    ProcessHandlerError,
    ResultError,
    SoftTimeLimitExceeded,
)
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


RESULT_MAX_BYTES = 512 * 1024 * 1024
"""Largest result a process-run handler may return, encoded: Redis holds at most 512 MiB in
one value (its default ``proto-max-bulk-len``). A larger one fails the run in the child, with
the error an unstorable result gets (ResultError, "handler result cannot be stored"), before
it is sent."""


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
            self._conn.send_bytes(orjson.dumps({
                "progress": [value, None if message is None else _utf8(message)],
                "d": data is not None, "n": len(data or b"")}))
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


def _child_main(conn: Connection, max_result: int = RESULT_MAX_BYTES,
                preload: tuple[str, ...] = ()) -> None:
    """A child's loop: run one task per message until the worker closes the pipe. Only bytes
    cross the pipe (JSON headers and the payload/result as stored): never a pickle. Each
    answer is a small JSON head (``n``: the size of the body that follows) and a body."""
    with contextlib.suppress(OSError):  # (its own group: stopped with whatever it starts)
        os.setsid()
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C is the worker's to handle
    signal.signal(signal.SIGTERM, _on_term)
    signal.signal(signal.SIGALRM, _on_soft_limit)
    for name in preload:  # (imported by the fork server already, unless another pool ran it)
        importlib.import_module(name)
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
                raise ResultError(f"handler result cannot be stored: {exc}") from exc
            if len(raw) > max_result:
                size = len(raw)
                raw = b""
                raise ResultError(f"handler result cannot be stored: it is {size} bytes "
                                 f"encoded, more than the {max_result} bytes a result may "
                                 f"hold (Redis keeps at most 512 MiB in one value)")
            head: dict[str, Any] = {"ok": True, "enc": enc}
        except Exception as exc:  # the run's error: its type, arguments (if JSON) and text
            head, raw = _failure(exc)
        head["n"] = len(raw)
        if meta.get("rss"):  # (the worker caps memory: one small file read per task)
            head["rss_kib"] = resident_kib()
        try:
            conn.send_bytes(orjson.dumps(head))
            conn.send_bytes(raw)
        except (OSError, EOFError):
            return


def _failure(exc: BaseException) -> tuple[dict[str, Any], bytes]:
    """The head and body that tell the worker about the run's error ``exc``: its type (in the
    head), its text, traceback and JSON arguments (in the body). Whatever the exception holds
    (text that is not valid UTF-8, a ``__str__`` that raises), what it is gets through."""
    kind = type(exc)
    name = _utf8(f"{kind.__module__}:{kind.__qualname__}")[:1000]
    try:
        text = str(exc)
    except Exception as broken:
        text = f"<the error's text could not be made: {type(broken).__name__}>"
    try:
        trace = traceback.format_exc()
    except Exception:
        trace = ""
    body: dict[str, Any] = {"text": _utf8(text), "traceback": _utf8(trace)}
    for args in (exc.args, [_utf8(a) if isinstance(a, str) else a for a in exc.args]):
        try:
            body["args"] = orjson.loads(orjson.dumps(list(args)))
            break
        except Exception:
            continue
    return {"ok": False, "type": name}, orjson.dumps(body)


def _utf8(text: object) -> str:
    """``text`` as a str JSON can carry: lone surrogates (and anything else UTF-8 cannot
    encode) written as backslash escapes."""
    if not isinstance(text, str):
        text = repr(text)
    try:
        text.encode()
    except UnicodeEncodeError:
        return text.encode("utf-8", "backslashreplace").decode()
    return text


async def _awaited(value: Any) -> Any:
    return await value


# -- the worker side


class _Child:
    __slots__ = ("conn", "exited", "proc", "refs", "runs")

    def __init__(self, proc: BaseProcess, conn: Connection) -> None:
        self.proc = proc
        self.conn = conn
        self.runs = 0
        self.refs: set[str] = set()
        """The handlers it has imported (a run of another one starts with its import)."""
        self.exited = False
        """Its process exited (seen by its sentinel during a run)."""


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
"""The cold-start budget: seconds a fresh child (or one new to a handler) may take to start
up and import the handler's module before its run is stopped as timed out. It is separate
from the run's time limit, which counts only once the handler starts."""


_INLINE_SEND = 32 * 1024
"""Payloads up to this size are written to a child's pipe from the event loop (the pipe's
buffer holds them); larger ones from a thread."""

_INLINE_READ = 4000
"""A message body up to this size is read from a child's pipe on the event loop (the child
wrote it whole, in one write of less than the pipe's atomic size); a larger one is read, and
decoded, in a thread."""


def _send(conn: Connection, head: bytes, payload: bytes) -> None:
    conn.send_bytes(head)
    conn.send_bytes(payload)


def start_method() -> str:
    """How children are started: "forkserver" where the platform has it, else "spawn"."""
    return "forkserver" if "forkserver" in multiprocessing.get_all_start_methods() else "spawn"


def _context(preload: tuple[str, ...] = ()) -> Any:
    """The multiprocessing context children are started with; the fork server (started by
    the first child, once per worker process) preloads this module and the ``preload``
    modules, so they are imported once, not by every child it forks: a replaced child starts
    in tens of ms. Called when a first child is needed, so a worker without process handlers
    changes nothing."""
    ctx = multiprocessing.get_context(start_method())
    if start_method() == "forkserver":
        ctx.set_forkserver_preload([__name__, *preload])
    return ctx


def _signal_group(pid: int, signum: int) -> bool:
    """Send ``signum`` to the process group ``pid`` leads (0: only ask whether it exists);
    False when no process of it is left."""
    try:
        os.killpg(pid, signum)
    except (ProcessLookupError, PermissionError):
        return False
    return True


def _end_group(pid: int, grace: float) -> None:
    """Stop what is left of a child's process group (processes its handler started): SIGTERM,
    SIGKILL to those still there after ``grace`` seconds. Nothing when the group is gone."""
    if not _signal_group(pid, signal.SIGTERM):
        return
    give_up = time.monotonic() + grace
    while time.monotonic() < give_up:
        time.sleep(0.01)
        if not _signal_group(pid, 0):
            return
    _signal_group(pid, signal.SIGKILL)


class _ExitWatch:
    """Watches a child's process sentinel during a run: when the child exits, the rest of its
    process group is killed (it runs no task any more) and the run's wait ends at once, even
    if a process the handler started still holds the pipe open."""

    __slots__ = ("child", "fd", "loop", "wake")

    def __init__(self, loop: asyncio.AbstractEventLoop, child: _Child) -> None:
        self.loop = loop
        self.child = child
        self.wake: asyncio.Future[None] | None = None
        self.fd = child.proc.sentinel
        loop.add_reader(self.fd, self._exited)

    def _exited(self) -> None:
        self.loop.remove_reader(self.fd)
        self.child.exited = True
        if self.child.proc.pid is not None:
            _signal_group(self.child.proc.pid, signal.SIGKILL)
        _wake(self.wake)

    def close(self) -> None:
        self.loop.remove_reader(self.fd)


def _wake(future: asyncio.Future[None] | None) -> None:
    if future is not None and not future.done():
        future.set_result(None)


Reply = tuple[dict[str, Any], bytes, tuple[bool, Any] | None]
"""A child's message: its head, its body, and for an answer read in a thread its meaning
already decoded (``_decode``; None: decode it)."""


class ProcessPool:
    """At most ``size`` child processes running handlers; a child is started when a task
    needs one and none is idle, retired after ``max_tasks_per_child`` runs (0: never) or
    once its resident memory exceeds ``max_memory_per_child`` KiB after a task (0: no cap),
    and killed and replaced when its run is cancelled. ``preload``: modules imported once by
    the fork server before it starts children (so by every child before its first task)."""

    def __init__(self, size: int, *, max_tasks_per_child: int = 0,
                 max_memory_per_child: int = 0, kill_grace: float = 1.0,
                 observer: object = None, preload: tuple[str, ...] = ()) -> None:
        self.size = size
        self.max_tasks_per_child = max_tasks_per_child
        self.max_memory_per_child = max_memory_per_child
        self.kill_grace = kill_grace
        self.preload = tuple(preload)
        self.max_result_bytes = RESULT_MAX_BYTES
        """Largest encoded result a child sends back (larger: the run fails in the child)."""
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
            self._ctx = _context(self.preload)
        parent, child = self._ctx.Pipe(duplex=True)
        proc = self._ctx.Process(target=_child_main,
                                 args=(child, self.max_result_bytes, self.preload),
                                 daemon=True, name="asyncq-handler")
        proc.start()
        child.close()
        started = _Child(proc, parent)
        self._live.add(started)
        return started

    async def run(self, ref: str, payload: bytes, meta: dict[str, Any],
                  on_progress: ProgressForward | None = None) -> Any:
        """Run the handler ``ref`` in a child on the task's bytes; its return value (as it
        will be stored: bytes, or the JSON value) or its error. Cancelling this stops the
        child and its process group (SIGTERM, SIGKILL after ``kill_grace``) and starts another
        child in its place. ``on_progress`` receives the handler's progress reports (on the
        loop) as they come."""
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
        if (self._over_memory(child, reply[0].get("rss_kib"), meta) or worn
                or child.exited):
            self._spawn(self._replace(child, lost=False))
        else:
            self._idle.append(child)
            self._slots.release()
        ok, value = reply[2] if reply[2] is not None else _decode(reply[0], reply[1])
        if not ok:
            raise value
        return value

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
                        on_start: Callable[[], None] | None = None) -> Reply:
        """Send the task to ``child`` and return its answer, handing on its progress reports
        and its start on the way; ChildProcessDied when it exits first."""
        loop = asyncio.get_running_loop()
        watch = _ExitWatch(loop, child)  # (from the send on: a large one waits for the child)
        try:
            try:
                if len(payload) > _INLINE_SEND:  # (a write that could fill the pipe: a thread)
                    await asyncio.to_thread(_send, child.conn, head, payload)
                else:
                    _send(child.conn, head, payload)
            except OSError as exc:  # (it exited while idle, or during the send)
                child.proc.join(0.1)
                raise ChildProcessDied(
                    f"the process running the handler (pid {child.proc.pid}) exited with "
                    f"code {child.proc.exitcode} before it was sent its task") from exc
            while True:
                reply = await self._receive(loop, child, watch)
                if "progress" in reply[0]:  # a progress report: the answer comes later
                    if on_progress is not None:
                        _forward(on_progress, reply)
                elif "started" in reply[0]:  # the handler starts (asked for: tell_start)
                    if on_start is not None:
                        on_start()
                else:
                    return reply
        finally:
            watch.close()

    @staticmethod
    async def _receive(loop: asyncio.AbstractEventLoop, child: _Child,
                       watch: _ExitWatch) -> Reply:
        """The child's next message, once its pipe is readable (or it exited): the head on
        the loop, a large body (and its meaning) in a thread."""
        conn = child.conn
        fd = conn.fileno()
        watch.wake = loop.create_future()
        loop.add_reader(fd, _wake, watch.wake)
        try:
            await watch.wake
        finally:
            loop.remove_reader(fd)
            watch.wake = None
        try:
            if child.exited and not conn.poll(0):
                raise EOFError
            head = orjson.loads(conn.recv_bytes())
            size = head.get("n", 0)
            if size <= _INLINE_READ:
                return head, conn.recv_bytes(), None
            body = await asyncio.to_thread(conn.recv_bytes)
            if "ok" not in head:
                return head, body, None
            return head, b"", await asyncio.to_thread(_decode, head, body)
        except (EOFError, OSError, ValueError):  # (ValueError: a message cut short)
            child.proc.join(0.1)  # (it exited: reaped at once, for its exit code)
            raise ChildProcessDied(
                f"the process running the handler (pid {child.proc.pid}) exited with "
                f"code {child.proc.exitcode} before it answered") from None

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
        """Stop ``child`` and then what is left of its process group. ``kill``: SIGTERM to the
        group at once, SIGKILL after ``kill_grace``; else the child exits as its pipe closes."""
        self._live.discard(child)
        pid = child.proc.pid
        if kill:
            if pid is None or not _signal_group(pid, signal.SIGTERM):
                child.proc.terminate()  # (killed before it made its own group)
            child.proc.join(self.kill_grace)
            if child.proc.is_alive():
                child.proc.kill()
        child.conn.close()
        child.proc.join(self.kill_grace if not kill else None)
        if child.proc.is_alive():
            child.proc.kill()
            child.proc.join()
        if pid is not None:
            _end_group(pid, self.kill_grace)

    async def close(self) -> None:
        """Stop every child and its process group (idle ones exit as their pipe closes; busy
        ones are killed)."""
        for chore in list(self._chores):
            with contextlib.suppress(BaseException):
                await chore
        idle, self._idle = set(self._idle), []
        for child in list(self._live):
            await asyncio.to_thread(self._stop, child, child not in idle)


def _forward(on_progress: ProgressForward, reply: Reply) -> None:
    """Hand a child's progress report to the worker; one it refuses (the run was stopped,
    its lease lost) is dropped: the child cannot be told, and its run ends soon."""
    head, data, _ = reply
    try:
        value, message = head["progress"]
        on_progress(float(value), message if isinstance(message, str) else None,
                    data if head.get("d") else None)
    except Exception as exc:
        get_logger("worker").debug("progress report of a handler process dropped",
                                   error=str(exc))


def _decode(head: dict[str, Any], body: bytes) -> tuple[bool, Any]:
    """What a child's answer stands for: ``(True, value)`` (as the worker will store it), or
    ``(False, error)``: the handler's exception type when it can be imported and rebuilt from
    its JSON arguments, else ProcessHandlerError; the child's traceback is added as a note."""
    if head["ok"]:
        enc = head["enc"]
        if enc == "n":
            return True, None
        return True, body if enc == "b" else orjson.loads(body)
    kind: str = head["type"]
    try:
        told = orjson.loads(body)
        text, trace = str(told["text"]), str(told["traceback"])
    except (ValueError, KeyError, TypeError):
        told, text, trace = {}, "(its text was lost)", ""
    exc: BaseException | None = None
    if "args" in told:
        module_name, _, qualname = kind.partition(":")
        try:
            cls: Any = importlib.import_module(module_name)
            for part in qualname.split("."):
                cls = getattr(cls, part)
            if isinstance(cls, type) and issubclass(cls, Exception):
                exc = cls(*told["args"])
        except Exception:
            exc = None
    if exc is None or not _told(exc, text):
        exc = ProcessHandlerError(f"{kind.rpartition(':')[2]}: {text}")
    exc.add_note(f"raised in a handler process:\n{trace}")
    return False, exc


def _told(exc: BaseException, text: str) -> bool:
    """Whether ``exc``, rebuilt from its arguments, says what the child said it did."""
    try:
        return str(exc) == text
    except Exception:  # (its __str__ fails here too)
        return False


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
