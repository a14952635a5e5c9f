"""Rate and concurrency limits over Go asynq's layout (``LimitOps`` for ``wire=asynq``).

The state is asyncq's own (the same registry, key sets and ``held``/``wait``/``win``/``tat``
keys as in asyncq's layout), kept under ``asynq:{<queue>}:asyncq:`` where Go never looks, in the
queue's hash slot so one script can take a slot and defer the task together (Cluster too).

asyncq's limit scripts cannot run here unchanged, so ``asynq_limit_*.lua`` run the same bodies
(``lua/_limit_*_body.lua``) with this layout's hooks (``lua/_asynq_limit_hooks.lua``): they
compare lease ends that asynq scores in Unix seconds (asyncq's in ms: every slot would look
expired), defer a task into asynq's scheduled set in Unix seconds (an ms
score would read as thousands of years ahead to Go's forwarder and asyncq's), drop asyncq's
lease fields of this layout (owner, lease_until, started_at), write ``pending_since`` in ns on
a wake-up, and check ownership the way every asynq script does (the lease entry is the one
this run wrote). Because deferred tasks come back on whole seconds, a rate lets up to one
second of its pace start at once here; its cap of ``n`` starts per period stays exact.

Values set at run time (a queue's concurrency cap, a value replacing a declared limit) live
in the same registry as in asyncq's layout and are read by ``asynq_limit_acquire`` in the step
that admits a start; ``asynq_limit_set`` sets them and wakes the waiters they let start.

Go servers do not know asyncq's limits: a task a Go server takes from a shared queue runs
without them (and holds no slot), a queue's cap included.
"""

from __future__ import annotations

from typing import Any, ClassVar

from .._limit_ops import RedisLimitOps
from . import _keys as K


class AsynqLimitOps(RedisLimitOps):
    """``LimitOps`` over asynq's layout (what ``AsynqBroker.limits`` is): asyncq's, with this
    layout's keys, scripts and ``pending_since`` in Unix ns (as Go's forwarder writes it)."""

    keys: ClassVar[Any] = K
    script_prefix: ClassVar[str] = "asynq_"
    since_per_ms: ClassVar[int] = 1_000_000
