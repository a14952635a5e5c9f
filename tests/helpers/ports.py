"""Loopback TCP ports free right now, for the servers and processes a test starts: the one way
tests pick a port (never a fixed or random number, never Redis's 6379 or a developer's 6390)."""

from __future__ import annotations

import socket

HOST = "127.0.0.1"
#: Ports a test must never take even when the system offers them: a local Redis's default
#: port and the one ``make redis-up`` uses.
TAKEN = frozenset({6379, 6390})
#: A Redis Cluster node also listens on its bus port, port + BUS_OFFSET.
BUS_OFFSET = 10000


def free_port() -> int:
    """A port nobody listens on right now (the system's pick; a connection to it is refused
    until something binds it)."""
    while True:
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
            sock.bind((HOST, 0))
            port: int = sock.getsockname()[1]
        if port not in TAKEN:
            return port


def free_ports(count: int, *, bus: bool = False) -> list[int]:
    """``count`` distinct free ports; with ``bus`` each one's cluster bus port (port +
    BUS_OFFSET) is free too."""
    ports: list[int] = []
    while len(ports) < count:
        port = free_port()
        if port in ports:
            continue
        if bus and (port + BUS_OFFSET > 65535 or port + BUS_OFFSET in TAKEN
                    or not _bindable(port + BUS_OFFSET)):
            continue
        ports.append(port)
    return ports


def _bindable(port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        try:
            sock.bind((HOST, port))
        except OSError:
            return False
    return True
