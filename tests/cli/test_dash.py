"""``asyncq dash`` run headless inside tmux: it draws the queues, quits on q and Ctrl-C with exit
code 0 and the terminal restored, and copes with a window too small for it."""

from __future__ import annotations

import os
import shlex
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

import asyncq
from asyncq._cli._dash_view import Rates, Snapshot, render
from asyncq.testing import wait_until

TMUX = shutil.which("tmux")
needs_tmux = pytest.mark.skipif(TMUX is None, reason="tmux is not installed "
                                "(apt-get install tmux) so the dash cannot be run headless")


class Tmux:
    """A private tmux server (own socket) running one command in a detached session."""

    def __init__(self, workdir: Path) -> None:
        # A short socket path of our own (socket paths are limited to ~100 characters).
        self.socket_dir = tempfile.mkdtemp(prefix="aqtmux-")
        self.socket = os.path.join(self.socket_dir, "s")
        self.workdir = workdir

    def tmux(self, *args: str) -> str:
        assert TMUX is not None
        return subprocess.run([TMUX, "-S", self.socket, *args], check=True,
                              capture_output=True, text=True, timeout=10).stdout

    def start(self, command: list[str], env: dict[str, str], width: int, height: int) -> None:
        """Run ``command``; when it ends its exit code and ``stty -a`` land in files."""
        exports = " ".join(f"{k}={shlex.quote(v)}" for k, v in env.items())
        # The shell traps SIGINT (Ctrl-C reaches the whole foreground group) so that it lives
        # to record the exit code; the command itself gets the default SIGINT handling.
        script = (f"trap true INT; export {exports}; {shlex.join(command)}; echo $? > exit.txt; "
                  "stty -a > stty.txt; echo done > finished.txt")
        self.tmux("new-session", "-d", "-s", "dash", "-x", str(width), "-y", str(height),
                  "-c", str(self.workdir), "sh", "-c", script)

    def screen(self) -> str:
        try:
            return self.tmux("capture-pane", "-p", "-t", "dash")
        except subprocess.CalledProcessError:
            return ""  # the session has ended

    def exit_code(self) -> int | None:
        if not (self.workdir / "finished.txt").exists():
            return None
        return int((self.workdir / "exit.txt").read_text())

    def close(self) -> None:
        subprocess.run([TMUX or "tmux", "-S", self.socket, "kill-server"], capture_output=True,
                       check=False, timeout=10)
        shutil.rmtree(self.socket_dir, ignore_errors=True)


@pytest.fixture
def tmux(tmp_path: Path) -> Iterator[Tmux]:
    t = Tmux(tmp_path)
    try:
        yield t
    finally:
        t.close()


@pytest.fixture
def queue_with_tasks(asyncq_redis_url: str, asyncq_queue: str) -> str:
    import anyio

    async def seed() -> None:
        async with asyncq.Client(asyncq_redis_url) as client:
            for n in range(3):
                await client.enqueue("t", {"n": n}, queue=asyncq_queue)

    anyio.run(seed)
    return asyncq_queue


def dash(tmux: Tmux, url: str, queue: str, width: int = 160, height: int = 40) -> None:
    # Other tests' queues share the Redis server: show only ours so it is never scrolled off.
    tmux.start([sys.executable, "-m", "asyncq", "dash", "--refresh", "0.2", "-q", queue],
               {"ASYNCQ_REDIS_URL": url, "TERM": "xterm"}, width, height)


def wait_for(predicate: object, message: str, timeout: float = 15.0) -> object:
    import anyio

    async def poll() -> object:
        return await wait_until(predicate, timeout=timeout, message=message)  # type: ignore[arg-type]

    return anyio.run(poll)


def assert_exited_cleanly(tmux: Tmux) -> None:
    wait_for(lambda: tmux.exit_code() is not None, "dash exited")
    assert tmux.exit_code() == 0
    stty = (tmux.workdir / "stty.txt").read_text().split()
    assert "icanon" in stty and "echo" in stty  # curses restored the terminal modes


@needs_tmux
@pytest.mark.parametrize("key", ["q", "C-c"])
def test_dash_shows_queue_and_quits(tmux: Tmux, asyncq_redis_url: str, queue_with_tasks: str,
                                    key: str) -> None:
    dash(tmux, asyncq_redis_url, queue_with_tasks)
    screen = str(wait_for(lambda: (s := tmux.screen()) and queue_with_tasks in s and s,
                          "queue shown on the dash"))
    row = next(ln for ln in screen.splitlines() if ln.startswith(queue_with_tasks))
    assert row.split()[1:4] == ["run", "3", "3"]  # state, size, pending
    assert "Workers (" in screen and "q: quit" in screen
    tmux.tmux("send-keys", "-t", "dash", key)
    assert_exited_cleanly(tmux)


@needs_tmux
def test_dash_in_a_tiny_window(tmux: Tmux, asyncq_redis_url: str, queue_with_tasks: str) -> None:
    dash(tmux, asyncq_redis_url, queue_with_tasks, width=30, height=5)
    wait_for(lambda: "terminal too small" in tmux.screen(), "too-small message shown")
    tmux.tmux("resize-window", "-t", "dash", "-x", "160", "-y", "40")
    wait_for(lambda: queue_with_tasks in tmux.screen(), "queue shown after growing")
    tmux.tmux("resize-window", "-t", "dash", "-x", "8", "-y", "2")
    wait_for(lambda: "terminal" in tmux.screen(), "message shown in a 8x2 window")
    tmux.tmux("send-keys", "-t", "dash", "q")
    assert_exited_cleanly(tmux)


def test_dash_needs_a_terminal(asyncq_redis_url: str) -> None:
    proc = subprocess.run([sys.executable, "-m", "asyncq", "dash", "--redis-url",
                           asyncq_redis_url], capture_output=True, text=True, timeout=30,
                          stdin=subprocess.DEVNULL, check=False)
    assert proc.returncode == 1 and "needs a terminal" in proc.stderr


def test_render_fits_the_window() -> None:
    from datetime import UTC, datetime, timedelta

    infos = [asyncq.QueueInfo(
        queue=f"queue-{i}", size=i, pending=i, active=0, scheduled=0, retry=0, archived=0,
        completed=0, aggregating=0, groups=0, processed=0, failed=0, processed_total=10 * i,
        failed_total=i, paused=i == 1, latency=timedelta(seconds=i), memory_usage=0,
        expired_leases=0, timestamp=datetime.now(UTC)) for i in range(50)]
    rates = Rates()
    rates.update(Snapshot(1.0, infos, []))
    later = [asyncq.QueueInfo(**{**{f: getattr(q, f) for f in q.__dataclass_fields__},
                                 "processed_total": q.processed_total + 20})
             for q in infos]
    rates.update(Snapshot(3.0, later, []))
    assert rates.per_queue["queue-4"] == (10.0, 0.0)
    for width, height in ((80, 24), (60, 10), (200, 60), (59, 30), (10, 1), (1, 1)):
        lines = render(Snapshot(3.0, later, []), rates, width=width, height=height,
                       url="redis://:secret@h:1/0", refresh=1, error=None)
        assert len(lines) <= height and all(len(ln) <= width for ln in lines)
        assert not any("secret" in ln for ln in lines)
    lines = render(Snapshot(3.0, later, []), rates, width=120, height=24, url="redis://h",
                   refresh=1)
    assert any("more queue(s)" in ln for ln in lines) and "no live workers" in lines
