"""Every asynq_inspect script on a 3-master Redis Cluster: each call names keys of one slot only
(the queue's hash tag), so the cluster runs it, and the Inspector's reads of servers spread over
several slots work there too."""

from __future__ import annotations

import uuid
from typing import Any

import pytest
from redis.crc import key_slot

from asyncq import Client, Inspector
from asyncq._broker._asynq import _keys as K
from asyncq._broker._asynq._broker import AsynqBroker
from asyncq._broker._asynq._schema import ServerInfoPB
from asyncq._broker._asynq._scripts import asynq_scripts
from asyncq._broker._runner import ScriptRunner
from tests.broker.conformance.test_conf_inspect import drive_inspection

OWNER = "srv-c"


async def test_every_inspect_script_runs_in_one_slot(cbroker: AsynqBroker,
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    called: set[str] = set()
    slots: list[tuple[str, set[int]]] = []
    real_run, real_pipeline = ScriptRunner.run, ScriptRunner._pipeline

    def record(name: str, keys: Any) -> None:
        called.add(name)
        slots.append((name, {key_slot(k.encode()) for k in keys}))

    async def run(self: ScriptRunner, name: str, keys: Any, args: Any) -> Any:
        record(name, keys)
        return await real_run(self, name, keys, args)

    async def pipeline(self: ScriptRunner, calls: Any, preload: Any = ()) -> Any:
        for script, keys, _ in calls:
            record(script.name, keys)
        return await real_pipeline(self, calls, preload)

    monkeypatch.setattr(ScriptRunner, "run", run)
    monkeypatch.setattr(ScriptRunner, "_pipeline", pipeline)
    await drive_inspection(cbroker, Client(cbroker), f"c-{uuid.uuid4().hex[:8]}")
    wanted = {name for name in asynq_scripts() if name.startswith("asynq_inspect_")}
    assert wanted <= called, f"not driven: {sorted(wanted - called)}"
    assert all(len(s) == 1 for _, s in slots), [n for n, s in slots if len(s) != 1]


async def test_servers_in_many_slots(cbroker: AsynqBroker) -> None:
    redis: Any = cbroker.redis
    names = [f"host{i}" for i in range(6)]
    now_s = cbroker.clock.now_ms() // 1000
    keys = []
    for i, host in enumerate(names):
        key = K.server_key(host, i, f"sid-{i}")
        keys.append(key)
        info = ServerInfoPB(host=host, pid=i, server_id=f"sid-{i}", concurrency=1)
        await redis.set(key, info.SerializeToString())
        await redis.zadd(K.SERVERS, {key: now_s + 30})
    assert len({key_slot(k.encode()) for k in keys}) > 1
    try:
        servers = await Inspector(cbroker).workers()
        assert sorted(s.host for s in servers if s.host in names) == names
    finally:
        await redis.zrem(K.SERVERS, *keys)
        for key in keys:
            await redis.delete(key)
