"""Health of a process seen from outside its event loop: ``LoopWatch`` notices a loop that stops
turning (a handler calling ``time.sleep`` in ``async def``) and names what was running, and
``ProbeServer`` answers HTTP probes from a daemon thread, so a blocked loop still gets an answer.

Both use the standard library only (http.server, threading): nothing to install.
"""

from __future__ import annotations

import asyncio
import contextlib
import http.client
import os
import socket
import socketserver
import sys
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, cast

import orjson

from .._log import get_logger
from ._stalls import note_stall

#: A probe's answer: HTTP status, content type, body.
Answer = tuple[int, str, bytes]
Route = Callable[[], Answer]

#: At most one stall warning per this many seconds for the same task types (the stalls in
#: between are counted and reported with the next warning).
STALL_LOG_INTERVAL = 60.0
#: Running tasks named in a stall warning (the count says how many there were).
STALL_LOG_TASKS = 10


def json_answer(ok: bool, body: Mapping[str, Any]) -> Answer:
    """200 or 503 with ``body`` as JSON (what a person running curl reads)."""
    return (200 if ok else 503), "application/json", orjson.dumps(body) + b"\n"


class LoopWatch:
    """Watches an event loop turn, at the cost of one callback per ``tick`` on the loop and a
    thread waking as often.

    The callback stamps the time of each turn and measures its lag (how late it ran);
    ``blocked_s`` is the time since the last turn, readable from any thread. A stall of at
    least ``warn_after`` seconds is logged once, naming the task running on the loop at that
    moment and where its code was (``running()`` gives the other running tasks): by the
    thread while the loop is still blocked, else by the callback when the loop turns again.
    ``on_lag(seconds)`` (a metric) is called on the loop each tick.

    A stall reaching ``name_after`` (the liveness threshold: /livez fails from then on) is
    logged once more, whatever the rate limit, with the blocking task and its line, before
    any probe can see it (``name_stall``, which the probe calls too).
    """

    def __init__(self, *, warn_after: float, tick: float,
                 running: Callable[[], Sequence[tuple[str, str]]] = tuple,
                 name_task: Callable[[asyncio.Task[Any]], tuple[str, str] | None] | None = None,
                 on_lag: Callable[[float], None] | None = None,
                 on_stall: Callable[[], None] | None = None,
                 name_after: float = 0.0,
                 **log_context: Any) -> None:
        self.warn_after = warn_after
        self.name_after = name_after
        # (Checked at least twice per warn_after, at most 100 times a second.)
        self.tick = max(0.01, min(tick, warn_after / 2) if warn_after > 0 else tick)
        self._running = running
        self._name_task = name_task
        self._on_lag = on_lag
        self._on_stall = on_stall
        self._log = get_logger("loop", **log_context)
        self._last = time.monotonic()
        self._lock = threading.Lock()  # who logs the stall in progress: the thread or the loop
        self._naming = threading.Lock()  # held while a stall at name_after is being logged
        self._log_lock = threading.Lock()  # the rate limit, kept by both
        self._warned = False  # the stall in progress was logged
        self._named = -1.0  # the start (``_last``) of the stall last named at name_after
        self._culprit: tuple[tuple[str, str] | None, str | None] = (None, None)
        self._last_warning: dict[tuple[str, ...], float] = {}
        self._suppressed: dict[tuple[str, ...], int] = {}
        self._loop: asyncio.AbstractEventLoop | None = None
        self._loop_thread = 0
        self._handle: asyncio.TimerHandle | None = None
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self.stalls = 0
        """Stalls of at least ``warn_after`` seen so far."""

    @property
    def blocked_s(self) -> float:
        """Seconds since the loop last turned (about 0 to ``tick`` while it turns)."""
        return max(0.0, time.monotonic() - self._last)

    def start(self) -> None:
        """Begin watching the running loop (call from it)."""
        self._loop = asyncio.get_running_loop()
        self._loop_thread = threading.get_ident()
        self._stop.clear()
        self._last = time.monotonic()
        self._handle = self._loop.call_later(self.tick, self._turned, self._last + self.tick)
        if self.warn_after > 0 or self.name_after > 0:
            self._thread = threading.Thread(target=self._watch, name="asyncq-loop-watch",
                                            daemon=True)
            self._thread.start()

    def stop(self) -> None:
        """Stop watching; the thread ends within a tick."""
        self._stop.set()
        if self._handle is not None:
            self._handle.cancel()
            self._handle = None

    def _turned(self, expected: float) -> None:
        """On the loop, once per tick: stamp, measure the lag, close a stall."""
        now = time.monotonic()
        lag = max(0.0, now - expected)
        blocked = now - self._last
        self._last = now
        note_stall(self._loop, blocked, now)  # type: ignore[arg-type]
        if not self._stop.is_set():
            self._handle = self._loop.call_later(  # type: ignore[union-attr]
                self.tick, self._turned, now + self.tick)
        if self._on_lag is not None:
            self._on_lag(lag)
        with self._lock:
            warned, self._warned = self._warned, False
            current, where = self._culprit
            self._culprit = (None, None)
        if warned:
            self._log.info("event loop turned again", blocked_s=round(blocked, 3),
                           **_culprit_fields(current, where))
        elif 0 < self.warn_after <= lag:
            # A stall between two checks of the thread: logged now, with its full length.
            # (The loop's current task is gone by now: the running ones are named.)
            self._stalled(round(lag, 3), None, None)

    def _watch(self) -> None:
        """The thread: log a stall in progress once it reaches ``warn_after``."""
        while not self._stop.wait(self.tick):
            last = self._last
            blocked = time.monotonic() - last
            if 0 < self.name_after <= blocked:
                self.name_stall()
            if not 0 < self.warn_after <= blocked:
                continue
            with self._lock:
                if self._warned or self._last != last:  # logged, or it just ended
                    continue
                self._warned = True
            current, where = self._current(), self._where()
            with self._lock:
                if self._last == last:
                    self._culprit = (current, where)
            self._stalled(round(blocked, 3), current, where)

    def name_stall(self) -> None:
        """Log the stall in progress, with the blocking task and its line, once it has lasted
        ``name_after`` (once per stall, never rate-limited): the stall that gets the process
        killed is named before the kill. Called by the watch thread and by the liveness probe
        (from its thread) before it answers "stalled"."""
        with self._naming:  # (a second caller returns once the first one's line is written)
            self._name_stall()

    def _name_stall(self) -> None:
        last = self._last
        blocked = time.monotonic() - last
        if self.name_after <= 0 or blocked < self.name_after:
            return
        with self._lock:
            if self._named == last or self._last != last:  # named, or it just ended
                return
            self._named = last
            self._warned = True  # (the loop says when it turns again)
        current, where = self._current(), self._where()
        with self._lock:
            if self._last == last:
                self._culprit = (current, where)
        running = self._snapshot()
        self._log.error(
            "liveness threshold reached with the event loop still blocked: /livez fails "
            "until it turns again, and the process may be restarted", blocked_s=round(blocked, 3),
            liveness_threshold_s=self.name_after, running=len(running),
            tasks=[f"{kind}:{task_id}" for kind, task_id in running[:STALL_LOG_TASKS]],
            **_culprit_fields(current, where))

    def _current(self) -> tuple[str, str] | None:
        """The task the blocked loop is running, as (type, id), when it is a handler's."""
        if self._loop is None or self._name_task is None:
            return None
        try:
            task = asyncio.current_task(self._loop)
        except RuntimeError:
            return None
        return self._name_task(task) if task is not None else None

    def _where(self) -> str | None:
        """Where the loop's thread is now: its innermost Python frame, ``file:line in func``."""
        frame = sys._current_frames().get(self._loop_thread)
        if frame is None:
            return None
        code = frame.f_code
        return f"{code.co_filename}:{frame.f_lineno} in {code.co_name}"

    def _stalled(self, blocked: float, current: tuple[str, str] | None,
                 where: str | None) -> None:
        """Count a stall and log it, at most once per STALL_LOG_INTERVAL for the same types."""
        with self._log_lock:
            self.stalls += 1
        if self._on_stall is not None:
            self._on_stall()
        running = self._snapshot()
        types = tuple(sorted({kind for kind, _ in ([current] if current else running)}))
        now = time.monotonic()
        with self._log_lock:
            last = self._last_warning.get(types)
            if last is not None and now - last < STALL_LOG_INTERVAL:
                self._suppressed[types] = self._suppressed.get(types, 0) + 1
                return
            self._last_warning[types] = now
            suppressed = self._suppressed.pop(types, 0)
        fields: dict[str, Any] = {
            "blocked_s": blocked,
            "running": len(running),
            "tasks": [f"{kind}:{task_id}" for kind, task_id in running[:STALL_LOG_TASKS]],
        }
        if current is not None:
            fields["task_type"], fields["task_id"] = current
        if where is not None:
            fields["where"] = where
        if suppressed:
            fields["stalls_not_logged"] = suppressed
        self._log.warning(
            "event loop blocked: no task, timer or Redis reply is served meanwhile; a handler "
            "is blocking it (time.sleep, blocking I/O or CPU work inside async def: await, "
            "or make it a plain def to run in a thread)", **fields)

    def _snapshot(self) -> list[tuple[str, str]]:
        """The running tasks (read from the thread while the loop may change them)."""
        for _ in range(3):
            with contextlib.suppress(RuntimeError):
                return list(self._running())
        return []


def _culprit_fields(current: tuple[str, str] | None, where: str | None) -> dict[str, Any]:
    """The log fields naming what blocked the loop, when known."""
    fields: dict[str, Any] = {}
    if current is not None:
        fields["task_type"], fields["task_id"] = current
    if where is not None:
        fields["where"] = where
    return fields


class _Handler(BaseHTTPRequestHandler):
    """GET of a route: its answer; anything else 404."""

    protocol_version = "HTTP/1.0"

    def handle(self) -> None:
        """One request; a client gone before its answer is written (a scrape or probe that
        timed out) is no error worth a traceback on stderr."""
        with contextlib.suppress(ConnectionError):
            super().handle()

    def do_GET(self) -> None:
        route = cast(_Served, self.server).routes.get(self.path.split("?", 1)[0])
        if route is None:
            status, kind, body = 404, "text/plain", b"not found\n"
        else:
            try:
                status, kind, body = route()
            except Exception as exc:  # an answer, whatever went wrong
                status, kind, body = 500, "text/plain", f"{exc!r}\n".encode()
        self.send_response(status)
        self.send_header("Content-Type", kind)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: Any) -> None:
        """Probes every few seconds are not worth a log line each."""


class _Served:
    routes: Mapping[str, Route]


class _TCPServer(ThreadingHTTPServer, _Served):
    daemon_threads = True


class _TCP6Server(_TCPServer):
    address_family = socket.AF_INET6


class _UnixServer(socketserver.ThreadingMixIn, socketserver.UnixStreamServer, _Served):
    daemon_threads = True


class ProbeServer:
    """HTTP GET ``routes`` (path -> answer) on ``host:port`` (port 0: a free one, see
    ``port``) or on the unix socket ``path``, from a daemon thread."""

    def __init__(self, routes: Mapping[str, Route], *, host: str = "127.0.0.1",
                 port: int | None = None, path: str | None = None) -> None:
        server: _TCPServer | _UnixServer
        if path is not None:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(path)  # left by a process that died
            server = _UnixServer(path, _Handler)
        else:
            kind = _TCP6Server if ":" in host else _TCPServer
            server = kind((host, port or 0), _Handler)
        server.routes = routes
        self._server = server
        self._path = path
        self._thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.2},
                                        name="asyncq-probes", daemon=True)
        self._thread.start()

    @property
    def port(self) -> int:
        """The TCP port served."""
        return int(cast(tuple[Any, ...], self._server.server_address)[1])

    def close(self) -> None:
        self._server.shutdown()
        self._server.server_close()
        if self._path is not None:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(self._path)


class _UnixConnection(http.client.HTTPConnection):
    def __init__(self, path: str, timeout: float) -> None:
        super().__init__("localhost", timeout=timeout)
        self._path = path

    def connect(self) -> None:
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        sock.settimeout(self.timeout)
        try:
            sock.connect(self._path)
        except OSError:
            sock.close()
            raise
        self.sock = sock


def get_unix(path: str, route: str, timeout: float) -> tuple[int, bytes]:
    """GET ``route`` from the ProbeServer on unix socket ``path``: status and body; raises
    OSError when nothing answers in time."""
    conn = _UnixConnection(path, timeout)
    try:
        conn.request("GET", route)
        reply = conn.getresponse()
        return reply.status, reply.read()
    except http.client.HTTPException as exc:
        raise OSError(f"bad reply from {path}: {exc!r}") from exc
    finally:
        conn.close()
