"""DNS rebinding: a page of the attacker's domain, re-pointed at 127.0.0.1, reaches a loopback
dashboard with its own name as ``Host`` and as ``Origin``. The dashboard answers only the
loopback names and the allowed hosts (400 for any other ``Host``, reads and actions alike), in
process (httpx) and as ``asyncq web``."""

from __future__ import annotations

from pathlib import Path

import httpx
import pytest

from asyncq import Client, Inspector
from asyncq._cli import main
from asyncq.web import create_app
from tests.web.web_helpers import WebFactory, csrf_token, web_http, web_process

REBOUND = "http://rebind.evil.example:8080"


async def _rebound_delete(http: httpx.AsyncClient, queue: str, task_id: str) -> list[int]:
    """What the attacker's page does: read the dashboard, then post a delete with the token
    the dashboard itself handed out, from its own origin; the status of each step."""
    page = await http.get("/")
    task = await http.get("/task", params={"q": queue, "id": task_id})
    token = http.cookies.get("asyncq_csrf") or "t" * 43
    posted = await http.post("/action/task", headers={"Origin": REBOUND}, data={
        "csrf": token, "action": "delete", "queue": queue, "id": task_id, "next": "/"})
    return [page.status_code, task.status_code, posted.status_code]


@pytest.mark.anyio
async def test_a_rebound_domain_can_neither_read_nor_act(
        asyncq_redis_url: str, asyncq_client: Client, asyncq_inspector: Inspector,
        asyncq_queue: str) -> None:
    info = await asyncq_client.enqueue("t", {"secret": 1}, queue=asyncq_queue, process_in=3600)
    async with web_http(create_app(asyncq_redis_url), base_url=REBOUND) as http:
        statuses = await _rebound_delete(http, asyncq_queue, info.id)
        refused = await http.get("/")
    assert statuses == [400, 400, 400]
    assert "Host 'rebind.evil.example:8080' is not an allowed host" in refused.text
    assert "secret" not in refused.text and "allowed_hosts" in refused.text
    assert (await asyncq_inspector.task_info(asyncq_queue, info.id)).state.value == "scheduled"
    # by every loopback name, the same app answers, and its own actions pass
    for base in ("http://localhost:8080", "http://127.0.0.1:8080", "http://[::1]:8080"):
        async with web_http(create_app(asyncq_redis_url), base_url=base) as http:
            assert (await http.get("/")).status_code == 200, base
    async with web_http(create_app(asyncq_redis_url), base_url="http://localhost:8080") as http:
        page = await http.get("/task", params={"q": asyncq_queue, "id": info.id})
        done = await http.post("/action/task", headers={"Origin": "http://localhost:8080"},
                               data={"csrf": csrf_token(page, http), "action": "archive",
                                     "queue": asyncq_queue, "id": info.id, "next": "/"})
        # an allowed host, but another port: a page there could have planted the cookie
        other_port = await http.post("/action/task", headers={"Origin": "http://localhost:3000"},
                                     data={"csrf": csrf_token(page, http), "action": "run",
                                           "queue": asyncq_queue, "id": info.id, "next": "/"})
    assert (done.status_code, other_port.status_code) == (303, 403)
    assert (await asyncq_inspector.task_info(asyncq_queue, info.id)).state.value == "archived"


@pytest.mark.anyio
async def test_allowed_hosts_names_domains_and_any(web: WebFactory) -> None:
    cases = {("ops.example.com",): {"ops.example.com": 200, "OPS.example.com.:443": 200,
                                    "x.ops.example.com": 400, "example.com": 400},
             (".example.com",): {"example.com": 200, "a.b.example.com": 200,
                                 "badexample.com": 400, "localhost": 200},
             ("10.0.0.5", "[fd00::1]"): {"10.0.0.5:8080": 200, "[fd00::1]:80": 200,
                                         "10.0.0.6": 400},
             ("*",): {"anything.example": 200}}
    for hosts, answers in cases.items():
        async with web(allowed_hosts=list(hosts)) as http:
            for host, status in answers.items():
                got = await http.get("/static/app.css", headers={"Host": host})
                assert got.status_code == status, (hosts, host)
    for bad in (["https://ops.example.com"], ["ops.example.com:8080"], ["ops/x"], [""], "a.b"):
        with pytest.raises((ValueError, TypeError), match="allowed_hosts"):
            create_app("redis://127.0.0.1:1/0", allowed_hosts=bad)


@pytest.mark.anyio
async def test_a_test_clients_made_up_host_is_refused_until_allowed(
        asyncq_redis_url: str) -> None:
    statuses = []
    for options in ({}, {"allowed_hosts": ["testserver"]}):
        async with web_http(create_app(asyncq_redis_url, **options),
                            base_url="http://testserver") as http:
            statuses.append((await http.get("/")).status_code)
            statuses.append((await http.post("/action/queue", data={"action": "pause",
                                                                    "queue": "q"})).status_code)
    # allowed, the POST is then refused for its missing token (403), no longer for its Host
    assert statuses == [400, 400, 200, 403]


@pytest.mark.anyio
async def test_asyncq_web_answers_only_its_allowed_hosts(
        asyncq_redis_url: str, asyncq_client: Client, asyncq_queue: str, tmp_path: Path,
        capsys: pytest.CaptureFixture[str]) -> None:
    task_id = (await asyncq_client.enqueue("t", None, queue=asyncq_queue, process_in=3600)).id
    with web_process(asyncq_redis_url, tmp_path / "web.log",
                     "--allowed-host", "ops.example.com") as url:
        port = url.rsplit(":", 1)[1]
        async with httpx.AsyncClient(base_url=url) as http:
            async def status(host: str, path: str = "/") -> int:
                return (await http.get(path, headers={"Host": f"{host}:{port}"})).status_code

            assert [await status(h) for h in ("127.0.0.1", "localhost", "ops.example.com")
                    ] == [200, 200, 200]
            assert await status("rebind.evil.example") == 400
            assert await status("rebind.evil.example",
                                f"/task?q={asyncq_queue}&id={task_id}") == 400
            evil = {"Host": f"rebind.evil.example:{port}",
                    "Origin": f"http://rebind.evil.example:{port}"}
            first = await http.get("/", headers=evil)
            posted = await http.post("/action/task", headers=evil, data={
                "csrf": first.cookies.get("asyncq_csrf") or "t" * 43, "action": "delete",
                "queue": asyncq_queue, "id": task_id, "next": "/"})
            assert (first.status_code, posted.status_code) == (400, 400)
            task = await http.get("/task", params={"q": asyncq_queue, "id": task_id})
            assert task.status_code == 200 and "scheduled" in task.text
    assert main(["web", "--allowed-host", "https://ops.example.com"]) == 1
    assert "is not a host name" in capsys.readouterr().err
