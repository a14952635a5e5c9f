"""Scheduler records of wire=asynq against the real Go library: Go's Inspector reads the
entries and enqueue history asyncq's Scheduler publishes, and asyncq's Inspector reads those a
running Go Scheduler publishes. A small Go program (below) is built with the Go toolchain and
Go's module cache, for each asynq release tested; skipped when ``go`` is not installed."""

from __future__ import annotations

import asyncio
import json
import shutil
import subprocess
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from redis.asyncio import Redis

import asyncq
from asyncq._broker._asynq import _keys as K
from asyncq.testing import wait_until

pytestmark = pytest.mark.anyio

VERSIONS = ["v0.24.1", "v0.26.0"]

PROGRAM = r"""
package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"
	"time"

	"github.com/hibiken/asynq"
)

type entry struct {
	ID       string
	Spec     string
	Type     string
	Payload  []byte
	Opts     []string
	NextMs   int64
	PrevMs   int64
	PrevZero bool
	Events   []event
}

type event struct {
	TaskID string
	AtMs   int64
}

// inspect ADDR: what Go's Inspector lists of every live scheduler, as JSON.
func inspect(addr string) {
	insp := asynq.NewInspector(asynq.RedisClientOpt{Addr: addr})
	defer insp.Close()
	entries, err := insp.SchedulerEntries()
	if err != nil {
		panic(err)
	}
	out := []entry{}
	for _, e := range entries {
		opts := []string{}
		for _, o := range e.Opts {
			opts = append(opts, o.String())
		}
		evs, err := insp.ListSchedulerEnqueueEvents(e.ID, asynq.PageSize(100))
		if err != nil {
			panic(err)
		}
		events := []event{}
		for _, x := range evs {
			events = append(events, event{x.TaskID, x.EnqueuedAt.UnixMilli()})
		}
		out = append(out, entry{e.ID, e.Spec, e.Task.Type(), e.Task.Payload(), opts,
			e.Next.UnixMilli(), e.Prev.UnixMilli(), e.Prev.IsZero(), events})
	}
	b, _ := json.Marshal(out)
	fmt.Println(string(b))
}

// schedule ADDR QUEUE: a Go Scheduler firing every second until stdin closes.
func schedule(addr, queue string) {
	s := asynq.NewScheduler(asynq.RedisClientOpt{Addr: addr},
		&asynq.SchedulerOpts{LogLevel: asynq.ErrorLevel, HEARTBEAT})
	id, err := s.Register("@every 1s", asynq.NewTask("go:tick", []byte("\x01go")),
		asynq.Queue(queue), asynq.MaxRetry(3), asynq.Timeout(90*time.Second),
		asynq.Retention(time.Hour))
	if err != nil {
		panic(err)
	}
	if err := s.Start(); err != nil {
		panic(err)
	}
	fmt.Println(id)
	bufio.NewReader(os.Stdin).ReadString('\n')
	s.Shutdown()
}

func main() {
	switch os.Args[1] {
	case "inspect":
		inspect(os.Args[2])
	case "schedule":
		schedule(os.Args[2], os.Args[3])
	}
}
"""


@pytest.fixture(scope="module", params=VERSIONS)
def go_program(request: pytest.FixtureRequest,
               tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """The program above built against ``github.com/hibiken/asynq`` at one release."""
    go = shutil.which("go")
    if go is None:
        pytest.skip("the Go toolchain is not installed")
    version: str = request.param
    work = tmp_path_factory.mktemp(f"asynq-{version}")
    # v0.24 has no HeartbeatInterval option (its scheduler publishes every 10 s)
    heartbeat = "" if version == "v0.24.1" else "HeartbeatInterval: time.Second"
    (work / "main.go").write_text(PROGRAM.replace("HEARTBEAT", heartbeat))
    (work / "go.mod").write_text(
        f"module asyncqsched\n\ngo 1.22\n\nrequire github.com/hibiken/asynq {version}\n")
    tidy = subprocess.run([go, "mod", "tidy"], cwd=work, capture_output=True, text=True,
                          timeout=600)
    if tidy.returncode != 0:
        pytest.skip(f"asynq {version} cannot be fetched here: {tidy.stderr.strip()[-300:]}")
    subprocess.run([go, "build", "-o", "prog", "."], cwd=work, check=True, timeout=600)
    yield work / "prog"


def addr_of(redis_url: str) -> str:
    return redis_url.removeprefix("redis://").split("/")[0]


async def go_inspect(program: Path, redis_url: str) -> list[dict[str, Any]]:
    proc = await asyncio.create_subprocess_exec(
        str(program), "inspect", addr_of(redis_url), stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE)
    out, err = await asyncio.wait_for(proc.communicate(), timeout=60)
    assert proc.returncode == 0, err.decode()
    found: list[dict[str, Any]] = json.loads(out)
    return found


def ms(when: datetime) -> int:
    return round(when.timestamp() * 1000)


async def test_gos_inspector_reads_asyncqs_entries_and_history(
    go_program: Path, asyncq_redis_url: str, asyncq_queue: str,
) -> None:
    clock = asyncq.FakeClock()  # near real time: Go's Inspector prunes on its own clock
    s = asyncq.Scheduler(asyncq_redis_url + "?wire=asynq", clock=clock)
    every = s.register("@every 1s", "report", b"\x00ops", queue=asyncq_queue, max_retry=10,
                       timeout=timedelta(minutes=2), retention=timedelta(seconds=90.5))
    nightly = s.register("30 2 * * *", "nightly", {"to": "ops"}, queue=asyncq_queue,
                         deadline=datetime(2030, 1, 2, 3, 4, 5, tzinfo=UTC),
                         unique=timedelta(hours=1), process_in=timedelta(minutes=5))
    infos = []
    for _ in range(3):
        clock.advance(1)
        infos += await s.tick()
    await s.heartbeat.beat()
    try:
        seen = {e["ID"]: e for e in await go_inspect(go_program, asyncq_redis_url)}
        e, n = seen[every], seen[nightly]
        assert (e["Spec"], e["Type"], e["Payload"]) == ("@every 1s", "report", "AG9wcw==")
        assert e["Opts"] == [f'Queue("{asyncq_queue}")', "MaxRetry(10)", "Timeout(2m0s)",
                             "Retention(1m30.5s)"]
        last_tick = ms(infos[-1].enqueued_at) // 1000 * 1000
        assert (e["PrevMs"], e["NextMs"], e["PrevZero"]) == (last_tick, last_tick + 1000, False)
        assert e["Events"] == [{"TaskID": i.id, "AtMs": ms(i.enqueued_at)}
                               for i in reversed(infos)]  # newest first
        assert (n["Spec"], n["Type"], n["PrevZero"], n["Events"]) == (
            "30 2 * * *", "nightly", True, [])
        assert n["Opts"] == [f'Queue("{asyncq_queue}")',
                             "Deadline(Wed Jan  2 03:04:05 UTC 2030)", "ProcessIn(5m0s)",
                             "Unique(1h0m0s)"]
        await s.heartbeat.clear()
        assert not any(e["ID"] in (every, nightly)
                       for e in await go_inspect(go_program, asyncq_redis_url))
    finally:
        await s.close()


async def test_asyncqs_inspector_reads_a_running_go_scheduler(
    go_program: Path, asyncq_redis_url: str, redis_client: Redis, asyncq_queue: str,
) -> None:
    if go_program.parent.name.startswith("asynq-v0.24"):
        pytest.skip("v0.24's scheduler publishes its entries every 10 s (no option to beat "
                    "faster); its records are v0.26's, read in the v0.26 run")
    proc = await asyncio.create_subprocess_exec(
        str(go_program), "schedule", addr_of(asyncq_redis_url), asyncq_queue,
        stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE)
    try:
        assert proc.stdout is not None and proc.stdin is not None
        entry_id = (await asyncio.wait_for(proc.stdout.readline(), timeout=30)).decode().strip()
        async with asyncq.Inspector(asyncq_redis_url + "?wire=asynq") as inspector:

            async def published() -> list[asyncq.SchedulerEntry]:
                return [e for e in await inspector.scheduler_entries() if e.id == entry_id]

            async def history() -> list[asyncq.SchedulerEvent]:
                return await inspector.scheduler_history(entry_id)

            [entry] = await wait_until(published, timeout=15, message="Go's entry published")
            assert (entry.spec, entry.type, entry.payload, entry.encoding) == (
                "@every 1s", "go:tick", b"\x01go", "b")
            assert entry.enqueue_options() == {
                "queue": asyncq_queue, "max_retry": 3, "timeout": timedelta(seconds=90),
                "retention": timedelta(hours=1)}
            assert entry.scheduler_id.count(":") >= 2  # Go's <host>:<pid>:<uuid>
            events = await wait_until(history, timeout=15, message="Go's enqueue recorded")
            for ev in events:
                assert ev.entry_id == entry_id and ev.queue == ""  # Go records no queue
                assert await redis_client.exists(K.queue_keys(asyncq_queue).task(ev.task_id))
            proc.stdin.close()
            assert await asyncio.wait_for(proc.wait(), timeout=30) == 0
            assert await published() == []  # Go's shutdown clears its entries
            assert await history() == []  # and, unlike asyncq's, its history
    finally:
        if proc.returncode is None:
            proc.kill()
            await proc.wait()
