"""The Redis side of rate and concurrency limits: take, give back, set at run time and read
limit state.

Limits are counted per queue: their keys carry the queue's hash tag, so one script can take a
slot and, when refused, defer the task in the same step (on Redis Cluster too). The values here
are plain, in ``_limit_values`` (no import of ``asyncq._limits``, which builds on them through
the ``LimitOps`` protocol).

Values set at run time live in the queue's limit registry beside the declared ones: ``o:q:``
is the queue's concurrency cap (a concurrency limit on every task of the queue, kind
``queue``) and ``o:<c|r>:<name>`` replaces what the handlers declare for that limit.
``limit_acquire`` reads them in the step that admits a start, so no worker polls for them
and none needs a restart.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, ClassVar

from .._clock import Clock
from . import _keys as K
from ._calls import ScriptCall
from ._limit_values import QUEUE_CAP, LimitClaim, LimitHold, LimitSpec, LimitUse
from ._replies import text
from ._runner import ScriptRunner, reply_error

QUEUE_SPEC = LimitSpec(QUEUE_CAP, "", 0)
"""The queue's concurrency cap as a limit (its size is read from Redis, never declared)."""


def _field(spec: LimitSpec) -> str:
    """A limit's field in the queue's limit registry: ``c:<name>``, ``r:<name>`` or ``q:``
    (the queue's cap); a value set at run time is kept under ``o:`` and that."""
    return f"{spec.kind[0]}:{spec.name}"


def _value(spec: LimitSpec) -> str:
    """A limit's value in the registry: its size, and for a rate ``n/period/burst``."""
    if spec.kind == "rate":
        return f"{spec.n}/{spec.period_ms}/{spec.burst}"
    return str(spec.n)


class RedisLimitOps:
    """Limit scripts over a ScriptRunner (what ``RedisBroker.limits`` is; see ``LimitOps``).

    The layout is a class attribute: its key module, the prefix of its script names and the
    unit of ``pending_since``. The scripts of both layouts take the same KEYS and ARGV (one
    body each, ``lua/_limit_*_body.lua``), so a layout's ops are this class with its own
    three values (``_asynq/_limits.py``)."""

    keys: ClassVar[Any] = K
    """The layout's key module (``queue_keys``, ``limits_registry``, ``limit_base``...)."""
    script_prefix: ClassVar[str] = ""
    """Prepended to ``limit_acquire``... to name the layout's scripts."""
    since_per_ms: ClassVar[int] = 1
    """``pending_since`` units in a ms: 1 here (Unix ms)."""

    def __init__(self, runner: ScriptRunner, clock: Clock) -> None:
        self._runner = runner
        self._clock = clock

    def now_ms(self) -> int:
        """The clock limit times are read with (the one leases are written with)."""
        return self._clock.now_ms()

    def _state_prefix(self, queue: str, spec: LimitSpec, key: str) -> str:
        """Prefix of the Redis keys of one key value of ``spec`` in ``queue``."""
        prefix: str = self.keys.limit_state(self.keys.limit_base(queue, spec.kind, spec.name),
                                            key)
        return prefix

    async def acquire(self, queue: str, owner: str, claims: Sequence[LimitClaim], *,
                      queue_cap: bool = False) -> list[int]:
        """Take every limit of each claim, or defer its task: per claim 0 taken (1: taken,
        a slot of the queue's cap among them), -1 its task is not active under ``owner``
        (nothing done), else the Unix ms it is deferred to. ``queue_cap``: each claim also
        takes a slot of the queue's concurrency cap, when the queue has one."""
        call = self._acquire_call(queue, owner, claims, queue_cap)
        return [int(x) for x in await self._one(call)]

    def _acquire_call(self, queue: str, owner: str, claims: Sequence[LimitClaim],
                      queue_cap: bool) -> ScriptCall:
        """The ``limit_acquire`` call claiming ``claims``, each also the queue's cap with
        ``queue_cap``."""
        keys = self.keys
        qk = keys.queue_keys(queue)
        table: list[Any] = []
        where: dict[tuple[LimitSpec, str], int] = {}  # each limit key once, by ARGV position
        tail: list[Any] = []

        def position(spec: LimitSpec, key: str) -> int:
            at = where.get((spec, key))
            if at is None:
                at = where[(spec, key)] = 5 + len(table)
                base = keys.limit_base(queue, spec.kind, spec.name)
                table.extend((spec.kind[0], _field(spec), _value(spec),
                              keys.limit_keyset(base), key, keys.limit_state(base, key),
                              spec.n, spec.period_ms, spec.burst))
            return at

        for claim in claims:
            tail += (claim.holder, claim.hold_until_ms, len(claim.limits) + queue_cap)
            tail += [position(spec, key) for spec, key in claim.limits]
            if queue_cap:
                tail.append(position(QUEUE_SPEC, ""))
        return ScriptCall(self.script_prefix + "limit_acquire",
                          [qk.active, qk.lease, qk.scheduled, keys.limits_registry(queue)],
                          [self._clock.now_ms(), qk.task_prefix, owner, len(where), *table,
                           *tail])

    async def _one(self, call: ScriptCall) -> Any:
        """One script call through the runner's pipeline (hand-packed RESP on a single node:
        a claim of a whole dequeue batch has many arguments)."""
        (reply,) = await self._runner.run_many([call])
        if isinstance(reply, Exception):
            raise reply_error(call.name, reply)
        return reply

    async def release(self, queue: str, owner: str, holds: Sequence[LimitHold]) -> int:
        """Give back concurrency slots; returns how many waiting tasks were woken (moved to
        pending)."""
        qk = self.keys.queue_keys(queue)
        args: list[Any] = [self._clock.now_ms() * self.since_per_ms, qk.task_prefix, owner,
                           self.keys.WAKE_CHANNEL, queue]
        for hold in holds:
            args += (hold.holder, self._state_prefix(queue, hold.spec, hold.key))
        return int(await self._one(ScriptCall(self.script_prefix + "limit_release",
                                              [qk.pending, qk.scheduled], args)))

    async def renew(self, queue: str, hold: LimitHold, until_ms: int) -> bool:
        """Extend a manual hold; False when it is gone (it ended, or was taken as expired)."""
        prefix = self._state_prefix(queue, hold.spec, hold.key)
        return bool(await self._runner.command("renewing a limit hold", "ZADD",
                                               prefix + "held", "XX", "CH", until_ms,
                                               hold.holder))

    async def set_value(self, queue: str, spec: LimitSpec,
                        value: LimitSpec | None) -> tuple[str, str, int]:
        """Set (``value``) or clear (None) the run-time value of the limit ``spec`` names in
        ``queue`` (``QUEUE_SPEC``: the queue's cap), waking the tasks it lets start; returns
        (the previous run-time value, the declared one, tasks woken), as the registry keeps
        them ('' for none)."""
        keys = await self._key_values(queue, spec)
        qk = self.keys.queue_keys(queue)
        now = self._clock.now_ms()
        out = await self._runner.run(
            self.script_prefix + "limit_set",
            [self.keys.limits_registry(queue), qk.lease, qk.pending, qk.scheduled],
            [now, now * self.since_per_ms, qk.task_prefix, self.keys.WAKE_CHANNEL, queue,
             spec.kind[0], _field(spec), "" if value is None else _value(value),
             *(self._state_prefix(queue, spec, key) for key in keys)])
        return text(out[0]), text(out[1]), int(out[2])

    async def _key_values(self, queue: str, spec: LimitSpec) -> list[str]:
        """The key values ``spec``'s limit was used with (the queue's cap has one: '')."""
        if spec.kind == QUEUE_CAP:
            return [""]
        members = await self._runner.command(
            "reading limit keys", "SMEMBERS",
            self.keys.limit_keyset(self.keys.limit_base(queue, spec.kind, spec.name)))
        return sorted(text(m) for m in members)

    async def usage(self, queue: str) -> list[LimitUse]:
        """Every limit used or set in ``queue`` and each of its keys, with what is in use now
        (a key with nothing held, waiting or in its window is listed one last time, then
        forgotten); the queue's cap first, when it has one. A limit given a run-time value
        before any key was used is listed once with key ''."""
        runner, keys, now = self._runner, self.keys, self._clock.now_ms()
        registry = {text(f): text(v) for f, v in (await runner.command(
            "reading limits", "HGETALL", keys.limits_registry(queue))).items()}
        declared = {(s.kind, s.name): s for f, v in registry.items()
                    if (s := _spec(f, v)) is not None and s.kind != QUEUE_CAP}
        runtime = {(s.kind, s.name): s for f, v in registry.items()
                   if f.startswith("o:") and (s := _spec(f[2:], v)) is not None}
        named = sorted((set(declared) | set(runtime)) - {(QUEUE_CAP, "")})
        keysets = await runner.commands(
            "reading limit keys", [("SMEMBERS", keys.limit_keyset(keys.limit_base(queue, *n)))
                                   for n in named]) if named else []
        rows: list[tuple[LimitSpec, str, bool]] = []  # (limit in force, key, state is read)
        if (QUEUE_CAP, "") in runtime:
            rows.append((runtime[(QUEUE_CAP, "")], "", True))
        for ident, members in zip(named, keysets, strict=True):
            spec = runtime.get(ident) or declared[ident]
            found = sorted(text(m) for m in members)
            rows += [(spec, key, True) for key in found]
            if not found and ident in runtime:
                rows.append((spec, "", False))
        counted = [(spec, key) for spec, key, read in rows if read]
        args: list[Any] = [now]
        for spec, key in counted:
            base = keys.limit_base(queue, spec.kind, spec.name)
            args += ("r" if spec.kind == "rate" else "c", keys.limit_state(base, key),
                     spec.period_ms, keys.limit_keyset(base), key)
        out = iter(await runner.run(self.script_prefix + "limit_usage",
                                    [keys.queue_keys(queue).lease], args)
                   if counted else [])
        uses = []
        for spec, key, read in rows:
            used, waiting = next(out) if read else (0, 0)
            ident = (spec.kind, spec.name)
            was = declared.get(ident)
            uses.append(LimitUse(queue, spec.kind, spec.name, key, spec.n, spec.period_ms,
                                 int(used), int(waiting), ident in runtime,
                                 was.n if was else None, was.period_ms if was else None))
        return uses

    async def queue_caps(self, queues: Sequence[str]) -> list[LimitUse | None]:
        """The cap of each of ``queues`` with what it counts now (None: no cap): one pipeline
        reads every cap, one more counts the capped queues' slots, whatever their number."""
        if not queues:
            return []
        keys, script = self.keys, self.script_prefix + "limit_usage"
        now = self._clock.now_ms()
        field = "o:" + _field(QUEUE_SPEC)
        values = await self._runner.commands("reading queue caps", [
            ("HGET", keys.limits_registry(q), field) for q in queues])
        caps = {q: spec for q, v in zip(queues, values, strict=True)
                if v is not None and (spec := _spec(_field(QUEUE_SPEC), text(v))) is not None}
        calls = []
        for q in caps:
            base = keys.limit_base(q, QUEUE_CAP, "")
            calls.append(ScriptCall(script, [keys.queue_keys(q).lease],
                                    [now, "c", keys.limit_state(base, ""), 0,
                                     keys.limit_keyset(base), ""]))
        counted: dict[str, tuple[int, int]] = {}
        for (q, call), reply in zip(zip(caps, calls, strict=True),
                                    await self._runner.run_many(calls) if calls else [],
                                    strict=True):
            if isinstance(reply, Exception):
                raise reply_error(call.name, reply)
            counted[q] = (int(reply[0][0]), int(reply[0][1]))
        return [None if q not in caps else
                LimitUse(q, QUEUE_CAP, "", "", caps[q].n, 0, *counted[q], True)
                for q in queues]


def _spec(field: str, value: str) -> LimitSpec | None:
    """A registry entry back as a LimitSpec; None for one asyncq did not write."""
    kind, sep, name = field.partition(":")
    try:
        if kind == "c" and sep:
            return LimitSpec("concurrency", name, int(value))
        if kind == "r" and sep:
            n, period, burst = [*value.split("/"), "0"][:3]
            return LimitSpec("rate", name, int(n), int(period), int(burst))
        if kind == "q" and sep and not name:
            return LimitSpec(QUEUE_CAP, "", int(value))
    except ValueError:
        pass
    return None
