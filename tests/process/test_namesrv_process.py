"""``fastmq-namesrv`` as a separate process, started as a user would (the issue's acceptance 1, 3, 4)."""
from __future__ import annotations

import asyncio
import os
import signal
import socket
import struct
import subprocess
import sys
from pathlib import Path

import pytest

import zlib

from fastmq.namesrv.config import NamesrvConfig
from fastmq.namesrv.controller import NamesrvController
from fastmq.namesrv.processor import DefaultRequestProcessor
from fastmq.protocol.bodies import (ClusterInfo, DataVersion, KVTable, RegisterBrokerBody, TopicConfig, TopicList,
                                    TopicRouteData)
from fastmq.protocol.codes import RequestCode, ResponseCode
from fastmq.protocol.command import create_request
from fastmq.remoting import RemotingClient
from fastmq.testing import ServerProcess, free_port

BROKER = "127.0.0.1:10911"


def _props(tmp: Path, port: int, **extra: object) -> Path:
    lines = {"listenPort": port, "kvConfigPath": tmp / "kv" / "kvConfig.json", "logPath": tmp / "logs" / "ns.log",
             **extra}
    p = tmp / "namesrv.properties"
    p.write_text("".join(f"{k}={v}\n" for k, v in lines.items()))
    return p


@pytest.fixture
def namesrv(tmp_path):
    port = free_port()
    props = _props(tmp_path, port, scanNotActiveBrokerInterval=200, brokerChannelExpiredTime=1500)
    proc = ServerProcess(["fastmq-namesrv", "-c", str(props)], port, tmp_path, env={"HOME": str(tmp_path)})
    proc.start()
    try:
        yield proc
    finally:
        rc = proc.stop()
        assert rc == 0, proc.output()


def _register(topic: str, compressed: bool = False, broker: str = BROKER, name: str = "broker-a",
              version: DataVersion | None = None):
    body = RegisterBrokerBody({topic: TopicConfig(topic, 4, 4, 6)}, version or DataVersion())
    return create_request(RequestCode.REGISTER_BROKER, {
        "brokerName": name, "brokerAddr": broker, "clusterName": "DefaultCluster",
        "haServerAddr": "127.0.0.1:10912", "brokerId": 0, "compressed": compressed}, body.encode(compressed))


async def _route(client: RemotingClient, addr: str, topic: str):
    return await client.invoke(addr, create_request(RequestCode.GET_ROUTEINFO_BY_TOPIC, {"topic": topic}), 3)


async def _wait_for_code(client: RemotingClient, addr: str, topic: str, code: int, seconds: float) -> None:
    loop = asyncio.get_running_loop()
    deadline = loop.time() + seconds
    while True:
        resp = await _route(client, addr, topic)
        if resp.code == code or loop.time() > deadline:
            assert resp.code == code, resp
            return
        await asyncio.sleep(0.1)


async def test_registration_makes_topic_routable(namesrv) -> None:
    broker, reader = RemotingClient(), RemotingClient()
    try:
        resp = await broker.invoke(namesrv.addr, _register("TopicA"), 3)
        assert resp.code == ResponseCode.SUCCESS and resp.body is None  # no ORDER_TOPIC_CONFIG yet: no body, as RocketMQ
        resp = await broker.invoke(namesrv.addr, _register("TopicZ", compressed=True, broker="127.0.0.1:20911",
                                                           name="broker-z"), 3)
        assert resp.code == ResponseCode.SUCCESS
        for topic, addr in (("TopicA", BROKER), ("TopicZ", "127.0.0.1:20911")):
            resp = await _route(reader, namesrv.addr, topic)
            assert resp.code == ResponseCode.SUCCESS
            route = TopicRouteData.from_json(resp.body)
            assert route.broker_datas[0].broker_addrs == {0: addr}
            assert route.queue_datas[0].write_queue_nums == 4
        resp = await _route(reader, namesrv.addr, "NoSuchTopic")
        assert resp.code == ResponseCode.TOPIC_NOT_EXIST
        assert resp.remark.startswith("No topic route info in name server for the topic: NoSuchTopic")
        resp = await reader.invoke(namesrv.addr, create_request(RequestCode.GET_BROKER_CLUSTER_INFO), 3)
        assert b"broker-a" in resp.body and b"broker-z" in resp.body
    finally:
        await broker.close()
        await reader.close()


async def test_bad_requests_get_clear_errors(namesrv) -> None:
    c = RemotingClient()
    try:
        resp = await c.invoke(namesrv.addr, create_request(RequestCode.REGISTER_BROKER, {"brokerName": "b"}), 3)
        assert resp.code == ResponseCode.SYSTEM_ERROR and "<" in resp.remark and "is null" in resp.remark
        bad_crc = _register("T")
        bad_crc.ext_fields["bodyCrc32"] = "12345"
        resp = await c.invoke(namesrv.addr, bad_crc, 3)
        assert (resp.code, resp.remark) == (ResponseCode.SYSTEM_ERROR, "crc32 not match")
        broken = _register("T")
        broken.body = b"{not json"
        resp = await c.invoke(namesrv.addr, broken, 3)
        assert resp.code == ResponseCode.SYSTEM_ERROR and "JSON" in resp.remark
        resp = await c.invoke(namesrv.addr, create_request(99999), 3)
        assert resp.code == ResponseCode.REQUEST_CODE_NOT_SUPPORTED
        resp = await c.invoke(namesrv.addr, create_request(RequestCode.GET_KV_CONFIG, {"namespace": "n", "key": "k"}), 3)
        assert (resp.code, resp.remark) == (ResponseCode.QUERY_NOT_FOUND, "No config item, Namespace: n Key: k")
        resp = await c.invoke(namesrv.addr, create_request(RequestCode.UPDATE_NAMESRV_CONFIG,
                                                           body=b"kvConfigPath=/tmp/x\n"), 3)
        assert resp.code == ResponseCode.NO_PERMISSION
        resp = await c.invoke(namesrv.addr, create_request(RequestCode.UPDATE_NAMESRV_CONFIG,
                                                           body=b"orderMessageEnable=true\n"), 3)
        assert resp.code == ResponseCode.SUCCESS
        resp = await c.invoke(namesrv.addr, create_request(RequestCode.GET_NAMESRV_CONFIG), 3)
        assert b"orderMessageEnable=true" in resp.body
    finally:
        await c.close()


async def test_order_topic_conf_from_kv(namesrv) -> None:
    c = RemotingClient()
    try:
        await c.invoke(namesrv.addr, create_request(RequestCode.UPDATE_NAMESRV_CONFIG,
                                                    body=b"orderMessageEnable=true\n"), 3)
        await c.invoke(namesrv.addr, create_request(RequestCode.PUT_KV_CONFIG, {
            "namespace": "ORDER_TOPIC_CONFIG", "key": "OrderT", "value": "broker-a:4"}), 3)
        await c.invoke(namesrv.addr, _register("OrderT"), 3)
        route = TopicRouteData.from_json((await _route(c, namesrv.addr, "OrderT")).body)
        assert route.order_topic_conf == "broker-a:4"
        resp = await c.invoke(namesrv.addr, _register("OrderT"), 3)   # brokers get the namespace back
        assert KVTable.from_json(resp.body).table == {"OrderT": "broker-a:4"}
    finally:
        await c.close()


async def test_silent_broker_expires(namesrv) -> None:
    broker, reader = RemotingClient(), RemotingClient()
    try:
        assert (await broker.invoke(namesrv.addr, _register("Expiring"), 3)).code == 0
        await _wait_for_code(reader, namesrv.addr, "Expiring", ResponseCode.SUCCESS, 2)
        # brokerChannelExpiredTime=1500 ms, scan every 200 ms; keep the connection open but silent.
        await _wait_for_code(reader, namesrv.addr, "Expiring", ResponseCode.TOPIC_NOT_EXIST, 10)
    finally:
        await broker.close()
        await reader.close()


async def test_closed_connection_removes_broker_at_once(namesrv) -> None:
    broker, reader = RemotingClient(), RemotingClient()
    try:
        assert (await broker.invoke(namesrv.addr, _register("Closing"), 3)).code == 0
        await _wait_for_code(reader, namesrv.addr, "Closing", ResponseCode.SUCCESS, 2)
        await broker.close()
        # Well inside the 1.5 s expiry: removal came from the close, not the scan.
        await _wait_for_code(reader, namesrv.addr, "Closing", ResponseCode.TOPIC_NOT_EXIST, 1.0)
    finally:
        await reader.close()


# (the TLS record is whole: a permissive server hands it to TLS, which fails it at once, after a
# TLS alert saying why, as Netty's SslHandler sends one; a torn one waits for the rest until the
# handshake timeout, see test_tls.py)
@pytest.mark.parametrize("garbage", [b"\x16\x03\x01\x00\x88" + b"garbage-tls-hello" * 8,
                                     struct.pack(">II", 64 * 1024 * 1024, 0) + b"x" * 64,
                                     struct.pack(">II", 20, 0x00000010) + b'{"code":"abc"}  \x00\x00'])
async def test_garbage_closes_only_offender(namesrv, garbage: bytes) -> None:
    good = RemotingClient()
    try:
        assert (await good.invoke(namesrv.addr, _register("Still"), 3)).code == 0
        reader, writer = await asyncio.open_connection("127.0.0.1", namesrv.port)
        writer.write(garbage)
        await writer.drain()
        said = await asyncio.wait_for(reader.read(), 5)
        writer.close()
        assert said == b"" or (garbage[0] == 0x16 and said[0] == 0x15 and len(said) == 7)  # (an alert record)
        resp = await _route(good, namesrv.addr, "Still")   # same connection as before: untouched
        assert resp.code == ResponseCode.SUCCESS
    finally:
        await good.close()
    assert "closing" in namesrv.output()


def test_print_config_and_bad_config(tmp_path) -> None:
    exe = str(Path(sys.executable).with_name("fastmq-namesrv"))
    props = _props(tmp_path, 12345, orderMessageEnable="true")
    out = subprocess.run([exe, "-c", str(props), "-p"], capture_output=True, text=True, timeout=30)
    assert out.returncode == 0 and "listenPort=12345" in out.stdout and "orderMessageEnable=true" in out.stdout
    bad = tmp_path / "bad.properties"
    bad.write_text("listenPort=ninety\n")
    out = subprocess.run([exe, "-c", str(bad)], capture_output=True, text=True, timeout=30)
    assert out.returncode == 2 and "listenPort='ninety': expected an integer" in out.stderr
    for line, needle in (("scanNotActiveBrokerInterval=0", "must be > 0 ms"), ("listenPort=70000", "not a TCP port"),
                         ("orderMessageEnable=yes", "expected true or false")):
        bad.write_text(line + "\n")
        out = subprocess.run([exe, "-c", str(bad), "-p"], capture_output=True, text=True, timeout=30)
        assert out.returncode == 2 and needle in out.stderr, out
    out = subprocess.run([exe, "-c", str(tmp_path / "missing.properties")], capture_output=True, text=True, timeout=30)
    assert out.returncode == 2 and "cannot read config file" in out.stderr


async def test_kv_survives_restart_and_sigint(tmp_path) -> None:
    port = free_port()
    props = _props(tmp_path, port)
    env = {"HOME": str(tmp_path)}
    first = ServerProcess(["fastmq-namesrv", "-c", str(props)], port, tmp_path, env=env).start()
    c = RemotingClient()
    try:
        r = await c.invoke(first.addr, create_request(RequestCode.PUT_KV_CONFIG,
                                                      {"namespace": "ns", "key": "k", "value": "v1"}), 3)
        assert r.code == ResponseCode.SUCCESS
        # written off the loop, yet on disk once answered
        assert '"v1"' in (tmp_path / "kv" / "kvConfig.json").read_text()
    finally:
        await c.close()
    assert first.stop(signal.SIGINT) == 0
    assert (tmp_path / "logs" / "ns.log").read_text().count("boot success") == 0  # stdout, not the log
    assert "shut down cleanly" in (tmp_path / "logs" / "ns.log").read_text()
    second = ServerProcess(["fastmq-namesrv", "-c", str(props)], port, tmp_path, env=env).start()
    c = RemotingClient()
    try:
        resp = await c.invoke(second.addr, create_request(RequestCode.GET_KV_CONFIG, {"namespace": "ns", "key": "k"}), 3)
        assert resp.ext_fields["value"] == "v1"
    finally:
        await c.close()
        assert second.stop() == 0


def test_default_port_config_is_9876() -> None:
    exe = str(Path(sys.executable).with_name("fastmq-namesrv"))
    out = subprocess.run([exe, "-p"], capture_output=True, text=True, timeout=30,
                         env={**os.environ, "HOME": "/nonexistent-home"})
    assert "listenPort=9876" in out.stdout


def test_port_in_use_is_a_clear_failure(tmp_path) -> None:
    with socket.socket() as s:
        s.bind(("0.0.0.0", 0))
        s.listen()
        port = s.getsockname()[1]
        exe = str(Path(sys.executable).with_name("fastmq-namesrv"))
        out = subprocess.run([exe, "-c", str(_props(tmp_path, port))], capture_output=True, text=True, timeout=30,
                             env={**os.environ, "HOME": str(tmp_path)})
    assert out.returncode == 1 and "cannot start the Name Server" in out.stderr


# ----------------------------------------------------------------------------------------------
# The request processor in process: every code, with a stand-in connection.


class _Conn:
    remote_addr = "127.0.0.1:50000"
    local_addr = "127.0.0.1:9876"

    def __init__(self) -> None:
        self.attrs: dict = {}
        self.closed = False

    def close(self) -> None:
        self.closed = True


@pytest.fixture
def proc(tmp_path):
    ctl = NamesrvController(NamesrvConfig(kvConfigPath=str(tmp_path / "kv.json"),
                                          configStorePath=str(tmp_path / "ns" / "namesrv.properties")))
    return DefaultRequestProcessor(ctl)


def _call(proc, code: int, fields: dict | None = None, body: bytes | None = None, version: int | None = None):
    req = create_request(code, fields, body)
    if version is not None:
        req.version = version
    resp = proc.process_request(_Conn(), req)
    if asyncio.iscoroutine(resp):  # PUT/DELETE_KV_CONFIG answer once the file is written, off the loop
        resp = asyncio.run(resp)
    return resp


def _reg_fields(addr: str, bid: int, **extra: object) -> dict:
    return {"brokerName": "b", "brokerAddr": addr, "clusterName": "C", "haServerAddr": addr[:-1] + "2",
            "brokerId": bid, **extra}


def test_processor_master_slave_headers_and_crc_forms(proc) -> None:
    body = RegisterBrokerBody({"T": TopicConfig("T", 8, 8, 6)}, DataVersion(1, 1)).encode()
    java_crc = zlib.crc32(body) & 0x7FFFFFFF           # UtilAll.crc32
    r = _call(proc, RequestCode.REGISTER_BROKER, _reg_fields("10.0.0.1:10911", 0, bodyCrc32=java_crc), body)
    assert r.code == ResponseCode.SUCCESS and "masterAddr" not in (r.ext_fields or {})
    signed = zlib.crc32(body)
    signed = signed - (1 << 32) if signed >= 1 << 31 else signed
    r = _call(proc, RequestCode.REGISTER_BROKER, _reg_fields("10.0.0.2:10911", 1, bodyCrc32=signed), body)
    assert r.code == ResponseCode.SUCCESS
    assert (r.ext_fields["masterAddr"], r.ext_fields["haServerAddr"]) == ("10.0.0.1:10911", "10.0.0.1:10912")
    r = _call(proc, RequestCode.REGISTER_BROKER, _reg_fields("10.0.0.2:10911", 1, bodyCrc32=java_crc ^ 1), body)
    assert (r.code, r.remark) == (ResponseCode.SYSTEM_ERROR, "crc32 not match")


def test_processor_old_broker_body_and_empty_body(proc) -> None:
    wrapper = (b'{"topicConfigTable":{"Old":{"topicName":"Old","readQueueNums":2,"writeQueueNums":2,"perm":6}},'
               b'"dataVersion":{"counter":1,"timestamp":1}}')
    r = _call(proc, RequestCode.REGISTER_BROKER, _reg_fields("10.0.0.1:10911", 0), wrapper, version=30)
    assert r.code == ResponseCode.SUCCESS
    ri = proc.c.route_info
    assert ri.pickup_topic_route_data("Old").queue_datas[0].read_queue_nums == 2
    r = _call(proc, RequestCode.REGISTER_BROKER, {**_reg_fields("10.0.0.5:10911", 0), "brokerName": "e"})
    assert r.code == ResponseCode.SUCCESS
    assert ri.query_broker_topic_config("10.0.0.5:10911") == DataVersion(0, 0)


@pytest.mark.parametrize("fields,needle", [
    ({"brokerName": "b", "brokerAddr": "a:1", "clusterName": "C", "brokerId": "zero"}, "brokerId"),
    ({"brokerAddr": "a:1", "clusterName": "C", "brokerId": "0"}, "brokerName"),
    (None, "clusterName"),
])
def test_processor_bad_register_headers_are_system_errors(proc, fields, needle) -> None:
    r = _call(proc, RequestCode.REGISTER_BROKER, fields)
    assert r.code == ResponseCode.SYSTEM_ERROR and needle in r.remark


def _topics(proc, code: int, fields: dict | None = None) -> set[str]:
    return TopicList.from_json(_call(proc, code, fields).body).topic_list


def test_processor_queries_and_admin_codes(proc) -> None:
    v = DataVersion(3, 3)
    body = RegisterBrokerBody({"T": TopicConfig("T", 4, 4, 6), "U": TopicConfig("U", 4, 4, 6, topic_sys_flag=1)},
                              v).encode()
    _call(proc, RequestCode.REGISTER_BROKER, _reg_fields("10.0.0.1:10911", 0), body)
    q = {"brokerName": "b", "brokerAddr": "10.0.0.1:10911", "clusterName": "C", "brokerId": 0}
    r = _call(proc, RequestCode.QUERY_DATA_VERSION, q, v.to_json())
    assert r.ext_fields["changed"] == "false" and DataVersion.from_json(r.body) == v
    r = _call(proc, RequestCode.QUERY_DATA_VERSION, q, DataVersion(4, 4).to_json())
    assert r.ext_fields["changed"] == "true"
    assert _call(proc, RequestCode.QUERY_DATA_VERSION, q, b"[1,").code == ResponseCode.SYSTEM_ERROR
    ci = ClusterInfo.from_json(_call(proc, RequestCode.GET_BROKER_CLUSTER_INFO).body)
    assert ci.cluster_addr_table == {"C": {"b"}}
    assert _topics(proc, RequestCode.GET_ALL_TOPIC_LIST_FROM_NAMESERVER) == {"T", "U"}
    assert _topics(proc, RequestCode.GET_TOPICS_BY_CLUSTER, {"cluster": "C"}) == {"T", "U"}
    assert _topics(proc, RequestCode.GET_UNIT_TOPIC_LIST) == {"U"}
    assert _topics(proc, RequestCode.GET_HAS_UNIT_SUB_TOPIC_LIST) == set()
    assert _topics(proc, RequestCode.GET_HAS_UNIT_SUB_UNUNIT_TOPIC_LIST) == set()
    sys_tl = TopicList.from_json(_call(proc, RequestCode.GET_SYSTEM_TOPIC_LIST_FROM_NS).body)
    assert sys_tl.topic_list == {"C", "b"} and sys_tl.broker_addr == "10.0.0.1:10911"
    r = _call(proc, RequestCode.WIPE_WRITE_PERM_OF_BROKER, {"brokerName": "b"})
    assert r.ext_fields["wipeTopicCount"] == "2"
    route = TopicRouteData.from_json(_call(proc, RequestCode.GET_ROUTEINFO_BY_TOPIC, {"topic": "T"}).body)
    assert route.queue_datas[0].perm == 4 and route.order_topic_conf is None
    assert _call(proc, RequestCode.DELETE_TOPIC_IN_NAMESRV, {"topic": "T"}).code == ResponseCode.SUCCESS
    r = _call(proc, RequestCode.GET_ROUTEINFO_BY_TOPIC, {"topic": "T"})
    assert (r.code, r.remark) == (ResponseCode.TOPIC_NOT_EXIST, "No topic route info in name server for the topic: T"
                                  "\nSee http://rocketmq.apache.org/docs/faq/ for further details.")
    assert _call(proc, RequestCode.GET_ROUTEINFO_BY_TOPIC).code == ResponseCode.SYSTEM_ERROR
    r = _call(proc, RequestCode.UNREGISTER_BROKER, q)
    assert r.code == ResponseCode.SUCCESS and proc.c.route_info.broker_addr_table == {}


def test_processor_kv_codes(proc) -> None:
    assert _call(proc, RequestCode.PUT_KV_CONFIG, {"namespace": "ns", "key": "k", "value": "v"}).code == 0
    r = _call(proc, RequestCode.GET_KV_CONFIG, {"namespace": "ns", "key": "k"})
    assert (r.code, r.ext_fields["value"]) == (ResponseCode.SUCCESS, "v")
    r = _call(proc, RequestCode.GET_KVLIST_BY_NAMESPACE, {"namespace": "ns"})
    assert KVTable.from_json(r.body).table == {"k": "v"}
    r = _call(proc, RequestCode.GET_KVLIST_BY_NAMESPACE, {"namespace": "zz"})
    assert (r.code, r.remark) == (ResponseCode.QUERY_NOT_FOUND, "No config item, Namespace: zz")
    assert _call(proc, RequestCode.DELETE_KV_CONFIG, {"namespace": "ns", "key": "k"}).code == 0
    r = _call(proc, RequestCode.GET_KV_CONFIG, {"namespace": "ns", "key": "k"})
    assert r.code == ResponseCode.QUERY_NOT_FOUND
    r = _call(proc, RequestCode.PUT_KV_CONFIG, {"key": "k", "value": "v"})
    assert (r.code, r.remark) == (ResponseCode.SYSTEM_ERROR, "namespace or key is null")
    assert _call(proc, RequestCode.GET_KV_CONFIG, {"namespace": "ns"}).code == ResponseCode.SYSTEM_ERROR


def test_processor_config_codes(proc) -> None:
    r = _call(proc, RequestCode.UPDATE_NAMESRV_CONFIG, body=b"# c\nproductEnvName: test\nclusterTest=true\n")
    assert r.code == ResponseCode.SUCCESS
    text = _call(proc, RequestCode.GET_NAMESRV_CONFIG).body.decode()
    assert "productEnvName=test" in text and "clusterTest=true" in text
    assert "productEnvName=test" in Path(proc.c.config.configStorePath).read_text()   # recorded, as RocketMQ
    r = _call(proc, RequestCode.UPDATE_NAMESRV_CONFIG, body=b"productEnvName=other\nclusterTest=maybe\n")
    assert r.code == ResponseCode.SYSTEM_ERROR and "clusterTest" in r.remark
    assert proc.c.config.productEnvName == "test"     # one bad value: nothing applied
    assert _call(proc, RequestCode.UPDATE_NAMESRV_CONFIG, body=b"\xff\xfe").code == ResponseCode.SYSTEM_ERROR
    r = _call(proc, RequestCode.UPDATE_NAMESRV_CONFIG, body=b"configStorePath=/x")
    assert r.code == ResponseCode.NO_PERMISSION
