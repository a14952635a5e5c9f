"""The schedulers' Redis side over Go asynq's layout (``ScheduleOps`` for ``wire=asynq``).

What Go's tools read (``Inspector.SchedulerEntries``/``ListSchedulerEnqueueEvents``, the CLI's
``cron ls``/``cron history``, asynqmon's cron page), written as Go's scheduler writes it:

* ``asynq:schedulers`` ZSET: entries key of each live scheduler -> its expiry, Unix s;
* ``asynq:schedulers:{<scheduler id>}`` LIST of protobuf ``SchedulerEntry`` (id, spec, task
  type and payload, the options as Go's ``Option.String()`` formats them, next and previous
  enqueue time: Go's zero time for never), expiring with the heartbeat (2 x its interval);
* ``asynq:scheduler_history:<entry id>`` ZSET of protobuf ``SchedulerEnqueueEvent`` (task id,
  enqueue time) scored by Unix s, the 1000 newest kept.

A firing stores its task exactly as Go's scheduler does (its ``Client.Enqueue``: the asynq
store scripts), preceded in the same script by asyncq's claim of ``(entry, tick)`` in
``asynq:{<queue>}:asyncq:scheduler_ticks``, a key Go ignores: any number of asyncq scheduler
replicas enqueue each tick once (Go's own schedulers have no such claim).

What asynq's records cannot say (the time zone, the payload's encoding, asyncq's options in
their own form, the queue and tick of an event) rides in protobuf field 1000 of the same
records, asyncq's JSON there: protobuf readers, Go's included, skip a field they do not know.
Records Go wrote are read without it (options parsed from Go's strings).
"""

from __future__ import annotations

import ast
import json
import re
from collections.abc import Awaitable, Callable, Mapping, Sequence
from datetime import UTC, datetime
from typing import Any

import orjson
from google.protobuf import unknown_fields  # type: ignore[import-untyped,unused-ignore]
from google.protobuf.message import DecodeError  # type: ignore[import-untyped,unused-ignore]

from ..._clock import Clock
from .._calls import ScriptCall
from .._runner import ScriptRunner
from .._schedules import live_entry_lists
from .._values import FireCode, NewTask, SchedulerEntryRecord, SchedulerEventRecord
from . import _keys as K
from ._schema import SchedulerEnqueueEventPB, SchedulerEntryPB

EXTRAS_FIELD = 1000
"""Protobuf field number of asyncq's JSON extras in SchedulerEntry / SchedulerEnqueueEvent."""
GO_ZERO_TIME_S = -62_135_596_800
"""Go's zero ``time.Time`` (January 1, year 1, UTC) as a protobuf Timestamp's seconds: what
Go's scheduler publishes as the previous enqueue time of an entry that never fired."""

StoreCall = Callable[[NewTask, int], ScriptCall]
Register = Callable[[Sequence[str]], Awaitable[None]]


class AsynqScheduleOps:
    """``ScheduleOps`` over asynq's layout. ``store_call`` builds the asynq store script of a
    task (``_broker.store_call``); ``register`` checks a queue's layout and adds it to
    ``asynq:queues`` (``AsynqBroker.register_queues``), as Go's client does first."""

    def __init__(self, runner: ScriptRunner, clock: Clock, store_call: StoreCall,
                 register: Register) -> None:
        self.runner = runner
        self.clock = clock
        self._store_call = store_call
        self._register = register

    async def fire(self, task: NewTask, entry_id: str, tick_ms: int,
                   prune_before_ms: int) -> FireCode:
        await self._register((task.msg.queue,))
        call = self._store_call(task, self.clock.now_ms())
        code = int(await self.runner.run(
            "asynq_sched_" + call.name.removeprefix("asynq_"),
            [*call.keys, K.scheduler_ticks_key(task.msg.queue)],
            [*call.args, entry_id, tick_ms, prune_before_ms]))
        return 2 if code == 2 else 1 if code == 1 else 0 if code == 0 else -1

    async def record_event(self, event: SchedulerEventRecord, max_events: int,
                           ttl_ms: int) -> None:
        """Go scores events in Unix s and keeps no TTL on a history (its scheduler deletes its
        entries' histories when it shuts down); asyncq's replicas share an entry, so its
        history stays, expiring ``ttl_ms`` after the last event (asyncq's scheduler_record)."""
        await self.runner.run("scheduler_record", [K.scheduler_history_key(event.entry_id)],
                              [event.enqueued_at_ms // 1000, encode_event(event), max_events,
                               ttl_ms])

    async def publish_entries(self, scheduler_id: str, entries: Sequence[SchedulerEntryRecord],
                              ttl_ms: int, now_ms: int) -> None:
        key = K.scheduler_entries_key(scheduler_id)
        records = [encode_entry(entry) for entry in entries]
        await self.runner.command("publishing scheduler entries", "ZADD", K.SCHEDULERS,
                                  (now_ms + ttl_ms) // 1000, key)
        await self.runner.run("scheduler_heartbeat", [key], [ttl_ms, *records])

    async def clear_entries(self, scheduler_id: str) -> None:
        key = K.scheduler_entries_key(scheduler_id)
        await self.runner.command("clearing scheduler entries", "ZREM", K.SCHEDULERS, key)
        await self.runner.command("clearing scheduler entries", "DEL", key)

    async def entries(self) -> list[SchedulerEntryRecord]:
        """Entries of every live scheduler, Go's and asyncq's (undecodable records skipped, as
        Go skips them)."""
        out: list[SchedulerEntryRecord] = []
        lists = await live_entry_lists(self.runner, K.SCHEDULERS, self.clock.now_ms() // 1000)
        for key, items in lists:
            sid = K.scheduler_id_of(key)
            out += [entry for raw in items if (entry := decode_entry(raw, sid)) is not None]
        return out

    async def events(self, entry_id: str, start: int, stop: int) -> list[SchedulerEventRecord]:
        raw = await self.runner.command("listing scheduler events", "ZREVRANGE",
                                        K.scheduler_history_key(entry_id), start, stop)
        return [event for r in raw if (event := decode_event(r, entry_id)) is not None]


# -- the seam's records <-> Go's protobuf records


def _varint(n: int) -> bytes:
    out = bytearray()
    while True:
        b = n & 0x7F
        n >>= 7
        if n:
            out.append(b | 0x80)
        else:
            out.append(b)
            return bytes(out)


def _with_extras(message: Any, extras: Mapping[str, Any]) -> bytes:
    """``message`` serialised, asyncq's ``extras`` (JSON) appended as field EXTRAS_FIELD."""
    blob = orjson.dumps(extras)
    head: bytes = message.SerializeToString()
    return head + _varint(EXTRAS_FIELD << 3 | 2) + _varint(len(blob)) + blob


def _extras(message: Any) -> dict[str, Any] | None:
    """asyncq's extras of a parsed record; None for a record Go wrote (or unreadable ones)."""
    for field in unknown_fields.UnknownFieldSet(message):
        if field.field_number == EXTRAS_FIELD and field.wire_type == 2:
            try:
                found = orjson.loads(field.data)
            except orjson.JSONDecodeError:
                return None
            return found if isinstance(found, dict) else None
    return None


def _timestamp(target: Any, ms: int) -> None:
    target.seconds, rest = divmod(ms, 1000)
    target.nanos = rest * 1_000_000


def _ms(ts: Any) -> int:
    return int(ts.seconds) * 1000 + int(ts.nanos) // 1_000_000


_TZ_PREFIX = re.compile(r"^(?:CRON_TZ|TZ)=(\S+)\s")


def go_spec(spec: str, timezone: str) -> str:
    """The spec as Go shows it: a cron spec read in a zone other than UTC gets robfig/cron's
    ``CRON_TZ=<zone>`` prefix (Go does not publish its scheduler's zone otherwise)."""
    if timezone in ("", "UTC") or _TZ_PREFIX.match(spec) or spec.lower().startswith("@every"):
        return spec
    return f"CRON_TZ={timezone} {spec}"


def encode_entry(entry: SchedulerEntryRecord) -> bytes:
    """An entry as Go's SchedulerEntry record, with asyncq's extras."""
    payload = entry.payload if entry.encoding in ("j", "b") else b""
    tz = entry.timezone
    pb = SchedulerEntryPB(id=entry.id, spec=go_spec(entry.spec, tz), task_type=entry.task_type,
                          task_payload=payload, enqueue_options=go_options(entry.options))
    _timestamp(pb.next_enqueue_time, entry.next_ms)
    if entry.prev_ms is None:
        pb.prev_enqueue_time.seconds = GO_ZERO_TIME_S
    else:
        _timestamp(pb.prev_enqueue_time, entry.prev_ms)
    extras: dict[str, Any] = {"timezone": tz, "encoding": entry.encoding,
                              "options": entry.options}
    if pb.spec != entry.spec:
        extras["spec"] = entry.spec
    return _with_extras(pb, extras)


def decode_entry(raw: bytes, scheduler_id: str) -> SchedulerEntryRecord | None:
    """A SchedulerEntry record (asyncq's or Go's); None when it is not one."""
    try:
        pb = SchedulerEntryPB.FromString(raw)
    except DecodeError:
        return None
    extras = _extras(pb)
    payload = bytes(pb.task_payload)
    if extras is None:  # written by Go
        found = _TZ_PREFIX.match(pb.spec)
        extras = {"timezone": found.group(1) if found else "", "encoding": "b",
                  "options": options_from_go(pb.enqueue_options)}
    enc = extras.get("encoding", "b")
    if enc == "j":
        try:
            orjson.loads(payload)
        except orjson.JSONDecodeError:
            enc = "b"
    if enc not in ("j", "b"):
        enc, payload = "n", b""
    prev: int | None = None
    if pb.HasField("prev_enqueue_time") and pb.prev_enqueue_time.seconds > GO_ZERO_TIME_S:
        prev = _ms(pb.prev_enqueue_time)
    return SchedulerEntryRecord(
        id=pb.id, spec=str(extras.get("spec", pb.spec)),
        timezone=str(extras.get("timezone", "")), task_type=pb.task_type, encoding=enc,
        payload=payload, options=dict(extras.get("options") or {}),
        next_ms=_ms(pb.next_enqueue_time), prev_ms=prev, scheduler_id=scheduler_id)


def encode_event(event: SchedulerEventRecord) -> bytes:
    """An event as Go's SchedulerEnqueueEvent record, the queue and the tick in asyncq's
    extras."""
    pb = SchedulerEnqueueEventPB(task_id=event.task_id)
    _timestamp(pb.enqueue_time, event.enqueued_at_ms)
    return _with_extras(pb, {"queue": event.queue, "tick": event.tick_ms})


def decode_event(raw: bytes, entry_id: str) -> SchedulerEventRecord | None:
    """A SchedulerEnqueueEvent record (asyncq's or Go's); None when it is not one."""
    try:
        pb = SchedulerEnqueueEventPB.FromString(raw)
    except DecodeError:
        return None
    extras = _extras(pb) or {}
    at = _ms(pb.enqueue_time)
    tick = extras.get("tick")
    return SchedulerEventRecord(entry_id=entry_id, task_id=pb.task_id,
                                queue=str(extras.get("queue") or ""), enqueued_at_ms=at,
                                tick_ms=tick if isinstance(tick, int) else at)


# -- enqueue options: asyncq's JSON form <-> Go's Option.String()


def go_duration(ms: int) -> str:
    """A duration as Go's ``time.Duration.String()`` writes it: ``1h0m0s``, ``1.5s``,
    ``500ms``, ``0s``."""
    if ms == 0:
        return "0s"
    sign = "-" if ms < 0 else ""
    ms = abs(ms)
    if ms < 1000:
        return f"{sign}{ms}ms"
    hours, rest = divmod(ms, 3_600_000)
    minutes, rest = divmod(rest, 60_000)
    secs, frac = divmod(rest, 1000)
    s = f"{secs}" + (f".{frac:03d}".rstrip("0") if frac else "") + "s"
    if hours:
        return f"{sign}{hours}h{minutes}m{s}"
    if minutes:
        return f"{sign}{minutes}m{s}"
    return sign + s


_GO_UNITS = {"ns": 1e-9, "us": 1e-6, "µs": 1e-6, "μs": 1e-6, "ms": 1e-3, "s": 1.0, "m": 60.0,
             "h": 3600.0}
_GO_PART = re.compile(r"(\d+\.?\d*|\.\d+)(ns|us|µs|μs|ms|s|m|h)")


def parse_go_duration(value: str) -> float:
    """Seconds of a Go duration string (``1h30m``, ``1.5s``, ``-2m``, ``0``); ValueError."""
    s = value.strip()
    sign = -1.0 if s.startswith("-") else 1.0
    s = s.lstrip("+-")
    if s == "0":
        return 0.0
    if not s:
        raise ValueError(f"not a Go duration: {value!r}")
    total, pos = 0.0, 0
    while pos < len(s):
        m = _GO_PART.match(s, pos)
        if m is None:
            raise ValueError(f"not a Go duration: {value!r}")
        total += float(m.group(1)) * _GO_UNITS[m.group(2)]
        pos = m.end()
    return sign * total


def go_unix_date(iso: str) -> str:
    """An ISO 8601 time as Go's ``time.UnixDate`` layout writes it in UTC:
    ``Mon Jan  2 15:04:05 UTC 2006``."""
    dt = datetime.fromisoformat(iso)
    dt = (dt if dt.tzinfo else dt.replace(tzinfo=UTC)).astimezone(UTC)
    return f"{dt:%a %b} {dt.day:>2} {dt:%H:%M:%S} UTC {dt.year}"


def parse_go_unix_date(value: str) -> str:
    """A ``time.UnixDate`` time back in ISO 8601. Its zone is read as UTC: Go's parser gives an
    abbreviation it does not know (any but UTC and its own local zone's) offset 0 too."""
    parts = value.split()
    if len(parts) != 6:
        raise ValueError(f"not a Go UnixDate time: {value!r}")
    _, month, day, clock, _, year = parts
    dt = datetime.strptime(f"{month} {day} {clock} {year}", "%b %d %H:%M:%S %Y")
    return dt.replace(tzinfo=UTC).isoformat()


_GO_ESCAPES = {"\a": "\\a", "\b": "\\b", "\f": "\\f", "\n": "\\n", "\r": "\\r", "\t": "\\t",
               "\v": "\\v", "\\": "\\\\", '"': '\\"'}


def go_quote(value: str) -> str:
    """``value`` as Go's ``%q`` (strconv.Quote) writes it."""
    out = ['"']
    for ch in value:
        code = ord(ch)
        if ch in _GO_ESCAPES:
            out.append(_GO_ESCAPES[ch])
        elif ch.isprintable():
            out.append(ch)
        elif code < 0x20 or code == 0x7F:
            out.append(f"\\x{code:02x}")
        elif code < 0x10000:
            out.append(f"\\u{code:04x}")
        else:
            out.append(f"\\U{code:08x}")
    out.append('"')
    return "".join(out)


def _go_unquote(value: str) -> str:
    if len(value) < 2 or value[0] != '"' or value[-1] != '"':
        raise ValueError(f"not a Go quoted string: {value!r}")
    found = ast.literal_eval(value)
    if not isinstance(found, str):
        raise ValueError(f"not a Go quoted string: {value!r}")
    return found


def _go_json(value: Any) -> str:
    """JSON as Go's encoding/json writes it (compact; <, >, & and U+2028/9 escaped)."""
    out = json.dumps(value, ensure_ascii=False, separators=(",", ":"))
    for ch, esc in (("<", "\\u003c"), (">", "\\u003e"), ("&", "\\u0026"),
                    ("\u2028", "\\u2028"), ("\u2029", "\\u2029")):
        out = out.replace(ch, esc)
    return out


def go_options(options: Mapping[str, Any]) -> list[str]:
    """asyncq's options (JSON form: seconds, ISO 8601 times) as the strings of Go's
    ``Option.String()``, in asyncq's option order, a ``Header`` per header; ``unique_key``,
    which no Go option expresses, is left out (asyncq's extras keep it)."""
    out: list[str] = []
    for name, value in options.items():
        if name == "queue":
            out.append(f"Queue({go_quote(str(value))})")
        elif name == "max_retry":
            out.append(f"MaxRetry({int(value)})")
        elif name in ("timeout", "unique", "process_in", "retention"):
            label = {"timeout": "Timeout", "unique": "Unique", "process_in": "ProcessIn",
                     "retention": "Retention"}[name]
            out.append(f"{label}({go_duration(round(float(value) * 1000))})")
        elif name in ("deadline", "process_at"):
            label = "Deadline" if name == "deadline" else "ProcessAt"
            out.append(f"{label}({go_unix_date(str(value))})")
        elif name == "task_id":
            out.append(f"TaskID({go_quote(str(value))})")
        elif name == "group":
            out.append(f"Group({go_quote(str(value))})")
        elif name == "headers" and isinstance(value, Mapping):
            out += [f"Header({_go_json([str(k), str(v)])})" for k, v in value.items()]
    return out


def options_from_go(strings: Sequence[str]) -> dict[str, Any]:
    """Go's option strings as asyncq's JSON form; a string no asyncq option matches (or that
    does not parse) is skipped, as Go's Inspector skips what it cannot parse."""
    out: dict[str, Any] = {}
    for s in strings:
        name, paren, rest = s.partition("(")
        if not paren or not rest.endswith(")"):
            continue
        arg = rest[:-1]
        try:
            if name == "Queue":
                out["queue"] = _go_unquote(arg)
            elif name == "MaxRetry":
                out["max_retry"] = int(arg)
            elif name in ("Timeout", "Unique", "ProcessIn", "Retention"):
                key = {"Timeout": "timeout", "Unique": "unique", "ProcessIn": "process_in",
                       "Retention": "retention"}[name]
                out[key] = parse_go_duration(arg)
            elif name in ("Deadline", "ProcessAt"):
                out["deadline" if name == "Deadline" else "process_at"] = parse_go_unix_date(arg)
            elif name == "TaskID":
                out["task_id"] = _go_unquote(arg)
            elif name == "Group":
                out["group"] = _go_unquote(arg)
            elif name == "Header":
                pair = json.loads(arg)
                if (isinstance(pair, list) and len(pair) == 2
                        and all(isinstance(x, str) for x in pair)):
                    out.setdefault("headers", {})[pair[0]] = pair[1]
        except (ValueError, SyntaxError):
            continue
    return out
