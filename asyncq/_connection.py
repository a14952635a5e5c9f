"""Turns what the user passes (a URL or a ready redis.asyncio client) into a RedisBroker."""

from __future__ import annotations

from redis.asyncio import Redis

from ._broker import RedisBroker
from ._clock import SYSTEM_CLOCK, Clock

RedisLike = str | Redis

URL_FORMS = (
    "redis://[[user]:password@]host[:port][/db], rediss://... (TLS), "
    "unix://[[user]:password@]/path/to/socket[?db=N]"
)


def make_redis(url: str) -> Redis:
    """Create a redis.asyncio client from a URL, or raise ValueError listing the accepted forms."""
    if not isinstance(url, str) or not url.startswith(("redis://", "rediss://", "unix://")):
        raise ValueError(f"unsupported Redis URL {url!r}; accepted forms: {URL_FORMS}")
    try:
        return Redis.from_url(
            url, decode_responses=False, socket_connect_timeout=5.0, health_check_interval=15,
        )
    except ValueError as exc:
        raise ValueError(f"invalid Redis URL {url!r}: {exc}; accepted forms: {URL_FORMS}") from exc


def make_broker(redis: RedisLike, *, clock: Clock = SYSTEM_CLOCK) -> RedisBroker:
    """A broker over ``redis``; a client passed in stays the caller's (it is not closed)."""
    if isinstance(redis, str):
        return RedisBroker(make_redis(redis), owns_client=True, clock=clock)
    if isinstance(redis, Redis):
        if redis.get_encoder().decode_responses:  # type: ignore[no-untyped-call]
            raise ValueError("asyncq needs a redis client created with decode_responses=False")
        return RedisBroker(redis, owns_client=False, clock=clock)
    raise TypeError(f"expected a Redis URL or a redis.asyncio.Redis client, got {redis!r}")
