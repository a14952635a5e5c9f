"""A lean pipeline for plain (non-cluster) Redis connections: RESP packed by hand.

redis-py packs every pipelined command through a general-purpose encoder; for thousands of
EVALSHA calls that dominates the cost of a batch. Here the whole batch is packed into one
buffer, sent on one pooled connection and its replies read back in order, still parsed by
redis-py's (hiredis) parser.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence
from typing import Any

from hiredis import pack_command as hiredis_pack
from redis._parsers.hiredis import NOT_ENOUGH_DATA, _AsyncHiredisParser
from redis.asyncio import Redis
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import DataError, ResponseError
from redis.exceptions import TimeoutError as RedisTimeoutError


def _encode(arg: Any) -> bytes | bytearray | memoryview:
    """One argument as redis-py's encoder sends it (UTF-8 strings, ``repr`` of numbers), with
    its error for the types it refuses (None, bool, containers...)."""
    if isinstance(arg, bytes | bytearray | memoryview):
        return arg
    if isinstance(arg, str):
        return arg.encode()
    if type(arg) is int:
        return b"%d" % arg
    if isinstance(arg, int | float) and not isinstance(arg, bool):
        return repr(arg).encode()
    raise DataError(f"Invalid input of type: '{type(arg).__name__}'. "
                    f"Convert to a bytes, string, int or float first.")


_PACKED: dict[str, bytes] = {}  # str argument -> its RESP bulk string
_PACKED_MAX = 4096


def pack(args: Sequence[Any]) -> bytes:
    """One command as a RESP array of bulk strings: the bytes redis-py's
    ``Connection.pack_commands`` makes of it (pinned by tests/broker/test_resp.py). The command name
    must be given as separate words (``"SCRIPT", "LOAD"``).

    hiredis' C encoder packs the common types (str, bytes, int, float) the same way, in half the
    time; anything else (a bytearray, or a type both refuse, with redis-py's error) is packed
    here."""
    try:
        packed: bytes = hiredis_pack(args if type(args) is tuple else tuple(args))
    except TypeError:
        return _pack(args)
    return packed


def _pack(args: Sequence[Any]) -> bytes:
    parts = [b"*%d\r\n" % len(args)]
    packed = _PACKED
    for arg in args:
        kind = type(arg)  # the common exact types first: this runs for every argument
        if kind is str:
            # Most strings recur (the script's SHA, a queue's key names, channels): packed
            # once. Task ids pass through too, so the cache is emptied when it fills up.
            bulk = packed.get(arg)
            if bulk is None:
                data = arg.encode()
                bulk = b"$%d\r\n%b\r\n" % (len(data), data)
                if len(packed) >= _PACKED_MAX:
                    packed.clear()
                packed[arg] = bulk
            parts.append(bulk)
            continue
        if kind is bytes:
            data = arg
        elif kind is int:
            data = b"%d" % arg
        else:
            data = _encode(arg)
        parts.append(b"$%d\r\n%b\r\n" % (len(data), data))
    return b"".join(parts)


def supports_raw_pipeline(redis: object) -> bool:
    """Any single-node client (a Sentinel-managed master too); cluster clients route per slot
    through ``_cluster.pipeline`` instead."""
    return isinstance(redis, Redis)


async def raw_pipeline(redis: Redis, commands: Sequence[bytes]) -> list[Any]:
    """Send packed commands in one write and return their replies in order.

    An error reply is returned as the ResponseError (like ``execute(raise_on_error=False)``);
    a connection error propagates and the connection is dropped, not reused.
    """
    pool = redis.connection_pool
    conn = await pool.get_connection()  # type: ignore[no-untyped-call]
    try:
        return await exchange(conn, commands)
    finally:
        await pool.release(conn)


async def exchange(conn: Any, commands: Sequence[bytes]) -> list[Any]:
    """Write packed commands on ``conn`` at once and read their replies (error replies as
    exceptions); on a connection error the connection is disconnected and the error raised.
    Also used on the connections of a cluster node (one pipeline per master)."""
    try:
        await send(conn, b"".join(commands))
        replies: list[Any] = []
        gets = _buffered_reader(conn)
        count = len(commands)
        while len(replies) < count:
            if gets is not None and replies:
                # Replies already in the buffer are taken as they are: only a wait for more
                # data goes through read_response (and its timeout).
                reply = gets()
                if reply is not NOT_ENOUGH_DATA:
                    if isinstance(reply, RedisConnectionError):
                        raise reply
                    replies.append(reply)  # (an error reply is an exception object)
                    continue
            try:
                replies.append(await conn.read_response())
            except ResponseError as exc:
                replies.append(exc)
        return replies
    except BaseException:
        await conn.disconnect()
        raise


def _buffered_reader(conn: Any) -> Callable[[], Any] | None:
    """The hiredis reader's ``gets`` of a RESP2 connection (the next complete reply in its
    buffer, ``NOT_ENOUGH_DATA`` when there is none yet), or None for another parser."""
    reader = getattr(conn._parser, "_reader", None)
    if (not isinstance(conn._parser, _AsyncHiredisParser) or reader is None
            or getattr(conn, "protocol", 2) not in (2, "2", None)):
        return None
    gets: Callable[[], Any] = reader.gets
    return gets


async def send(conn: Any, data: bytes) -> None:
    """``conn.send_packed_command(data)`` without its per-write ``asyncio.wait_for`` (a task
    and an extra loop turn on Python 3.11) when the connection is up and no health check is
    due: the bytes go to the transport at once, and only a full send buffer is waited on,
    within the socket timeout. Errors as redis-py raises them."""
    writer = conn._writer if conn.is_connected else None
    if writer is None or (conn.health_check_interval
                          and asyncio.get_running_loop().time() > conn.next_health_check):
        await conn.send_packed_command(data)  # connecting, or a health check is due
        return
    try:
        writer.write(data)
        if writer.transport.get_write_buffer_size():
            async with asyncio.timeout(conn.socket_timeout):
                await writer.drain()
    except TimeoutError:
        await conn.disconnect(nowait=True)
        raise RedisTimeoutError("Timeout writing to socket") from None
    except OSError as exc:
        await conn.disconnect(nowait=True)
        raise RedisConnectionError(f"Error while writing to socket: {exc}") from exc
