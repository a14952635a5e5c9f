"""The server of a supervised worker's metrics and probes: a scraper or prober that goes away
before its answer is written (a scrape timing out) costs no traceback on stderr."""

from __future__ import annotations

import socket
import struct
import threading

import pytest

from asyncq._service._health import ProbeServer
from asyncq.testing import wait_until


def handling() -> bool:
    """Whether a request thread of a server still runs."""
    return any("process_request_thread" in t.name for t in threading.enumerate())


@pytest.mark.anyio
async def test_a_client_gone_before_its_answer_leaves_no_traceback(
    capfd: pytest.CaptureFixture[str],
) -> None:
    asked = threading.Event()

    def metrics() -> tuple[int, str, bytes]:
        asked.set()
        return 200, "text/plain", b"x" * (8 << 20)  # (more than the socket buffers hold)

    server = ProbeServer({"/metrics": metrics}, port=0)
    try:
        client = socket.create_connection(("127.0.0.1", server.port))
        client.sendall(b"GET /metrics HTTP/1.0\r\n\r\n")
        await wait_until(asked.is_set, message="the route asked")
        client.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        client.close()  # a reset: the answer being written cannot be
        await wait_until(lambda: not handling(), message="the request handled")
    finally:
        server.close()
    err = capfd.readouterr().err
    assert "Traceback" not in err and "Error" not in err, err
