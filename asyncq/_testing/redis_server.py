"""A throwaway ``redis-server`` subprocess for tests.

:class:`RedisServer` runs a real ``redis-server`` bound to a free loopback port,
in its own temporary directory, with persistence off by default.  Extra
command-line arguments (``--appendonly yes``, ``--requirepass ...``, TLS or
cluster options) can be appended; later arguments override earlier ones, as
``redis-server`` itself takes the last occurrence of an option.

Example::

    with RedisServer(["--appendonly", "yes"]) as server:
        client = redis.Redis.from_url(server.url)
        ...
        server.kill()      # simulate a crash
        server.restart()   # same port, same directory (the AOF is replayed)
"""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import signal
import socket
import ssl
import subprocess
import tempfile
import time
import weakref
from collections.abc import Sequence
from pathlib import Path
from types import TracebackType
from typing import Self

__all__ = ["HOST", "REDIS_NOT_FOUND", "RedisServer", "answers"]

REDIS_NOT_FOUND = (
    "redis-server not found; install it (apt-get install -y redis-server) "
    "or set ASYNCQ_TEST_REDIS_URL"
)

HOST = "127.0.0.1"
_DEFAULT_REDIS_PORT = 6379
_PORT_ATTEMPTS = 5
_STOP_TIMEOUT = 10.0
_POLL_INTERVAL = 0.02


def _free_port() -> int:
    """Return a loopback TCP port that is free right now (never 6379)."""
    while True:
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
            sock.bind((HOST, 0))
            port: int = sock.getsockname()[1]
        if port != _DEFAULT_REDIS_PORT:
            return port


_PROCESS_ID = re.compile(rb"\r\nprocess_id:(\d+)\r\n")


def answers(host: str, port: int, pid: int, timeout: float = 0.5,
             ssl_context: ssl.SSLContext | None = None) -> bool:
    """True once the server with process id ``pid`` accepts commands on ``port``.

    Sends ``PING`` and ``INFO server``: the pid check makes sure that the
    server answering is ours and not another one that took the port.  A
    ``-NOAUTH`` reply counts as ready (the server is up, it just wants a
    password); ``-LOADING`` (still replaying its AOF/RDB) does not.  With
    ``ssl_context`` the check goes through TLS (a TLS-only server).
    """
    buf = b""
    try:
        with contextlib.ExitStack() as stack:
            sock = stack.enter_context(socket.create_connection((host, port), timeout=timeout))
            if ssl_context is not None:
                sock = stack.enter_context(ssl_context.wrap_socket(sock, server_hostname=host))
            sock.sendall(b"PING\r\nINFO server\r\n")
            while len(buf) < 65536:
                chunk = sock.recv(4096)
                if not chunk:
                    break
                buf += chunk
                if _PROCESS_ID.search(buf) or (buf.startswith(b"-") and b"\r\n" in buf):
                    break
    except OSError:
        pass
    if buf.startswith(b"-NOAUTH"):
        return True
    match = _PROCESS_ID.search(buf)
    return buf.startswith(b"+PONG") and match is not None and int(match.group(1)) == pid


def _terminate(proc: subprocess.Popen[bytes]) -> None:
    """SIGTERM, wait, then SIGKILL.  Safe to call on an exited process."""
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout=_STOP_TIMEOUT)
        except subprocess.TimeoutExpired:
            proc.kill()
    proc.wait()


class RedisServer:
    """A ``redis-server`` subprocess on ``127.0.0.1`` and a free port.

    Args:
        extra_args: Further ``redis-server`` arguments, appended after the
            defaults (``["--appendonly", "yes"]``, ``["--requirepass", "pw"]``...).
        port: A fixed port.  By default a free one is picked, and another one
            is tried if it is taken by the time the server binds it.
        startup_timeout: Seconds :meth:`start` waits for the server to answer.
        executable: Path of the ``redis-server`` binary (default: from ``PATH``).
    """

    def __init__(
        self,
        extra_args: Sequence[str] = (),
        *,
        port: int | None = None,
        startup_timeout: float = 10.0,
        executable: str | None = None,
    ) -> None:
        self._extra_args = list(extra_args)
        self._port_is_fixed = port is not None
        self._port = port if port is not None else _free_port()
        self._startup_timeout = startup_timeout
        self._executable = executable
        self._dir = Path(tempfile.mkdtemp(prefix="asyncq-redis-"))
        self._proc: subprocess.Popen[bytes] | None = None
        # Never leave a server or a directory behind, even if close() is not
        # called: on garbage collection or interpreter exit, the finalizer
        # stops whatever process is in the cell and removes the directory.
        self._proc_cell: list[subprocess.Popen[bytes] | None] = [None]
        self._finalizer = weakref.finalize(self, _cleanup, self._dir, self._proc_cell, os.getpid())

    # ------------------------------------------------------------ properties

    @property
    def host(self) -> str:
        return HOST

    @property
    def port(self) -> int:
        return self._port

    @property
    def url(self) -> str:
        return f"redis://{HOST}:{self._port}/0"

    @property
    def dir(self) -> Path:
        """The server's working directory (``--dir``); kept across restarts."""
        return self._dir

    @property
    def log_path(self) -> Path:
        """File receiving the server's stdout/stderr (appended to across restarts)."""
        return self._dir / "redis-server.log"

    @property
    def pid(self) -> int | None:
        return self._proc.pid if self.running and self._proc is not None else None

    @property
    def running(self) -> bool:
        return self._proc is not None and self._proc.poll() is None

    # ------------------------------------------------------------- lifecycle

    def args(self) -> list[str]:
        """The full ``redis-server`` command line (without the binary)."""
        return [
            "--bind", HOST,
            "--port", str(self._port),
            "--save", "",
            "--appendonly", "no",
            "--dir", str(self._dir),
            "--daemonize", "no",
            "--protected-mode", "yes",
            *self._extra_args,
        ]  # fmt: skip

    def start(self) -> Self:
        """Start the server and wait until it answers PING.

        Raises:
            RuntimeError: ``redis-server`` is missing, exits, or does not
                answer within ``startup_timeout``; the message includes the
                tail of its log.
        """
        if self.running:
            return self
        binary = self._executable or shutil.which("redis-server")
        if binary is None:
            raise RuntimeError(REDIS_NOT_FOUND)
        if not self._finalizer.alive:
            raise RuntimeError("this RedisServer was closed; create a new one")
        attempts = 1 if self._port_is_fixed else _PORT_ATTEMPTS
        for attempt in range(1, attempts + 1):
            try:
                self._spawn_and_wait(binary)
            except _PortInUse:
                if attempt == attempts:
                    raise RuntimeError(
                        f"redis-server could not bind port {self._port}: address in use\n"
                        + self.log_tail()
                    ) from None
                self._port = _free_port()
            else:
                # From now on the port is part of the server's identity (restart()).
                self._port_is_fixed = True
                return self
        raise AssertionError("unreachable")  # pragma: no cover

    def stop(self) -> None:
        """Stop the server gracefully (SIGTERM, then SIGKILL after 10 s)."""
        if self._proc is not None:
            _terminate(self._proc)
            self._proc = None

    def kill(self) -> None:
        """SIGKILL the server, as a crash would (for fault-injection tests)."""
        if self._proc is not None:
            if self._proc.poll() is None:
                self._proc.kill()
            self._proc.wait()
            self._proc = None

    def restart(self) -> Self:
        """Stop (if running) and start again on the same port and directory."""
        self.stop()
        self._port_is_fixed = True
        return self.start()

    def close(self) -> None:
        """Stop the server and delete its directory."""
        self.stop()
        self._finalizer()

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    def __repr__(self) -> str:
        state = "running" if self.running else "stopped"
        return f"<RedisServer {self.url} {state}>"

    def log_tail(self, lines: int = 30) -> str:
        """The last ``lines`` lines of the server's log, for error messages."""
        try:
            text = self.log_path.read_text(errors="replace")
        except OSError:
            return "(no redis-server log)"
        return "\n".join(text.splitlines()[-lines:])

    # -------------------------------------------------------------- internal

    def _ready(self, pid: int) -> bool:
        """Does the server with process id ``pid`` answer? (A TLS server overrides this.)"""
        return answers(HOST, self._port, pid)

    def _spawn_and_wait(self, binary: str) -> None:
        # The child keeps its own copy of the log's descriptor; ours is closed at once.
        with self.log_path.open("ab") as log:
            log_start = log.tell()
            proc = subprocess.Popen(
                [binary, *self.args()],
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                cwd=self._dir,
            )
        self._proc = self._proc_cell[0] = proc
        deadline = time.monotonic() + self._startup_timeout
        while True:
            if proc.poll() is not None:
                self._proc = None
                if b"Address already in use" in self._log_since(log_start):
                    raise _PortInUse
                raise RuntimeError(
                    f"redis-server exited with code {proc.returncode} on port {self._port}:\n"
                    + self.log_tail()
                )
            if self._ready(proc.pid):
                return
            if time.monotonic() > deadline:
                self.stop()
                raise RuntimeError(
                    f"redis-server did not answer PING on {HOST}:{self._port} "
                    f"within {self._startup_timeout:g} s:\n" + self.log_tail()
                )
            time.sleep(_POLL_INTERVAL)

    def _log_since(self, offset: int) -> bytes:
        try:
            with self.log_path.open("rb") as f:
                f.seek(offset)
                return f.read()
        except OSError:
            return b""


class _PortInUse(Exception):
    """The chosen port was taken before redis-server could bind it."""


def _cleanup(
    directory: Path, proc_cell: list[subprocess.Popen[bytes] | None], owner_pid: int
) -> None:
    if os.getpid() != owner_pid:  # a forked child must not touch the parent's server
        return
    proc = proc_cell[0]
    if proc is not None:
        with contextlib.suppress(OSError):
            _terminate(proc)
    shutil.rmtree(directory, ignore_errors=True)
