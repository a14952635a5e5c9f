"""The least-privilege Redis ACL rule asyncq needs, and a helper to create such a user.

``ACL_RULES`` is what docs/how-to/redis.md documents: keys and channels limited
to ``asyncq:*``; the read, write, pub/sub and connection command categories minus everything
``@dangerous`` (FLUSHALL, KEYS, CONFIG, ...); EVALSHA and SCRIPT LOAD for the Lua scripts
(which run with the same user's rights); TIME (task events are stamped with the server's
clock); INFO for ``asyncq stats``; and the cluster topology
reads a cluster client needs. The test suite runs its end-to-end scenarios as such a user.
"""

from __future__ import annotations

from collections.abc import Sequence

from .cluster import redis_cli

__all__ = ["ACL_RULES", "acl_setuser"]

ACL_RULES: tuple[str, ...] = (
    "resetkeys", "~asyncq:*", "resetchannels", "&asyncq:*",
    "-@all", "+@read", "+@write", "+@pubsub", "+@connection", "-@dangerous",
    "+evalsha", "+script|load", "+time", "+info", "+cluster|slots",
)


def acl_setuser(port: int, user: str, password: str, rules: Sequence[str] = ACL_RULES,
                *, cli_args: Sequence[str] = ()) -> None:
    """``ACL SETUSER user reset on >password <rules>`` on the server at 127.0.0.1:``port``
    (``cli_args``: extra ``redis-cli`` arguments, e.g. TLS or admin credentials)."""
    out = redis_cli(*cli_args, "-p", str(port), "acl", "setuser", user, "reset", "on",
                    f">{password}", *rules)
    if out.strip() != "OK":  # redis-cli exits 0 on an error reply
        raise RuntimeError(f"ACL SETUSER {user} failed: {out.strip()}")
