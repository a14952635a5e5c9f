"""TLS and ACLs: what is refused is refused (wrong CA, no client certificate, wrong server name,
commands and keys outside the ACL rule), what is documented works (the settings object, server
name override, the minimal ACL rule), and the CLI takes every URL form from ASYNCQ_REDIS_URL."""

from __future__ import annotations

import json
import subprocess
import sys
import uuid
from pathlib import Path

import pytest
from redis.asyncio import Redis
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import NoPermissionError
from topology.acl import ACL_RULES, acl_setuser
from topology.tls import TLSFiles, TLSRedisServer, make_certs

from asyncq import BrokerError, Client, ConnectionOptions, Inspector
from asyncq._broker._connection import connect
from asyncq._testing.redis_server import RedisServer

from .conftest import ACL_PASSWORD, ACL_USER, Deployment

pytestmark = pytest.mark.anyio

ROOT = Path(__file__).resolve().parents[2]


async def ping(url: str, options: ConnectionOptions | None = None) -> bool:
    client, close = connect(url, options)
    try:
        return bool(await client.ping())
    finally:
        await close()


async def test_tls_settings_object_and_server_name(tls_server: TLSRedisServer,
                                                   tls_files: TLSFiles) -> None:
    bare = f"rediss://127.0.0.1:{tls_server.port}/0"
    opts = ConnectionOptions(ssl_ca_certs=str(tls_files.ca_cert),
                             ssl_certfile=str(tls_files.client_cert),
                             ssl_keyfile=str(tls_files.client_key))
    assert await ping(bare, opts)
    async with Client(f"redis://127.0.0.1:{tls_server.port}/0",
                      connection=ConnectionOptions(tls=True, **tls_files.client_params())
                      ) as client:
        assert (await client.enqueue("t", queue=f"tls-{uuid.uuid4().hex[:6]}")).id
    # The certificate names localhost and 127.0.0.1; another name is refused unless the
    # expected name is given explicitly.
    assert await ping(tls_server.url + "&ssl_server_hostname=localhost")
    with pytest.raises(RedisConnectionError, match=r"Hostname mismatch|doesn't match"):
        await ping(tls_server.url + "&ssl_server_hostname=redis.example")
    assert await ping(tls_server.url + "&ssl_server_hostname=redis.example"
                      "&ssl_check_hostname=false")


async def test_tls_refuses_unknown_ca_and_missing_client_cert(
    tls_server: TLSRedisServer, tls_files: TLSFiles, tmp_path: Path
) -> None:
    other = make_certs(tmp_path / "other")
    port = tls_server.port
    with pytest.raises(RedisConnectionError, match="certificate verify failed"):
        await ping(f"rediss://127.0.0.1:{port}/0?ssl_ca_certs={other.ca_cert}"
                   f"&ssl_certfile={tls_files.client_cert}&ssl_keyfile={tls_files.client_key}")
    with pytest.raises((RedisConnectionError, ConnectionError)):
        await ping(f"rediss://127.0.0.1:{port}/0?ssl_ca_certs={tls_files.ca_cert}")
    with pytest.raises(RedisConnectionError):  # plain TCP to a TLS-only port
        await ping(f"redis://127.0.0.1:{port}/0?socket_timeout=1")


async def test_acl_user_is_really_limited(acl_server: RedisServer) -> None:
    limited = Redis(port=acl_server.port, username=ACL_USER, password=ACL_PASSWORD)
    try:
        await limited.set("asyncq:probe", b"1")
        with pytest.raises(NoPermissionError):
            await limited.set("other:key", b"1")
        with pytest.raises(NoPermissionError):
            await limited.flushall()
        with pytest.raises(NoPermissionError):
            await limited.config_get("*")
        with pytest.raises(NoPermissionError):
            await limited.publish("other-channel", b"x")
        with pytest.raises(NoPermissionError):  # scripts run with the caller's rights
            await limited.eval("return redis.call('SET', 'other:key', '1')", 0)
    finally:
        await limited.aclose()


async def test_a_rule_missing_script_rights_fails_loudly(acl_server: RedisServer) -> None:
    rules = [r for r in ACL_RULES if r not in ("+evalsha", "+script|load")]
    acl_setuser(acl_server.port, "noscripts", "pw", rules)
    async with Client(f"redis://noscripts:pw@127.0.0.1:{acl_server.port}/0") as client:
        with pytest.raises(BrokerError, match=r"NOPERM|no permissions"):
            await client.enqueue("t", queue="q")


def test_cli_takes_every_url_form_from_the_environment(deployment: Deployment) -> None:
    q = f"cli-{uuid.uuid4().hex[:6]}"
    env = {"ASYNCQ_REDIS_URL": deployment.url, "PATH": "/usr/bin:/bin"}
    run = [sys.executable, "-m", "asyncq"]
    out = subprocess.run([*run, "task", "enqueue", "--type", "t", "--queue", q], cwd=ROOT, env=env,
                         capture_output=True, timeout=60, check=False)
    assert out.returncode == 0, out.stderr.decode()
    out = subprocess.run([*run, "stats", "--json"], cwd=ROOT, env=env, capture_output=True,
                         timeout=60, check=False)
    assert out.returncode == 0, out.stderr.decode()
    doc = json.loads(out.stdout)
    assert q in [entry["queue"] for entry in doc["queues"]]
    assert doc["redis"]["redis_version"]


async def test_inspector_takes_the_settings_object(tls_server: TLSRedisServer,
                                                   tls_files: TLSFiles) -> None:
    async with Inspector(f"rediss://127.0.0.1:{tls_server.port}/0",
                         connection=ConnectionOptions(**tls_files.client_params())
                         ) as inspector:
        assert isinstance(await inspector.queues(), list)
