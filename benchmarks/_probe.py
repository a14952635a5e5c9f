"""In-worker bookkeeping shared by every adapter's task handlers (stdlib only).

Handlers call :func:`begin` when they start and :func:`done` with the task's index when they
finish. Counting happens in memory (a byte per index), so it adds no Redis round trip to the task
being measured; the numbers reach the driver as UDP datagrams on loopback:

* a snapshot ``{"n", "distinct", "over", "t_first", "t_last", ...}`` every 0.1 s from a daemon
  thread, and at once when the expected number of executions is reached;
* for the latency scenario, :func:`started` sends ``{"lat": i, "t": time.time()}`` the moment a
  handler starts.

``n`` counts executions, ``distinct`` the indices seen at least once and ``over`` the executions
of an index seen before (duplicates), so "exactly once" is ``n == distinct == expected``.
Timestamps are ``time.time()`` (wall clock), comparable with the driver's on the same machine.
"""

from __future__ import annotations

import contextlib
import json
import os
import socket
import threading
import time

_EXPECTED = int(os.environ.get("BENCH_N", "0"))
_PORT = int(os.environ.get("BENCH_UDP_PORT", "0"))
_ADDR = ("127.0.0.1", _PORT)

_counts = bytearray(_EXPECTED)
_sock: socket.socket | None = None

n = 0
distinct = 0
over = 0
out_of_range = 0
t_first = 0.0
t_last = 0.0


def _snapshot() -> bytes:
    return json.dumps({
        "pid": os.getpid(), "n": n, "distinct": distinct, "over": over,
        "out_of_range": out_of_range, "t_first": t_first, "t_last": t_last,
        "t_sent": time.time(),
    }).encode()


def _send(data: bytes) -> None:
    if _sock is not None:
        with contextlib.suppress(OSError):
            _sock.sendto(data, _ADDR)


def _reporter() -> None:
    while True:
        time.sleep(0.1)
        _send(_snapshot())


def install() -> None:
    """Open the UDP socket and start the snapshot thread (call once, in the worker process)."""
    global _sock
    if _sock is not None or not _PORT:
        return
    _sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    threading.Thread(target=_reporter, name="bench-probe", daemon=True).start()
    _send(json.dumps({"hello": os.getpid(), "t": time.time()}).encode())


def begin() -> None:
    """A handler started (only the first call matters: it starts the drain clock)."""
    global t_first
    if not t_first:
        t_first = time.time()


def started(i: int) -> None:
    """Latency scenario: report this handler's start time right away."""
    begin()
    _send(b'{"lat":%d,"t":%r}' % (i, time.time()))


def done(i: int) -> None:
    """A handler for index ``i`` finished."""
    global n, distinct, over, out_of_range, t_first, t_last
    now = time.time()
    if not t_first:
        t_first = now
    t_last = now
    n += 1
    if 0 <= i < _EXPECTED:
        c = _counts[i]
        if c == 0:
            distinct += 1
        else:
            over += 1
        if c < 255:
            _counts[i] = c + 1
    else:
        out_of_range += 1
    if n == _EXPECTED:
        _send(_snapshot())
