"""The benchmark's own redis-server and a minimal RESP client (stdlib only).

The suite never touches a Redis it did not start: it launches ``redis-server`` on a free
loopback port (never 6379), without persistence, and stops it at the end.
"""

from __future__ import annotations

import contextlib
import re
import shutil
import socket
import subprocess
import tempfile
import time
from pathlib import Path
from types import TracebackType
from typing import BinaryIO, Self


def _free_port() -> int:
    while True:
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
            s.bind(("127.0.0.1", 0))
            port: int = s.getsockname()[1]
        if port != 6379:
            return port


def _read_reply(f: BinaryIO) -> object:
    line = f.readline()
    if not line:
        raise ConnectionError("redis closed the connection")
    kind, rest = line[:1], line[1:-2]
    if kind == b"+":
        return rest.decode()
    if kind == b"-":
        raise RuntimeError(rest.decode())
    if kind == b":":
        return int(rest)
    if kind == b"$":
        size = int(rest)
        if size < 0:
            return None
        data = f.read(size + 2)
        return data[:-2].decode(errors="replace")
    if kind == b"*":
        count = int(rest)
        return None if count < 0 else [_read_reply(f) for _ in range(count)]
    raise RuntimeError(f"unexpected reply {line!r}")


def command(port: int, *args: str, timeout: float = 30.0) -> object:
    """Send one command to 127.0.0.1:port and return its (decoded) reply."""
    payload = f"*{len(args)}\r\n".encode()
    for a in args:
        b = a.encode()
        payload += b"$%d\r\n%s\r\n" % (len(b), b)
    with socket.create_connection(("127.0.0.1", port), timeout=timeout) as sock:
        sock.sendall(payload)
        with sock.makefile("rb") as f:
            return _read_reply(f)


def info(port: int, section: str = "") -> dict[str, str]:
    text = str(command(port, "INFO", *([section] if section else [])))
    out: dict[str, str] = {}
    for line in text.splitlines():
        if ":" in line and not line.startswith("#"):
            k, v = line.split(":", 1)
            out[k] = v
    return out


class RedisServer:
    """``redis-server`` on 127.0.0.1 and a free port, persistence off, in a temp directory."""

    def __init__(self) -> None:
        self.port = _free_port()
        self.dir = Path(tempfile.mkdtemp(prefix="asyncq-bench-redis-"))
        self.proc: subprocess.Popen[bytes] | None = None
        self.args: list[str] = []

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    def start(self) -> Self:
        binary = shutil.which("redis-server")
        if binary is None:
            raise RuntimeError("redis-server not found (apt-get install -y redis-server)")
        self.args = [binary, "--bind", "127.0.0.1", "--port", str(self.port), "--save", "",
                     "--appendonly", "no", "--dir", str(self.dir), "--protected-mode", "yes",
                     "--daemonize", "no"]
        log = (self.dir / "redis.log").open("ab")
        self.proc = subprocess.Popen(self.args, stdin=subprocess.DEVNULL, stdout=log,
                                     stderr=subprocess.STDOUT)
        log.close()
        deadline = time.monotonic() + 10
        while True:
            if self.proc.poll() is not None:
                raise RuntimeError("redis-server exited:\n"
                                   + (self.dir / "redis.log").read_text(errors="replace"))
            with contextlib.suppress(OSError, RuntimeError, ConnectionError):
                if command(self.port, "PING", timeout=0.5) == "PONG":
                    pid = int(info(self.port, "server").get("process_id", "0"))
                    if pid == self.proc.pid:
                        return self
            if time.monotonic() > deadline:
                self.stop()
                raise RuntimeError(f"redis-server did not answer on port {self.port}")
            time.sleep(0.05)

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.proc = None
        shutil.rmtree(self.dir, ignore_errors=True)

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.stop()


_RPS = re.compile(r"^(?P<name>.+?): (?P<rps>[\d.]+) requests per second"
                  r"(?:, p50=(?P<p50>[\d.]+) msec)?")


def redis_benchmark(port: int, n: int, *args: str, clients: int = 50,
                    pipeline: int = 1) -> dict[str, dict[str, float]]:
    """Run ``redis-benchmark -q`` and parse ``NAME: X requests per second, p50=Y msec``."""
    binary = shutil.which("redis-benchmark")
    if binary is None:
        raise RuntimeError("redis-benchmark not found (apt-get install -y redis-tools)")
    cmd = [binary, "-h", "127.0.0.1", "-p", str(port), "-q", "-n", str(n), "-c", str(clients),
           "-P", str(pipeline), *args]
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=300, check=True).stdout
    results: dict[str, dict[str, float]] = {}
    for chunk in out.replace("\r", "\n").splitlines():
        m = _RPS.match(chunk.strip())
        if m:
            entry = {"rps": float(m["rps"])}
            if m["p50"]:
                entry["p50_ms"] = float(m["p50"])
            results[m["name"]] = entry
    return results
