"""The few Redis operations that differ between one server and a Redis Cluster.

Everything else is cluster-safe by construction: each Lua script touches the keys of one queue,
which share the hash tag ``{queue}`` (one slot); global keys (``asyncq:queues``, the servers,
workers and schedulers sorted sets) are read and written one key per command, never two keys of
different slots in one command; the pub/sub channels are classic channels, which a cluster
broadcasts to every node (a PUBLISH on any master, also from a script, reaches a subscriber
connected to any node).

What needs care, and lives here:

* pipelines: the calls are split per master and packed by hand as for one server (not a
  transaction: each script stays atomic), a ``SCRIPT LOAD`` before the calls must reach each
  master they go to, and a call whose slot moved meanwhile must follow the redirection;
* broken connections: the client must re-read the slots (a failover moved them) even when the
  failure was met by a pipeline or the pub/sub connection, not only by a single command;
* loading the scripts: on every master (a master promoted by a failover, or a node that got
  slots by resharding, starts without them: NOSCRIPT is still handled by re-loading);
* pub/sub: the cluster client must know the slots before it picks the node to subscribe on;
* a blocking command (a wait on a list): a connection of its own, to the key's master;
* ``SCAN``: one cursor per master, walked one master after the other;
* ``INFO``: one document per master.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import Any

from redis.asyncio import Redis, RedisCluster
from redis.asyncio.client import PubSub
from redis.asyncio.cluster import ClusterNode
from redis.exceptions import (
    AskError,
    MaxConnectionsError,
    MovedError,
    SlotNotCoveredError,
    TryAgainError,
)

from ._resp import exchange, pack
from ._scripts import Script

Call = tuple[Script, Sequence[str], Sequence[Any]]
_NODE_BITS = 10  # a cluster SCAN cursor is (node cursor << _NODE_BITS) | node index


async def _primaries(redis: RedisCluster) -> list[ClusterNode]:
    await redis.initialize()  # no-op once the slots are known
    return sorted(redis.get_primaries(), key=lambda node: node.name)


#: How long a call refused for want of a free connection (all max_connections busy) waits
#: for one, retrying: it was not sent, so retrying is safe.
POOL_WAIT_S = 20.0


async def _free_connection(node: ClusterNode) -> Any:
    """A connection of ``node``'s pool, waiting (with backoff, up to ``POOL_WAIT_S``) while
    every one is busy: nothing was sent yet, so waiting is all it takes."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + POOL_WAIT_S
    delay = 0.001
    while True:
        try:
            return node.acquire_connection()
        except MaxConnectionsError:
            if loop.time() >= deadline:
                raise
            await asyncio.sleep(delay)
            delay = min(delay * 2, 0.05)


async def pipeline(redis: RedisCluster, calls: Sequence[Call],
                   preload: Sequence[Script] = ()) -> list[Any]:
    """The calls grouped by the master of their first key, packed by hand (see ``_resp``) and
    sent to every master at once, one pipeline each.

    A call answered MOVED/ASK (its slot moved since the slots were read) or TRYAGAIN did not
    run: those calls are sent again, in their order, through redis-py's cluster pipeline,
    which follows the redirection and refreshes the slots.
    """
    await redis.initialize()
    by_node: dict[str, tuple[ClusterNode, list[int]]] = {}
    for i, (_, keys, _) in enumerate(calls):
        node = redis.get_node_from_key(keys[0])
        if node is None:
            raise SlotNotCoveredError(f"no master serves the slot of {keys[0]!r}")
        by_node.setdefault(node.name, (node, []))[1].append(i)
    replies: list[Any] = [None] * len(calls)
    loads = [pack(("SCRIPT", "LOAD", script.source)) for script in preload]

    async def send(node: ClusterNode, indexes: list[int]) -> None:
        commands = loads + [pack(("EVALSHA", calls[i][0].sha, len(calls[i][1]), *calls[i][1],
                                  *calls[i][2])) for i in indexes]
        conn = await _free_connection(node)
        try:
            out = await exchange(conn, commands)
        finally:
            node.release(conn)
        for i, reply in zip(indexes, out[len(loads):], strict=True):
            replies[i] = reply

    done = await asyncio.gather(*(send(node, ix) for node, ix in by_node.values()),
                                return_exceptions=True)
    for outcome in done:
        if isinstance(outcome, BaseException):
            raise outcome
    moved = [i for i, r in enumerate(replies) if isinstance(r, MovedError | AskError
                                                           | TryAgainError)]
    if moved:
        again = await _redis_py_cluster_pipeline(redis, [calls[i] for i in moved], preload)
        for i, reply in zip(moved, again, strict=True):
            replies[i] = reply
    return replies


def after_connection_error(redis: Redis | RedisCluster) -> None:
    """A connection to a cluster node broke: have the client read the slots again before its
    next command, as redis-py does itself when a single command meets a broken connection (a
    failover may have moved them). Without it, pipelines and pub/sub would keep going to a
    dead master."""
    if isinstance(redis, RedisCluster):
        redis._initialize = True


async def _redis_py_cluster_pipeline(redis: RedisCluster, calls: Sequence[Call],
                                     preload: Sequence[Script]) -> list[Any]:
    pipe = redis.pipeline(transaction=False)
    loads = 0
    if preload:
        nodes: dict[str, ClusterNode] = {}
        for _, keys, _ in calls:
            node = redis.get_node_from_key(keys[0])
            if node is not None:
                nodes[node.name] = node
        for node in nodes.values():
            for script in preload:
                pipe.execute_command("SCRIPT LOAD", script.source, target_nodes=node)
                loads += 1
    for script, keys, args in calls:
        pipe.execute_command("EVALSHA", script.sha, len(keys), *keys, *args)
    return list(await pipe.execute(raise_on_error=False))[loads:]


def address(redis: Redis | RedisCluster) -> str:
    """``host:port`` (or the socket path) of a client; a cluster's first startup node."""
    try:
        if isinstance(redis, RedisCluster):
            nodes = list(getattr(redis.nodes_manager, "startup_nodes", {}).values())
            return f"{nodes[0].host}:{nodes[0].port} (cluster)" if nodes else "a Redis Cluster"
        pool = redis.connection_pool
        service = getattr(pool, "service_name", None)
        if service:
            return f"the Sentinel-managed master {service!r}"
        kwargs = pool.connection_kwargs
        if "path" in kwargs:
            return f"unix:{kwargs['path']}"
        return f"{kwargs.get('host', 'localhost')}:{kwargs.get('port', 6379)}"
    except Exception:  # an unusual client: name it by its type only
        return type(redis).__name__


async def pubsub(redis: Redis | RedisCluster) -> PubSub:
    """A PubSub; on a cluster it connects to the master serving the first channel's slot."""
    if isinstance(redis, RedisCluster):
        await redis.initialize()
    return redis.pubsub()


async def own_connection(redis: Redis | RedisCluster, key: str) -> Any:
    """A new connection of its own (no pool's: a blocking command holds it) to the server, or
    to the master serving ``key``'s slot on a cluster; its owner disconnects it."""
    if isinstance(redis, RedisCluster):
        await redis.initialize()
        node = redis.get_node_from_key(key)
        if node is None:
            raise SlotNotCoveredError(f"no cluster node serves the slot of {key!r}")
        return node.connection_class(**node.connection_kwargs)
    return redis.connection_pool.make_connection()  # type: ignore[no-untyped-call]


async def load_scripts(redis: Redis | RedisCluster, scripts: Sequence[Script]) -> None:
    """SCRIPT LOAD every script (on every master of a cluster), in one round trip per node."""
    pipe = redis.pipeline(transaction=False)
    if isinstance(redis, RedisCluster):
        for node in await _primaries(redis):
            for script in scripts:
                pipe.execute_command("SCRIPT LOAD", script.source, target_nodes=node)
    else:
        for script in scripts:
            pipe.script_load(script.source)
    await pipe.execute()


async def scan(redis: Redis | RedisCluster, cursor: int, match: str,
               count: int) -> tuple[int, list[bytes | str]]:
    """One SCAN step. On a cluster the cursor also says which master is being walked (in name
    order); it comes back 0 once every master was walked, as for one server."""
    if not isinstance(redis, RedisCluster):
        nxt, keys = await redis.scan(cursor, match=match, count=count)
        return int(nxt), list(keys)
    nodes = await _primaries(redis)
    index, node_cursor = cursor & ((1 << _NODE_BITS) - 1), cursor >> _NODE_BITS
    if index >= len(nodes):  # the cluster shrank since: start a new pass
        return 0, []
    reply: Any = await redis.scan(node_cursor, match=match, count=count,
                                  target_nodes=nodes[index])
    cursors, keys = reply  # ({node name: cursor}, keys)
    node_next = int(next(iter(cursors.values())))
    if node_next:
        return (node_next << _NODE_BITS) | index, list(keys)
    return (index + 1 if index + 1 < len(nodes) else 0), list(keys)


async def server_infos(redis: Redis | RedisCluster) -> list[dict[str, Any]]:
    """INFO of the server, or of every master of a cluster (in name order)."""
    if not isinstance(redis, RedisCluster):
        return [await redis.info()]
    nodes = await _primaries(redis)
    replies: dict[str, dict[str, Any]] = await redis.info(target_nodes=nodes)
    if len(nodes) == 1:  # redis-py returns a single node's reply as it is
        return [replies]
    return [replies[node.name] for node in nodes if node.name in replies]
