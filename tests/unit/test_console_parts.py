"""The console's parts that need no server: the bounded lag history, the guard's Host, origin,
token and confirmation checks, and the pages shipping in the wheel (pyproject's package data)."""
from __future__ import annotations

import fnmatch
import tomllib
from pathlib import Path

import pytest

pytest.importorskip("aiohttp", reason="the console needs aiohttp (the test extra installs it)")

from fastmq.console.guard import TOKEN_HEADER, Guard, Refusal  # noqa: E402
from fastmq.console.history import LagHistory  # noqa: E402
from fastmq.console.views import topic_kind  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]


def test_lag_history_is_bounded_in_points_groups_and_time() -> None:
    h = LagHistory(window_s=60, points=5, max_groups=3)
    for i in range(20):
        h.add("g", i, now_ms=1000 * i)
    assert h.series("g", now_ms=19_000) == [(1000 * i, i) for i in range(15, 20)]
    assert h.series("g", now_ms=19_000 + 61_000 + 15_000) == []  # all older than the window
    for name in ("a", "b", "c"):
        h.add(name, 1, now_ms=20_000)
    assert len(h) == 3 and h.series("g", now_ms=20_000) == []  # the stalest group went first
    with pytest.raises(ValueError):
        LagHistory(points=1)


def test_guard_answers_only_its_own_host_names() -> None:
    g = Guard("127.0.0.1", 8080)
    for host in ("127.0.0.1:8080", "localhost:8080", "LOCALHOST:8080", "[::1]:8080"):
        g.check_host(host)
    for host in ("attacker.example:8080", "127.0.0.1:8081", "", None, "127.0.0.1"):
        with pytest.raises(Refusal) as e:
            g.check_host(host)
        assert e.value.status == 421
    Guard("0.0.0.0", 8080).check_host("console.example:8080")  # asked to serve the network: any name


def test_guard_takes_only_same_origin_confirmed_writes_with_the_token() -> None:
    g = Guard("127.0.0.1", 8080, token="t" * 40)
    ok = {TOKEN_HEADER: "t" * 40, "Host": "127.0.0.1:8080"}
    g.check_write(ok, "application/json", {"confirm": "G"}, "G")
    g.check_write({**ok, "Origin": "http://localhost:8080"}, "application/json", {"confirm": "G"}, "G")
    refused = [
        ({**ok, "Origin": "http://attacker.example"}, "application/json", {"confirm": "G"}, "G", 403),
        ({**ok, "Origin": "null"}, "application/json", {"confirm": "G"}, "G", 403),
        ({"Host": "127.0.0.1:8080"}, "application/json", {"confirm": "G"}, "G", 403),
        ({**ok, TOKEN_HEADER: "t" * 39}, "application/json", {"confirm": "G"}, "G", 403),
        (ok, "text/plain", {"confirm": "G"}, "G", 415),
        (ok, "application/json", ["G"], "G", 415),
        (ok, "application/json", {"confirm": "g"}, "G", 400),
        (ok, "application/json", {}, "G", 400),
        (ok, "application/json", {"confirm": ""}, "", 400),  # nothing named: nothing confirmed
    ]
    for headers, ctype, body, target, status in refused:
        with pytest.raises(Refusal) as e:
            g.check_write(headers, ctype, body, target)
        assert e.value.status == status, (headers, body)


def test_topic_kinds() -> None:
    assert [topic_kind(t) for t in ("Orders", "%RETRY%g", "%DLQ%g", "RMQ_SYS_TRACE_TOPIC", "TBW102",
                                    "DefaultCluster_REPLY_TOPIC", "SCHEDULE_TOPIC_XXXX")] == [
        "normal", "retry", "dlq", "system", "system", "system", "system"]


def test_the_pages_ship_in_the_wheel() -> None:
    conf = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]
    include = conf["package-data"]["fastmq"]
    exclude = conf.get("exclude-package-data", {})
    static = sorted((ROOT / "fastmq" / "console" / "static").iterdir())
    assert {p.suffix for p in static} >= {".html", ".css", ".js"}
    for p in static:
        rel = p.relative_to(ROOT / "fastmq").as_posix()
        assert any(fnmatch.fnmatch(rel, pat) for pat in include), f"{rel} is not package data"
        for pkg in ("*", "fastmq", "fastmq.console", "fastmq.console.static"):
            assert not any(fnmatch.fnmatch(p.name, pat) for pat in exclude.get(pkg, [])), f"{rel} excluded by {pkg}"
    assert "aiohttp" in " ".join(tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
                                 ["optional-dependencies"]["test"])


async def test_writes_on_a_cluster_with_acl_need_the_consoles_credentials(monkeypatch: pytest.MonkeyPatch) -> None:
    """With ACL on the brokers and no --access-key/--secret-key, the page is told writes are off
    and the API refuses them, before anything reaches the cluster (there is none here)."""
    from aiohttp.test_utils import TestClient, TestServer

    from fastmq.client.acl import SessionCredentials
    from fastmq.console import app as console_app
    from fastmq.console import views

    async def acl_on(admin: object) -> bool:
        return True
    monkeypatch.setattr(views, "acl_enabled", acl_on)
    guard = Guard("0.0.0.0", 1, token="t" * 40)  # any Host: the test server's port is its own
    settings = console_app.ConsoleSettings("127.0.0.1:1", host="0.0.0.0", sample_s=3600, timeout=0.2)
    async with TestClient(TestServer(console_app.create_app(settings, guard))) as client:
        session = await (await client.get("/api/session")).json()
        assert session["acl"] is True and session["writes"] is False and "--access-key" in session["writesWhy"]
        r = await client.post("/api/groups/G/reset-offset", json={"topic": "T", "timestamp": -1, "confirm": "G"},
                              headers={TOKEN_HEADER: "t" * 40})
        assert r.status == 403 and "ACL" in (await r.json())["error"]
        r = await client.get("/static/../app.py")
        assert r.status == 404
        r = await client.get("/")
        assert r.status == 200 and "fastmq console" in await r.text()
        assert r.headers["Content-Security-Policy"].startswith("default-src 'none'")
    signed = console_app.ConsoleSettings("127.0.0.1:1", host="0.0.0.0", sample_s=3600, timeout=0.2,
                                         credentials=SessionCredentials("ak-console", "sk-console"))
    async with TestClient(TestServer(console_app.create_app(signed, guard))) as client:
        session = await (await client.get("/api/session")).json()
        assert session["writes"] is True
