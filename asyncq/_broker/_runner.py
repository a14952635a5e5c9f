"""ScriptRunner: the one door through which asyncq reaches Redis.

It runs one Lua script or many pipelined (a single server and a Redis Cluster alike; NOSCRIPT
handled by loading the script and sending the call again): on a single node (a Sentinel-managed
master too) through the lean connections of ``_lean`` when the client's settings allow it
(``_lean_settings``), else through redis-py's pool (a cluster: per node, see ``_cluster``). The
few plain commands asyncq needs besides always go through redis-py: global keys read or
written one key per command, INFO and SCAN per master, pub/sub. Every redis-py error (the lean
connections raise the same ones) leaves it as a BrokerError (mapped by ``_redis_errors``: its
``transient`` and ``refused`` say what trying again can do), after the bookkeeping a broken
connection needs.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
from collections.abc import Awaitable, Callable, Sequence
from typing import Any

from redis.asyncio import Redis, RedisCluster
from redis.asyncio.client import PubSub
from redis.exceptions import (
    AuthenticationError,
    BusyLoadingError,
    MaxConnectionsError,
    NoScriptError,
    RedisError,
    ResponseError,
)
from redis.exceptions import ConnectionError as RedisConnectionError

from .._errors import BrokerError
from . import _cluster
from ._calls import ScriptCall
from ._cluster import POOL_WAIT_S
from ._lean import LeanPool
from ._lean_settings import LeanSettings, lean_settings
from ._redis_errors import broker_error, unreachable
from ._resp import pack, raw_pipeline, supports_raw_pipeline
from ._scripts import Script, load_scripts

PIPELINE_CHUNK = 1000  # script calls per round trip of run_many


def reply_error(what: str, reply: Exception) -> BrokerError:
    """The BrokerError reporting an error reply of a pipelined call, chained from it."""
    return broker_error(f"{what} failed: {reply}", reply)


class ScriptRunner:
    """Runs scripts and commands on ``redis`` (a ``Redis`` or ``RedisCluster`` created with
    ``decode_responses=False``).

    With ``lean`` (a client asyncq created, and closes with ``aclose``), script calls on a
    single node go through lean connections opened with the client's settings; a client
    the caller passed in is used as it is, through its own pool only.
    """

    def __init__(self, redis: Redis | RedisCluster, *, lean: bool = False) -> None:
        self.redis = redis
        self._cluster_ready = not isinstance(redis, RedisCluster)
        self._init_lock = asyncio.Lock()
        self.scripts = load_scripts()
        self._raw = supports_raw_pipeline(redis)
        # A single node's callers take turns for its pool's connections, first come first
        # served: a burst larger than max_connections waits in line instead of retrying in a
        # race some callers lose until they time out. (A cluster has a pool per node, with its
        # own wait in ``_cluster``.)
        size = getattr(getattr(redis, "connection_pool", None), "max_connections", None)
        self._turns = asyncio.Semaphore(size) if self._raw and isinstance(size, int) else None
        # The script calls of a single node go through a few pipelined connections of our
        # own: no pool to wait for, so a burst queues on them instead of taking turns.
        settings = lean_settings(redis) if lean else None
        self._lean = LeanPool(settings) if settings is not None else None

    @property
    def lean_settings(self) -> LeanSettings | None:
        """How the lean connections reach Redis (the subscriptions open theirs with it), or
        None when there are none (a cluster, a caller's own client)."""
        return self._lean.settings if self._lean is not None else None

    async def aclose(self) -> None:
        """Close the lean connections (the redis-py client is its owner's to close)."""
        if self._lean is not None:
            await self._lean.aclose()

    async def _ready(self) -> None:
        """Read a cluster's slots once, before the first call: many first calls at once would
        each start that read and close each other's connections."""
        if self._cluster_ready:
            return
        async with self._init_lock:
            if not self._cluster_ready:
                await self.redis.initialize()
                self._cluster_ready = True

    async def after_error(self, exc: RedisError) -> None:
        """A connection that broke usually means they all did (Redis restarted, the network
        dropped): drop the idle ones too, so the next calls connect afresh instead of each
        failing once on a dead socket; on a cluster, read the slots again (a failover may have
        moved them)."""
        if (isinstance(exc, RedisConnectionError)
                and not isinstance(exc, BusyLoadingError | MaxConnectionsError)):
            _cluster.after_connection_error(self.redis)
            if self._lean is not None:
                self._lean.drop_idle()
            pool = getattr(self.redis, "connection_pool", None)
            if pool is not None:
                with contextlib.suppress(Exception):
                    await pool.disconnect(inuse_connections=False)

    async def failed(self, what: str, exc: RedisError) -> BrokerError:
        """The BrokerError reporting ``exc`` (what failed, why, what to check), after the
        bookkeeping a broken connection needs (``after_error``)."""
        await self.after_error(exc)
        if isinstance(exc, AuthenticationError):
            return broker_error(f"Redis at {self.where} refused the credentials (authentication "
                                f"failed; check the user and password): {what} failed: {exc}",
                                exc)
        if isinstance(exc, MaxConnectionsError):
            return broker_error(f"no free connection to Redis at {self.where} in time (all "
                                f"max_connections busy): {what} failed: {exc}", exc)
        if unreachable(exc):
            return broker_error(f"cannot reach Redis at {self.where} (is it running, and is "
                                f"the address right?): {what} failed: {exc}", exc)
        return broker_error(f"{what} failed: {exc}", exc)

    @property
    def where(self) -> str:
        """The address of the Redis this runner talks to, for messages (never a password)."""
        return _cluster.address(self.redis)

    # -- scripts

    async def run(self, name: str, keys: Sequence[str], args: Sequence[Any]) -> Any:
        """Run the script ``name`` once; returns its reply."""
        if self._lean is not None:
            return await self.run_lean(name, keys, args)
        script = self.scripts[name]
        if self._raw:
            return await self._run_raw(script, keys, args)

        async def call() -> Any:
            try:
                return await self.redis.evalsha(script.sha, len(keys), *keys, *args)
            except NoScriptError:
                await self.redis.script_load(script.source)
                return await self.redis.evalsha(script.sha, len(keys), *keys, *args)

        try:
            await self._ready()
            return await self._when_connection_free(call)
        except RedisError as exc:
            raise await self.failed(name, exc) from exc

    @property
    def lean(self) -> bool:
        """Whether script calls go through lean connections (``run_lean``)."""
        return self._lean is not None

    async def run_lean(self, name: str, keys: Sequence[str], args: Sequence[Any]) -> Any:
        """``run`` on a lean connection (only when ``lean``): the call packed by hand, written
        at once or, while other calls' replies are due, with the other calls of this loop
        turn."""
        try:
            reply = await self.submit_lean(name, keys, args)
        except RedisError as exc:
            raise await self.failed(name, exc) from exc
        if isinstance(reply, RedisError):
            reply = await self.lean_error_reply(name, keys, args, reply)
        return reply

    def submit_lean(self, name: str, keys: Sequence[str], args: Sequence[Any]) -> Any:
        """One script call sent on a lean connection (only when ``lean``): the future of its
        reply, an error reply in its place (pass it to ``lean_error_reply``); a connection
        failure raises the redis-py error (map it with ``failed``). For a caller that awaits
        it itself (``RedisBroker.store``): no coroutine layer between it and the reply."""
        lean = self._lean
        assert lean is not None
        return lean.submit(pack(("EVALSHA", self.scripts[name].sha, len(keys), *keys, *args)))

    async def lean_error_reply(self, name: str, keys: Sequence[str], args: Sequence[Any],
                               reply: RedisError) -> Any:
        """The outcome of a lean call answered with an error: after NOSCRIPT (Redis lost its
        script cache) the script is loaded and the call sent again; any other error raises
        BrokerError (LOADING is a ConnectionError: it was raised, not replied)."""
        try:
            if isinstance(reply, NoScriptError):
                await self._load(self.scripts[name])
                reply = await self.submit_lean(name, keys, args)
            if isinstance(reply, RedisError):
                raise reply
        except RedisError as exc:
            raise await self.failed(name, exc) from exc
        return reply

    async def _run_raw(self, script: Script, keys: Sequence[str], args: Sequence[Any]) -> Any:
        """``run`` on a single node: packed by hand and sent as a pipeline of one, which skips
        redis-py's per-command machinery (the hot path of every enqueue)."""
        command = pack(("EVALSHA", script.sha, len(keys), *keys, *args))
        try:
            reply = (await self._when_connection_free(
                functools.partial(raw_pipeline, self.redis, [command])))[0]  # type: ignore[arg-type]
            if isinstance(reply, NoScriptError):
                await self.redis.script_load(script.source)
                reply = (await raw_pipeline(self.redis, [command]))[0]  # type: ignore[arg-type]
            if isinstance(reply, ResponseError):
                raise reply
        except RedisError as exc:
            raise await self.failed(script.name, exc) from exc
        return reply

    async def _when_connection_free(self, call: Callable[[], Awaitable[Any]]) -> Any:
        """``call()`` (which takes one connection) once it is this caller's turn for one of a
        single node's connections, then tried again while the client still refuses it for
        want of a free one (a connection held outside the turns, as pub/sub's; a cluster
        node's pool): such a call was not sent, so repeating it is safe. Gives up after
        ``POOL_WAIT_S``."""
        turns = self._turns
        if turns is None:
            return await self._retry_refused(call)
        await turns.acquire()
        try:
            return await self._retry_refused(call)
        finally:
            turns.release()

    @staticmethod
    async def _retry_refused(call: Callable[[], Awaitable[Any]]) -> Any:
        loop = asyncio.get_running_loop()
        deadline = loop.time() + POOL_WAIT_S
        delay = 0.001
        while True:
            try:
                return await call()
            except MaxConnectionsError:
                if loop.time() >= deadline:
                    raise
                await asyncio.sleep(delay)
                delay = min(delay * 2, 0.05)

    async def run_call(self, call: ScriptCall) -> Any:
        """``run`` for a prepared call."""
        return await self.run(call.name, call.keys, call.args)

    async def run_many(self, calls: Sequence[ScriptCall], *, preload: bool = False,
                       chunk: int = PIPELINE_CHUNK) -> list[Any]:
        """Run many scripts in pipelined chunks (not a transaction: each script is atomic).

        Returns one reply per call, in order; an error reply comes back as the redis-py
        exception in its place (see ``reply_error``). A connection failure raises BrokerError.

        With ``preload``, each chunk first loads the scripts it uses, in the same pipeline, so
        no call meets NOSCRIPT: needed when calls depend on each other's order (a batch holding
        the same task id twice), as a re-sent call would otherwise run after later ones.
        """
        resolved = [(self.scripts[c.name], c.keys, c.args) for c in calls]
        results: list[Any] = []
        try:
            await self._ready()
            for start in range(0, len(resolved), chunk):
                part = resolved[start:start + chunk]
                scripts = list({c[0].name: c[0] for c in part}.values()) if preload else []
                if self._raw and self._lean is None:  # one connection, taken before sending
                    out = await self._when_connection_free(
                        functools.partial(self._pipeline, part, scripts))
                else:
                    out = await self._pipeline(part, scripts)
                if any(isinstance(r, NoScriptError) for r in out):
                    # Redis lost its script cache (restart, SCRIPT FLUSH): NOSCRIPT means that
                    # call did not run, so loading the scripts and re-sending it is safe.
                    for script in {c[0] for c in part}:
                        await self._load(script)
                    again = [i for i, r in enumerate(out) if isinstance(r, NoScriptError)]
                    redo = await self._pipeline([part[i] for i in again])
                    for i, r in zip(again, redo, strict=True):
                        out[i] = r
                results.extend(out)
        except RedisError as exc:
            raise await self.failed("pipeline", exc) from exc
        return results

    async def _load(self, script: Script) -> None:
        """SCRIPT LOAD ``script`` (on a lean connection when there are some: redis-py's pool
        may have no free connection while the lean calls of a burst meet NOSCRIPT)."""
        if self._lean is None:
            await self.redis.script_load(script.source)
            return
        reply = await self._lean.submit(pack(("SCRIPT", "LOAD", script.source)))
        if isinstance(reply, RedisError):
            raise reply

    async def _pipeline(self, calls: Sequence[_cluster.Call],
                        preload: Sequence[Script] = ()) -> list[Any]:
        if self._raw:
            commands = [pack(("SCRIPT", "LOAD", script.source)) for script in preload]
            commands += [pack(("EVALSHA", script.sha, len(keys), *keys, *args))
                         for script, keys, args in calls]
            if self._lean is not None:  # in order on one lean connection
                replies: list[Any] = (
                    [await self._lean.submit(commands[0])] if len(commands) == 1
                    else await self._lean.submit(b"".join(commands), len(commands)))
                for reply in replies:  # LOADING, NOAUTH...: the server cannot serve any
                    if isinstance(reply, RedisConnectionError):
                        raise reply
            else:
                replies = await raw_pipeline(self.redis, commands)  # type: ignore[arg-type]
            return replies[len(preload):]
        return await _cluster.pipeline(self.redis, calls, preload)  # type: ignore[arg-type]

    async def load_scripts(self) -> None:
        """Load every script (on every master of a cluster), so pipelines never meet NOSCRIPT
        on a fresh server."""
        try:
            await self._ready()
            await _cluster.load_scripts(self.redis, list(self.scripts.values()))
        except RedisError as exc:
            raise await self.failed("loading scripts", exc) from exc

    # -- plain commands

    async def command(self, what: str, *command: Any) -> Any:
        """One plain command (``"SADD", key, member``) naming at most one key; returns its
        reply as redis-py parses it (SMEMBERS: a set, HGETALL: a dict...)."""
        try:
            await self._ready()
            return await self._when_connection_free(lambda: self.redis.execute_command(*command))
        except RedisError as exc:
            raise await self.failed(what, exc) from exc

    async def commands(self, what: str, commands: Sequence[Sequence[Any]]) -> list[Any]:
        """Plain idempotent commands pipelined (not a transaction), each naming at most one
        key (keys of different slots are fine: a cluster pipeline sends each to its master);
        one reply per command, in order; an error reply raises BrokerError. Sent again whole
        when a cluster node's pool had no free connection (some may have run: hence
        idempotent)."""
        async def send() -> list[Any]:
            pipe = self.redis.pipeline(transaction=False)
            for command in commands:
                pipe.execute_command(*command)
            return list(await pipe.execute())

        try:
            await self._ready()
            return list(await self._when_connection_free(send))
        except RedisError as exc:
            raise await self.failed(what, exc) from exc

    async def infos(self) -> list[dict[str, Any]]:
        """INFO of the server, or of every master of a cluster (in name order)."""
        try:
            await self._ready()
            return await _cluster.server_infos(self.redis)
        except RedisError as exc:
            raise await self.failed("INFO", exc) from exc

    async def scan(self, cursor: int, match: str, count: int) -> tuple[int, list[bytes | str]]:
        """One SCAN step (over every master of a cluster, one after the other); the cursor
        comes back 0 once the whole keyspace was walked."""
        try:
            await self._ready()
            return await _cluster.scan(self.redis, cursor, match, count)
        except RedisError as exc:
            raise await self.failed("scanning keys", exc) from exc

    async def pubsub(self) -> PubSub:
        """A new pub/sub connection (on a cluster, to the master of the first channel);
        BrokerError when a cluster's slots cannot be read (a failover under way)."""
        try:
            return await _cluster.pubsub(self.redis)
        except RedisError as exc:
            raise await self.failed("subscribing", exc) from exc

    async def own_connection(self, key: str) -> Any:
        """A new connection outside every pool (for a blocking command), to the master of
        ``key``'s slot on a cluster; BrokerError when a cluster's slots cannot be read."""
        try:
            await self._ready()
            return await _cluster.own_connection(self.redis, key)
        except RedisError as exc:
            raise await self.failed("connecting for a blocked wait", exc) from exc

    def connection_broke(self) -> None:
        """A pub/sub connection broke: on a cluster, read the slots again before the next
        subscription (the master it was on may be gone)."""
        _cluster.after_connection_error(self.redis)
