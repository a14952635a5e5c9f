"""Installing POSIX signal handlers on the running event loop for the life of a ``with``."""

from __future__ import annotations

import asyncio
import contextlib
import signal
import threading
from collections.abc import Callable, Iterator, Mapping


@contextlib.contextmanager
def signal_handlers(enabled: bool,
                    handlers: Mapping[signal.Signals, Callable[[], object]]) -> Iterator[None]:
    """Route ``handlers`` while inside the block; a no-op when disabled or off the main thread
    (the event loop can only install signal handlers there)."""
    if not enabled or threading.current_thread() is not threading.main_thread():
        yield
        return
    loop = asyncio.get_running_loop()
    for sig, fn in handlers.items():
        loop.add_signal_handler(sig, fn)
    try:
        yield
    finally:
        for sig in handlers:
            loop.remove_signal_handler(sig)
