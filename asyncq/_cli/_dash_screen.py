"""The curses screen of ``asyncq dash``: refreshes a snapshot of the queues and workers and
draws it (imported when the command runs: building the parser needs none of it).

Quits on ``q`` or Ctrl-C with exit code 0 and the terminal restored; a window too small for the
view shows a message instead. Redis errors while running are shown on screen, not fatal.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import curses
import os
import time
from typing import Any

from .._errors import AsyncqError
from .._inspector._inspector import Inspector
from ._common import check_redis
from ._dash_view import Rates, Snapshot, render, take_snapshot

_KEY_POLL_MS = 100  # how often keys are checked between refreshes


def run_dash(args: argparse.Namespace) -> int:
    """Show the view until q or Ctrl-C (``args`` checked by ``asyncq dash``); exit code 0."""
    with asyncio.Runner() as runner:
        runner.run(check_redis(args.redis_url))
        inspector = Inspector(args.redis_url)
        # Size the view from the terminal itself: curses prefers LINES/COLUMNS when they are
        # set (often stale), and would then also ignore resizes.
        os.environ.pop("LINES", None)
        os.environ.pop("COLUMNS", None)
        try:
            curses.wrapper(_main, Dash(runner, inspector, args))
        except KeyboardInterrupt:
            pass  # Ctrl-C: curses.wrapper has restored the terminal
        finally:
            with contextlib.suppress(Exception, KeyboardInterrupt):
                runner.run(inspector.close())
    return 0


class Dash:
    """The refresh loop state: fetches a snapshot every ``refresh`` seconds and draws it."""

    def __init__(self, runner: asyncio.Runner, inspector: Inspector,
                 args: argparse.Namespace) -> None:
        self.runner = runner
        self.inspector = inspector
        self.url: str = args.redis_url
        self.refresh: float = args.refresh
        self.only: list[str] = args.queue
        self.snapshot: Snapshot | None = None
        self.rates = Rates()
        self.error: str | None = None

    def fetch(self) -> None:
        try:
            self.snapshot = self.runner.run(take_snapshot(self.inspector, self.only))
        except AsyncqError as exc:
            self.error = str(exc)
        else:
            self.error = None
            self.rates.update(self.snapshot)

    def draw(self, screen: Any) -> None:
        height, width = screen.getmaxyx()
        lines = render(self.snapshot, self.rates, width=width, height=height, url=self.url,
                       refresh=self.refresh, error=self.error)
        screen.erase()
        for y, text in enumerate(lines):
            # Writing the bottom-right cell moves the cursor off the screen, an error in curses:
            # the last line stops one cell short.
            room = width - 1 if y == height - 1 else width
            with contextlib.suppress(curses.error):
                screen.addnstr(y, 0, text, max(0, room))
        screen.refresh()


def _main(screen: Any, dash: Dash) -> None:
    with contextlib.suppress(curses.error):
        curses.curs_set(0)
    screen.timeout(_KEY_POLL_MS)
    next_refresh = 0.0
    while True:
        now = time.monotonic()
        if now >= next_refresh:
            dash.fetch()
            dash.draw(screen)
            next_refresh = time.monotonic() + dash.refresh
        key = screen.getch()
        if key in (ord("q"), ord("Q")):
            return
        if key == curses.KEY_RESIZE:
            dash.draw(screen)
