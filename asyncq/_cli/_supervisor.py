"""``asyncq worker --processes N``: a parent process that runs N worker processes, restarts one
that dies (with backoff), passes stop signals on, and gives up when they keep crashing.

The supervisor does no Redis work: each worker process is ``python -m asyncq worker`` with the
same target and flags, so it behaves exactly like a worker started by hand.

``--health-port`` and ``--metrics-port`` are the supervisor's: each worker process serves its
probes and metrics on a private unix socket (slot N: ``<temp dir>/N.sock``, the same for the
process that replaces it), and the supervisor answers one probe or scrape for all of them,
asking each process from the probe server's thread. Metrics are labelled ``process="N"``.
"""

from __future__ import annotations

import argparse
import asyncio
import concurrent.futures
import contextlib
import dataclasses
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import orjson

from .._defaults import HEALTH_PROBE_TIMEOUT, WORKER_STALL_TIMEOUT
from .._log import get_logger
from .._service._health import Answer, ProbeServer, Route, get_unix, json_answer
from .._service._signals import signal_handlers
from ._common import CLIError

#: Set in a worker process's environment to its supervisor's pid: the worker stops gracefully
#: when that parent is gone (killed with SIGKILL, it could not pass the stop on).
SUPERVISOR_ENV = "ASYNCQ_SUPERVISOR_PID"
#: Set in a supervised worker process's environment to the unix socket on which it serves its
#: probes (and metrics) to the supervisor.
PROBES_ENV = "ASYNCQ_SUPERVISOR_PROBES"
#: Set (to 1) in its environment when the supervisor serves metrics: the process measures them.
METRICS_ENV = "ASYNCQ_SUPERVISOR_METRICS"
#: Overrides of the restart policy, for tests: ``first_delay=0.05,max_quick_crashes=3``.
POLICY_ENV = "ASYNCQ_SUPERVISOR_POLICY"
#: The flags of the supervisor itself, not passed on to the worker processes.
SUPERVISOR_FLAGS = frozenset({"processes", "reload", "reload_dir"})
#: The flags a supervisor serves for all its worker processes (a reloader passes them on).
ENDPOINT_FLAGS = frozenset({"metrics_port", "metrics_host", "health_port", "health_host"})
#: Exit statuses of a worker process that ended because it was told to stop: done (0),
#: interrupted before its handlers were installed (130, or killed by the signal itself).
STOPPED = frozenset({0, 130, -signal.SIGTERM, -signal.SIGINT})
#: Seconds a scrape waits for a worker process's metrics; one that did not answer the last
#: scrape gets SCRAPE_RETRY_TIMEOUT, so a frozen process delays one scrape, not every one.
SCRAPE_TIMEOUT = 3.0
SCRAPE_RETRY_TIMEOUT = 0.5


@dataclass(frozen=True)
class RestartPolicy:
    """When a worker process that died is started again, and when the supervisor gives up."""

    first_delay: float = 0.5      # seconds before the first restart; doubles each time
    max_delay: float = 30.0       # the longest wait between restarts
    stable_after: float = 30.0    # a process that ran this long is healthy: backoff resets
    max_quick_crashes: int = 5    # crashes in a row, each before stable_after: give up

    @classmethod
    def from_env(cls) -> RestartPolicy:
        """The defaults, with the overrides of ``ASYNCQ_SUPERVISOR_POLICY`` (for tests)."""
        text = os.environ.get(POLICY_ENV, "").strip()
        if not text:
            return cls()
        kinds = {f.name: f.type for f in dataclasses.fields(cls)}
        values: dict[str, Any] = {}
        for item in text.split(","):
            name, _, value = item.partition("=")
            name = name.strip()
            if name not in kinds:
                raise CLIError(f"{POLICY_ENV}: unknown setting {name!r} "
                               f"(known: {', '.join(kinds)})")
            values[name] = int(value) if kinds[name] == "int" else float(value)
        return cls(**values)


def child_argv(parser: argparse.ArgumentParser, args: argparse.Namespace, *,
               endpoints: bool = False) -> list[str]:
    """The ``asyncq worker`` arguments of a worker process: the flags given to the supervisor,
    less its own (and less the metrics and health ports it serves, unless ``endpoints``). A
    flag left at its default is left out (the Redis URL from the environment stays there, out
    of the process list)."""
    argv: list[str] = []
    dropped = SUPERVISOR_FLAGS if endpoints else SUPERVISOR_FLAGS | ENDPOINT_FLAGS
    for action in parser._actions:
        if action.dest in dropped or action.dest == argparse.SUPPRESS:
            continue
        value = getattr(args, action.dest, None)
        if not action.option_strings:
            argv.append(str(value))
            continue
        if value is None or value == action.default or action.dest == "help":
            continue
        flag = max(action.option_strings, key=len)
        if action.nargs == 0:  # store_true
            argv.append(flag)
        elif isinstance(value, list):  # append
            argv.extend(f"{flag}={item}" for item in value)
        else:
            argv.append(f"{flag}={value}")
    return argv


def describe_exit(code: int) -> str:
    """``exited with status 1`` / ``killed by SIGKILL``."""
    if code < 0:
        try:
            return f"killed by {signal.Signals(-code).name}"
        except ValueError:
            return f"killed by signal {-code}"
    return f"exited with status {code}"


async def spawn(argv: list[str], env: Mapping[str, str] | None = None
                ) -> asyncio.subprocess.Process:
    """Start ``python -m asyncq worker ARGV`` sharing our stdout/stderr, in its own process
    group: a Ctrl-C in the terminal reaches the supervisor only, which passes it on once."""
    env = {**os.environ, **(env or {}), SUPERVISOR_ENV: str(os.getpid())}
    return await asyncio.create_subprocess_exec(
        sys.executable, "-m", "asyncq", "worker", *argv,
        stdin=subprocess.DEVNULL, env=env, process_group=0)


def send(proc: asyncio.subprocess.Process | None, sig: signal.Signals) -> None:
    """Signal ``proc`` unless it has already ended."""
    if proc is not None and proc.returncode is None:
        with contextlib.suppress(ProcessLookupError):
            proc.send_signal(sig)


class StopRequests:
    """SIGTERM/SIGINT for a supervisor: the first and second are passed on to the worker
    processes (graceful stop, then "requeue running tasks now", as for one worker); a third
    kills them. SIGTSTP is passed on (the workers stop fetching)."""

    def __init__(self, children: Callable[[], list[asyncio.subprocess.Process]]) -> None:
        self._children = children
        self.count = 0
        self.event = asyncio.Event()
        self._log = get_logger("supervisor")

    def handlers(self, enabled: bool = True) -> contextlib.AbstractContextManager[None]:
        return signal_handlers(enabled, {
            signal.SIGTERM: lambda: self.stop(signal.SIGTERM),
            signal.SIGINT: lambda: self.stop(signal.SIGINT),
            signal.SIGTSTP: lambda: self.forward(signal.SIGTSTP),
        })

    def forward(self, sig: signal.Signals) -> None:
        for proc in self._children():
            send(proc, sig)

    def stop(self, sig: signal.Signals) -> None:
        self.count += 1
        if self.count == 1:
            self._log.info("stopping the worker processes", signal=sig.name,
                           hint="stop again (Ctrl-C) to requeue their running tasks at once")
        elif self.count == 2:
            self._log.warning("second stop request: the worker processes requeue their "
                              "running tasks now", hint="a third one kills them")
        else:
            self._log.warning("third stop request: killing the worker processes")
            sig = signal.SIGKILL
        self.event.set()
        self.forward(sig)


class Supervisor:
    """Runs ``processes`` worker processes until stopped (or, in burst mode, until each has
    exited 0); see ``run``."""

    def __init__(self, argv: list[str], processes: int, *, burst: bool = False,
                 policy: RestartPolicy | None = None, health: tuple[str, int] | None = None,
                 metrics: tuple[str, int] | None = None) -> None:
        self._health = health
        self._metrics = metrics
        self._dir = ""  # the worker processes' sockets, while running
        self._argv = argv
        self._processes = processes
        self._burst = burst
        self._policy = policy or RestartPolicy.from_env()
        self._children: dict[int, asyncio.subprocess.Process] = {}
        self._stops = StopRequests(lambda: list(self._children.values()))
        self._failure: str | None = None
        self._log = get_logger("supervisor")
        # Liveness of a process that does not answer (a GIL-holding call, SIGSTOP): it fails
        # once the process has given no sign of life for its stall_timeout, as its own /livez
        # would. Per slot: when it last answered /livez (or started), and its stall_timeout
        # (said in its answers; until then the flag's, or the default).
        self._alive_at: dict[int, float] = {}
        self._stall_timeout: dict[int, float] = {}
        self._default_stall_timeout = _flag_value(argv, "--stall-timeout",
                                                  WORKER_STALL_TIMEOUT)
        self._silent: set[str] = set()  # slots that did not answer the last scrape

    async def run(self) -> int:
        """Run until a stop signal (then wait for every worker process to stop; exit 0 if each
        stopped cleanly), or in burst mode until each exited 0. Raises CLIError when a worker
        process keeps crashing: the others are stopped first."""
        self._log.info("supervisor starting", processes=self._processes, burst=self._burst,
                       supervisor_pid=os.getpid())
        self._dir = tempfile.mkdtemp(prefix="asyncq-supervisor-")
        servers: list[ProbeServer] = []
        with self._stops.handlers():
            try:
                servers = self._serve()
                async with asyncio.TaskGroup() as tg:
                    slots = [tg.create_task(self._run_slot(n))
                             for n in range(1, self._processes + 1)]
            finally:  # (on an unexpected error: no worker process is left running alone)
                self._stops.forward(signal.SIGTERM)
                for server in servers:
                    server.close()
                shutil.rmtree(self._dir, ignore_errors=True)
        if self._failure is not None:
            raise CLIError(self._failure)
        unclean = [(n, status) for n, status in enumerate((s.result() for s in slots), 1)
                   if status is not None and status not in STOPPED]
        self._log.info("supervisor stopped")
        if unclean:
            n, status = unclean[0]
            raise CLIError(f"worker process {n} {describe_exit(status)} while stopping")
        return 0

    def _give_up(self, slot: int, pid: int, code: int, crashes: int) -> None:
        self._failure = (f"worker process {slot} crashed {crashes} times in a row, each within "
                         f"{self._policy.stable_after:g} s of starting (last: pid {pid} "
                         f"{describe_exit(code)}); stopped all worker processes")
        self._stops.event.set()
        self._stops.forward(signal.SIGTERM)

    async def _run_slot(self, slot: int) -> int | None:
        """Keep one worker process running; returns its last exit status (None: it was never
        started, or burst mode ended it with 0)."""
        policy = self._policy
        loop = asyncio.get_running_loop()
        delay, crashes = policy.first_delay, 0
        while not self._stops.event.is_set():
            proc = self._children[slot] = await spawn(self._argv, self._child_env(slot))
            self._alive_at[slot] = time.monotonic()
            if self._stops.event.is_set():  # a stop came while it was being started
                send(proc, signal.SIGTERM)
            began = loop.time()
            self._log.info("worker process started", slot=slot, pid=proc.pid)
            code = await proc.wait()
            del self._children[slot]
            ran = loop.time() - began
            if self._stops.event.is_set():
                self._log.info("worker process stopped", slot=slot, pid=proc.pid,
                               status=describe_exit(code))
                return code
            if code == 0 and self._burst:
                self._log.info("worker process finished its burst", slot=slot, pid=proc.pid)
                return None
            if ran >= policy.stable_after:
                delay, crashes = policy.first_delay, 0
            if code != 0:
                crashes += 1
                if crashes >= policy.max_quick_crashes:
                    self._give_up(slot, proc.pid, code, crashes)
                    return code
            self._log.warning("worker process ended unexpectedly; restarting", slot=slot,
                              pid=proc.pid, status=describe_exit(code), ran_s=round(ran, 3),
                              restart_in_s=delay)
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._stops.event.wait(), delay)
            delay = min(delay * 2, policy.max_delay)
        return None


    # -- one probe and one scrape for every worker process

    def _child_env(self, slot: int) -> dict[str, str]:
        env = {PROBES_ENV: self._socket(slot)} if self._health or self._metrics else {}
        if self._metrics:
            env[METRICS_ENV] = "1"
        return env

    def _socket(self, slot: int) -> str:
        return os.path.join(self._dir, f"{slot}.sock")

    def _serve(self) -> list[ProbeServer]:
        """The supervisor's probe and metrics servers (CLIError when a port cannot be had)."""
        wanted: list[tuple[str, tuple[str, int], Mapping[str, Route]]] = []
        if self._health is not None:
            wanted.append(("health probes", self._health,
                           {"/livez": self.live, "/readyz": self.ready}))
        if self._metrics is not None:
            wanted.append(("metrics", self._metrics, {"/metrics": self.metrics}))
        servers: list[ProbeServer] = []
        for what, (host, port), routes in wanted:
            try:
                servers.append(ProbeServer(routes, host=host, port=port))
            except OSError as exc:
                for server in servers:
                    server.close()
                raise CLIError(f"cannot serve {what} on {host}:{port}: "
                               f"{exc.strerror or exc}") from None
            self._log.info(f"serving {what} of every worker process", host=host,
                           port=servers[-1].port, paths=sorted(routes))
        return servers

    def _ask(self, route: str, timeout: float | Callable[[int], float]
             ) -> dict[str, tuple[str, int | None, bytes]]:
        """GET ``route`` of every worker process at once: process index -> (what happened,
        HTTP status, body). "down": no process runs in that slot (it is being restarted);
        "starting": it does not serve yet; "not answering": nothing within ``timeout`` (a
        number, or a function of the slot)."""
        def ask(slot: int) -> tuple[str, int | None, bytes]:
            proc = self._children.get(slot)
            if proc is None or proc.returncode is not None:
                return "down", None, b""
            try:
                status, body = get_unix(self._socket(slot), route,
                                        timeout(slot) if callable(timeout) else timeout)
            except (FileNotFoundError, ConnectionRefusedError):
                return "starting", None, b""
            except OSError:
                return "not answering", None, b""
            return "answered", status, body

        slots = range(1, self._processes + 1)
        with concurrent.futures.ThreadPoolExecutor(self._processes) as pool:
            return {str(n): answer for n, answer in zip(slots, pool.map(ask, slots),
                                                        strict=True)}

    def live(self) -> Answer:
        """503 when a worker process says it is stalled, or has not answered for its
        stall_timeout (a process that does not answer one probe in time may be in a long
        call holding the GIL: its stall_timeout applies, as to a blocked loop). One that
        starts or is being restarted is the supervisor's to mind, not a reason to kill the
        pod."""
        answers = self._ask("/livez", HEALTH_PROBE_TIMEOUT)
        bodies = _bodies(answers)
        now = time.monotonic()
        ok = True
        for n, (what, status, _) in answers.items():
            slot = int(n)
            limit = self._stall_timeout.get(slot, self._default_stall_timeout)
            if status is not None:
                self._alive_at[slot] = now
                said = bodies[n].get("stall_timeout_s") if isinstance(bodies[n], dict) else None
                if isinstance(said, int | float):
                    self._stall_timeout[slot] = float(said)
                ok = ok and status == 200
            elif what == "not answering":
                silent = now - self._alive_at.get(slot, now)
                bodies[n] = {"status": what, "silent_s": round(silent, 3),
                             "stall_timeout_s": limit}
                ok = ok and silent < limit
        return json_answer(ok, {"status": "ok" if ok else "stalled", "processes": bodies})

    def ready(self) -> Answer:
        """200 when every worker process is ready."""
        answers = self._ask("/readyz", HEALTH_PROBE_TIMEOUT + 1)
        ok = all(status == 200 for _, status, _ in answers.values())
        return json_answer(ok, {"status": "ok" if ok else "not ready",
                                "processes": _bodies(answers)})

    def metrics(self) -> Answer:
        """Every worker process's metrics, labelled process="N"."""
        from prometheus_client import CONTENT_TYPE_LATEST

        from ..metrics._worker_metrics import merge_processes
        silent = self._silent
        answers = self._ask("/metrics", lambda slot: (SCRAPE_RETRY_TIMEOUT if str(slot) in silent
                                                      else SCRAPE_TIMEOUT))
        texts = {n: body for n, (_, status, body) in answers.items() if status == 200}
        up = {n: n in texts for n in answers}
        self._silent = {n for n, (what, _, _) in answers.items() if what == "not answering"}
        return 200, CONTENT_TYPE_LATEST, merge_processes(texts, up)


def _flag_value(argv: list[str], flag: str, default: float) -> float:
    """The value of ``flag=VALUE`` in a worker process's arguments, else ``default``."""
    for arg in argv:
        name, _, value = arg.partition("=")
        if name == flag:
            with contextlib.suppress(ValueError):
                return float(value)
    return default


def _bodies(answers: Mapping[str, tuple[str, int | None, bytes]]) -> dict[str, Any]:
    """Each process's answer as JSON (or what happened when it gave none)."""
    out: dict[str, Any] = {}
    for n, (what, status, body) in answers.items():
        if status is None:
            out[n] = {"status": what}
            continue
        try:
            out[n] = orjson.loads(body)
        except orjson.JSONDecodeError:
            out[n] = {"status": what, "http_status": status}
    return out


async def watch_supervisor(stop: Callable[[], None], interval: float = 1.0) -> None:
    """In a worker process started by a supervisor: call ``stop`` once the supervisor is gone
    (our parent changed), so a worker is never left running on its own. Returns at once in a
    worker started otherwise."""
    # Read once and dropped: a process the worker's handlers start is not supervised.
    expected = os.environ.pop(SUPERVISOR_ENV, "")
    if not expected.isdigit():
        return
    parent = int(expected)
    while True:
        if os.getppid() != parent:
            get_logger("worker").warning("the supervisor process is gone: stopping",
                                         supervisor_pid=parent)
            stop()
            return
        await asyncio.sleep(interval)
