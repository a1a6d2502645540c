"""Acceptance 2: the official RocketMQ C++ client gets its routes from ``fastmq-namesrv``.

The client (PyPI ``rocketmq==0.4.4``, librocketmq.so inside) runs in its own process via
tests/interop/cpp_peer.py with HOME in a temp dir; the broker the route names is a recording stub
(tests/stub_broker.py), and a recording proxy in front of the NameServer shows what the client
asked and was answered. The NameServer is the real ``fastmq-namesrv`` command.
"""
from __future__ import annotations

import asyncio
import json
import os
import sys
import time
import zlib
from pathlib import Path

import pytest

from fastmq.protocol.bodies import DataVersion, RegisterBrokerBody, TopicConfig, TopicRouteData
from fastmq.protocol.codes import LanguageCode, RequestCode, ResponseCode
from fastmq.protocol.command import create_request
from fastmq.remoting import RemotingClient
from tests.stub_broker import RecordingBroker, RecordingProxy, start_stub_broker
from fastmq.testing import ServerProcess, free_port

pytestmark = pytest.mark.cpp_client

PEER = Path(__file__).with_name("cpp_peer.py")
TOPIC = "TopicCpp"


async def _run_peer(tmp: Path, *args: str, timeout: float = 60) -> list[dict]:
    home = tmp / "cpp-home"
    home.mkdir(exist_ok=True)
    env = {**os.environ, "HOME": str(home), "PYTHONPATH": str(PEER.parent.parent)}
    proc = await asyncio.create_subprocess_exec(sys.executable, str(PEER), *args, env=env, cwd=home,
                                                stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.STDOUT)
    try:
        out, _ = await asyncio.wait_for(proc.communicate(), timeout)
    except asyncio.TimeoutError:
        proc.kill()
        await proc.wait()
        raise
    text = out.decode("utf-8", "replace")
    for line in text.splitlines():
        if line.startswith("RESULT "):
            return json.loads(line[7:])["results"]
    raise AssertionError(f"C++ peer exited {proc.returncode} without a result:\n{text[-3000:]}")


async def _wait_for(predicate, timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError("condition not met in time")
        await asyncio.sleep(0.05)


@pytest.fixture
def namesrv(tmp_path):
    port = free_port()
    props = tmp_path / "namesrv.properties"
    props.write_text(f"listenPort={port}\nkvConfigPath={tmp_path / 'kv.json'}\nlogPath={tmp_path / 'ns.log'}\n")
    proc = ServerProcess(["fastmq-namesrv", "-c", str(props)], port, tmp_path, env={"HOME": str(tmp_path)})
    proc.start()
    try:
        yield proc
    finally:
        assert proc.stop() == 0, proc.output()[-3000:]


@pytest.fixture
async def cluster(namesrv):
    """The NameServer behind a recording proxy, and a stub broker registered for TOPIC only (no TBW102)."""
    server, stub = await start_stub_broker()
    proxy = RecordingProxy(namesrv.addr)
    await proxy.start()
    registrar = RemotingClient()  # kept open: closing it would unregister the broker at once
    try:
        # the compressed form a 4.9 broker sends when compressedRegister=true, checksummed as UtilAll.crc32
        body = RegisterBrokerBody({TOPIC: TopicConfig(TOPIC, 4, 4, 6)}, DataVersion()).encode(compress=True)
        resp = await registrar.invoke(namesrv.addr, create_request(RequestCode.REGISTER_BROKER, {
            "brokerName": "stub-broker", "brokerAddr": f"127.0.0.1:{server.port}", "clusterName": "DefaultCluster",
            "haServerAddr": "", "brokerId": 0, "compressed": True,
            "bodyCrc32": zlib.crc32(body) & 0x7FFFFFFF}, body), 3)
        assert resp.code == ResponseCode.SUCCESS, resp.remark
        yield proxy, server, stub
    finally:
        await registrar.close()
        await proxy.close()
        await server.close()


def _route_answers(proxy: RecordingProxy, topic: str) -> list[int]:
    asks = [r for r in proxy.requests(RequestCode.GET_ROUTEINFO_BY_TOPIC) if (r.ext_fields or {}).get("topic") == topic]
    return [a.code for a in (proxy.response_to(r) for r in asks) if a is not None]


async def test_cpp_producer_is_routed_to_the_registered_broker(cluster, tmp_path) -> None:
    proxy, server, stub = cluster
    results = await _run_peer(tmp_path, "produce", "--namesrv", proxy.addr, "--topic", TOPIC,
                              "--tags", "TagCpp", "--body", "payload", "--count", "3")
    assert [(r["ok"], r.get("status")) for r in results] == [(True, 0)] * 3, results

    # the client asked the NameServer, and the route it got names the stub broker
    ask = proxy.requests(RequestCode.GET_ROUTEINFO_BY_TOPIC)[0]
    assert ask.ext_fields["topic"] == TOPIC and ask.language == LanguageCode.CPP
    answer = proxy.response_to(ask)
    assert answer is not None and answer.code == ResponseCode.SUCCESS
    route = TopicRouteData.from_json(answer.body)
    assert [b.broker_addrs for b in route.broker_datas] == [{0: f"127.0.0.1:{server.port}"}]
    assert [(q.broker_name, q.write_queue_nums) for q in route.queue_datas] == [("stub-broker", 4)]

    # ...and it sent there: topic, body, tags, keys, user properties intact
    sends = stub.sends()
    assert len(sends) == 3
    for i, (s, r) in enumerate(zip(sends, results)):
        assert s.code == RequestCode.SEND_MESSAGE and s.ext_fields["topic"] == TOPIC
        assert s.body == f"payload-{i}".encode()
        props = s.ext_fields["properties"]
        assert "TAGS\x01TagCpp\x02" in props and f"KEYS\x01key-{i}\x02" in props
        assert f"userProp\x01value-{i}\x02" in props
        assert int(s.ext_fields["queueId"]) in range(4)
        # the string-typed queueOffset reached the application; msg_id is the client's UNIQ_KEY
        assert r["offset"] == i
        assert f"UNIQ_KEY\x01{r['msg_id']}\x02" in props
    # the stub stays the only broker the client talked to; its requests were all answered
    assert {r.code for r in stub.requests} <= {RequestCode.SEND_MESSAGE, RequestCode.HEART_BEAT,
                                                RequestCode.UNREGISTER_CLIENT}


async def test_cpp_oneway_sends_reach_the_broker(cluster, tmp_path) -> None:
    proxy, server, stub = cluster
    results = await _run_peer(tmp_path, "produce", "--namesrv", proxy.addr, "--topic", TOPIC,
                              "--body", "oneway", "--count", "2", "--oneway")
    assert all(r["ok"] for r in results), results
    await _wait_for(lambda: len(stub.sends()) == 2)
    assert sorted(s.body for s in stub.sends()) == [b"oneway-0", b"oneway-1"]


async def test_cpp_producer_reports_unknown_topic(cluster, tmp_path) -> None:
    proxy, server, stub = cluster
    # one client process: the known topic first proves the NameServer path works, then the unknown one
    results = await _run_peer(tmp_path, "produce", "--namesrv", proxy.addr, "--topic", TOPIC,
                              "--topic", "NoSuchTopicCpp", "--timeout-ms", "2000")
    known, unknown = results
    assert known["ok"] and known["status"] == 0, known
    assert not unknown["ok"] and "No route info of this topic" in unknown["error"], unknown
    # the NameServer was asked for the topic, then for TBW102 (auto-create), and had neither
    assert _route_answers(proxy, "NoSuchTopicCpp") and set(_route_answers(proxy, "NoSuchTopicCpp")) == {
        ResponseCode.TOPIC_NOT_EXIST}
    assert set(_route_answers(proxy, "TBW102")) == {ResponseCode.TOPIC_NOT_EXIST}
    assert [s.ext_fields["topic"] for s in stub.sends()] == [TOPIC]


def test_stub_broker_answers_with_string_ext_fields() -> None:
    # The C++ client ignores numeric header values and crashes on a SEND SUCCESS without extFields.
    from fastmq.protocol.command import create_request as req

    class _Conn:
        local_addr = "127.0.0.1:10911"

    rec = RecordingBroker()
    resp = rec.process_request(_Conn(), req(RequestCode.SEND_MESSAGE, {"topic": "t", "queueId": 2}, b"x"))
    assert resp.code == ResponseCode.SUCCESS
    assert set(resp.ext_fields) == {"msgId", "queueId", "queueOffset", "MSG_REGION", "TRACE_ON"}
    assert all(isinstance(v, str) for v in resp.ext_fields.values())
    assert resp.ext_fields["queueId"] == "2" and len(resp.ext_fields["msgId"]) == 32
    assert rec.process_request(_Conn(), req(RequestCode.HEART_BEAT)).code == ResponseCode.SUCCESS
    assert rec.process_request(_Conn(), req(999)).code == ResponseCode.REQUEST_CODE_NOT_SUPPORTED
    assert [r.code for r in rec.requests] == [RequestCode.SEND_MESSAGE, RequestCode.HEART_BEAT, 999]
