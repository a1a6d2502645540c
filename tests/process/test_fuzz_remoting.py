"""Mutated frames (hypothesis) against a live ``fastmq-namesrv`` and ``fastmq-broker``.

Guards against one hostile or corrupt frame taking a server down or wedging it: valid requests
of many codes, in both serialize types, are mutated (bits flipped, bytes replaced, cut, spliced,
length fields bent, header values swapped for hostile ones) and sent on fresh connections; every
so often, and at the end, both servers must answer a well-formed request on a new connection,
and both processes must still run. Bounded to ~25 s of sending per server.
"""
from __future__ import annotations

import json
import socket
import struct
import time
from pathlib import Path

import pytest
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st

from fastmq._ext.codec import FrameDecoder, RemotingCommand, encode_frame
from fastmq.protocol.codes import RequestCode as R
from fastmq.protocol.command import create_request
from fastmq.testing import broker_process, namesrv_process

BUDGET_S = 25.0          # sending time per server
CHECK_EVERY = 200        # frames between liveness checks
PER_EXAMPLE = 12         # frames per example, each on its own connection, sent together
COUNTS = {"broker": 0, "namesrv": 0}


def _send_v2_fields(topic: str) -> dict[str, object]:
    return {"a": "PG_FUZZ", "b": topic, "c": "TBW102", "d": 4, "e": 0, "f": 0, "g": int(time.time() * 1000),
            "h": 0, "i": "TAGS\x01t\x02UNIQ_KEY\x01AC11000100002A9F0000000000000001\x02", "j": 0, "k": "false",
            "l": 16, "m": "false"}


def _seeds() -> dict[str, list[RemotingCommand]]:
    pull = {"consumerGroup": "GID_FUZZ", "topic": "FuzzT", "queueId": 0, "queueOffset": 0, "maxMsgNums": 32,
            "sysFlag": 6, "commitOffset": 0, "suspendTimeoutMillis": 200, "subscription": "*", "subVersion": 0}
    heartbeat = json.dumps({"clientID": "127.0.0.1@fuzz", "producerDataSet": [{"groupName": "PG_FUZZ"}],
                            "consumerDataSet": [{"groupName": "GID_FUZZ", "consumeType": "CONSUME_PASSIVELY",
                                                 "messageModel": "CLUSTERING",
                                                 "consumeFromWhere": "CONSUME_FROM_LAST_OFFSET",
                                                 "subscriptionDataSet": [{"topic": "FuzzT", "subString": "*",
                                                                          "tagsSet": [], "codeSet": [],
                                                                          "subVersion": 1}],
                                                 "unitMode": False}]}).encode()
    broker = [
        create_request(R.SEND_MESSAGE_V2, _send_v2_fields("FuzzT"), body=b"fuzz body"),
        create_request(R.PULL_MESSAGE, pull),
        create_request(R.HEART_BEAT, body=heartbeat),
        create_request(R.QUERY_CONSUMER_OFFSET, {"consumerGroup": "GID_FUZZ", "topic": "FuzzT", "queueId": 0}),
        create_request(R.UPDATE_CONSUMER_OFFSET, {"consumerGroup": "GID_FUZZ", "topic": "FuzzT", "queueId": 0,
                                                  "commitOffset": 1}),
        create_request(R.GET_MAX_OFFSET, {"topic": "FuzzT", "queueId": 0}),
        create_request(R.GET_MIN_OFFSET, {"topic": "FuzzT", "queueId": 0}),
        create_request(R.SEARCH_OFFSET_BY_TIMESTAMP, {"topic": "FuzzT", "queueId": 0, "timestamp": 0}),
        create_request(R.GET_CONSUMER_LIST_BY_GROUP, {"consumerGroup": "GID_FUZZ"}),
        create_request(R.CONSUMER_SEND_MSG_BACK, {"offset": 0, "group": "GID_FUZZ", "delayLevel": 1,
                                                  "originMsgId": "0" * 32, "originTopic": "FuzzT",
                                                  "unitMode": "false", "maxReconsumeTimes": 16}),
        create_request(R.VIEW_MESSAGE_BY_ID, {"offset": 0}),
        create_request(R.QUERY_MESSAGE, {"topic": "FuzzT", "key": "k", "maxNum": 32, "beginTimestamp": 0,
                                         "endTimestamp": 2**62}),
        create_request(R.GET_ALL_TOPIC_CONFIG),
        create_request(R.GET_BROKER_RUNTIME_INFO),
        create_request(R.GET_TOPIC_STATS_INFO, {"topic": "FuzzT"}),
        create_request(R.GET_CONSUME_STATS, {"consumerGroup": "GID_FUZZ", "topic": "FuzzT"}),
        create_request(R.LOCK_BATCH_MQ, body=b'{"consumerGroup":"GID_FUZZ","clientId":"c","mqSet":'
                                                b'[{"topic":"FuzzT","brokerName":"broker-a","queueId":0}]}'),
        create_request(R.UNREGISTER_CLIENT, {"clientID": "127.0.0.1@fuzz", "producerGroup": "PG_FUZZ"}),
    ]
    namesrv = [
        create_request(R.GET_ROUTEINFO_BY_TOPIC, {"topic": "FuzzT"}),
        create_request(R.GET_BROKER_CLUSTER_INFO),
        create_request(R.PUT_KV_CONFIG, {"namespace": "FUZZ", "key": "k", "value": "v"}),
        create_request(R.GET_KV_CONFIG, {"namespace": "FUZZ", "key": "k"}),
        create_request(R.GET_KVLIST_BY_NAMESPACE, {"namespace": "FUZZ"}),
        create_request(R.REGISTER_BROKER, {"brokerName": "fuzz-b", "brokerAddr": "127.0.0.1:1", "clusterName": "C",
                                           "haServerAddr": "127.0.0.1:2", "brokerId": 0, "compressed": "false"},
                       body=b'{"topicConfigSerializeWrapper":{"topicConfigTable":{"FuzzT":{"topicName":"FuzzT",'
                            b'"readQueueNums":4,"writeQueueNums":4,"perm":6}},"dataVersion":{"counter":1,'
                            b'"timestamp":1}},"filterServerList":[]}'),
        create_request(R.UNREGISTER_BROKER, {"brokerName": "fuzz-b", "brokerAddr": "127.0.0.1:1",
                                             "clusterName": "C", "brokerId": 0}),
        create_request(R.GET_ALL_TOPIC_LIST_FROM_NAMESERVER),
    ]
    return {"broker": broker, "namesrv": namesrv}


SEEDS = _seeds()
HOSTILE_VALUES = ["", "-1", "-2147483649", "2147483648", "9" * 40, "1e309", "NaN", "null", "\x00", "../../x",
                  "%RETRY%", "a" * 300, "\u2028", "{", "true"]


def _frames(cmd: RemotingCommand, st_: int) -> bytes:
    c = RemotingCommand(cmd.code, language=cmd.language, version=cmd.version, opaque=cmd.opaque, flag=cmd.flag,
                        remark=cmd.remark, ext_fields=dict(cmd.ext_fields or {}), serialize_type=st_, body=cmd.body)
    return encode_frame(c)


@st.composite
def mutated(draw, server: str) -> bytes:
    cmd = draw(st.sampled_from(SEEDS[server]))
    if cmd.ext_fields and draw(st.booleans()):
        fields = dict(cmd.ext_fields)
        key = draw(st.sampled_from(sorted(fields)))
        fields[key] = draw(st.one_of(st.sampled_from(HOSTILE_VALUES), st.text(max_size=20)))
        cmd = RemotingCommand(cmd.code, language=cmd.language, version=cmd.version, opaque=cmd.opaque,
                              flag=cmd.flag, ext_fields=fields, body=cmd.body)
    data = bytearray(_frames(cmd, draw(st.sampled_from([0, 1]))))
    for _ in range(draw(st.integers(0, 4))):
        op = draw(st.sampled_from(["flip", "byte", "cut", "insert", "splice", "length", "hlen"]))
        if not data:
            break
        pos = draw(st.integers(0, len(data) - 1))
        if op == "flip":
            data[pos] ^= 1 << draw(st.integers(0, 7))
        elif op == "byte":
            data[pos] = draw(st.sampled_from([0, 0x22, 0x5C, 0x7B, 0x7D, 0x80, 0xFF, 0x01, 0x02]))
        elif op == "cut":
            del data[pos:]
        elif op == "insert":
            data[pos:pos] = draw(st.binary(min_size=1, max_size=16))
        elif op == "splice":
            other = _frames(draw(st.sampled_from(SEEDS[server])), 0)
            data[pos:] = other[draw(st.integers(0, len(other) - 1)):]
        elif op == "length" and len(data) >= 4:
            data[0:4] = struct.pack(">I", draw(st.sampled_from([0, 1, 3, 4, 5, len(data) - 4, len(data) + 100,
                                                                 16 * 1024 * 1024, 2**31 - 1, 2**32 - 1])))
        elif op == "hlen" and len(data) >= 8:
            data[4:8] = struct.pack(">I", (draw(st.sampled_from([0, 1])) << 24)
                                    | draw(st.sampled_from([0, 1, 2**24 - 1, len(data), 7])))
    return bytes(data)


def _poke(port: int, frames: list[bytes], wait: float = 0.05) -> None:
    """Send each of ``frames`` on a fresh connection of its own, all at once; read whatever comes
    back for ``wait`` s; close them all."""
    socks = []
    try:
        for data in frames:
            s = socket.create_connection(("127.0.0.1", port), timeout=5)
            socks.append(s)
            try:
                s.sendall(data)
            except OSError:
                pass  # closed on us mid-send: a refusal
        deadline = time.monotonic() + wait
        for s in socks:
            s.settimeout(max(0.001, deadline - time.monotonic()))
            try:
                while s.recv(65536):
                    pass
            except OSError:
                pass
    finally:
        for s in socks:
            s.close()


def _answers(port: int) -> None:
    """A well-formed request on a new connection gets its answer (matched by opaque)."""
    req = create_request(R.GET_ROUTEINFO_BY_TOPIC, {"topic": "TBW102"})
    with socket.create_connection(("127.0.0.1", port), timeout=10) as s:
        s.sendall(encode_frame(req))
        dec = FrameDecoder()
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            data = s.recv(65536)
            assert data, "closed without an answer"
            for cmd in dec.feed(data):
                if cmd.opaque == req.opaque:
                    return
    raise AssertionError("no answer within 10 s")


@pytest.fixture(scope="module")
def servers(tmp_path_factory):
    tmp: Path = tmp_path_factory.mktemp("fuzz")
    ns = namesrv_process(tmp).start()
    try:
        b = broker_process(tmp, ns.addr, mappedFileSizeCommitLog=16 * 1024 * 1024).start()
        try:
            yield {"namesrv": ns, "broker": b}
        finally:
            assert b.stop() == 0, b.output()[-3000:]
    finally:
        ns.stop()


FUZZ = settings(max_examples=300, deadline=None, database=None, phases=[Phase.generate],
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture,
                                       HealthCheck.data_too_large])


@pytest.mark.parametrize("server", ["namesrv", "broker"])
def test_mutated_frames_leave_servers_answering(servers, server: str) -> None:
    """Guards against a frame that kills, hangs or wedges a server (a decoder or processor bug
    that escapes its connection): after ~25 s of mutated frames the server still answers and its
    process still runs; the other server too."""
    proc = servers[server]
    start = time.monotonic()
    COUNTS[server] = 0

    @FUZZ
    @given(frames=st.lists(mutated(server), min_size=1, max_size=PER_EXAMPLE))
    def fuzz(frames: list[bytes]) -> None:
        if time.monotonic() - start > BUDGET_S:
            return
        _poke(proc.port, frames)
        before = COUNTS[server]
        COUNTS[server] += len(frames)
        if COUNTS[server] // CHECK_EVERY != before // CHECK_EVERY:
            _answers(proc.port)
    fuzz()
    assert COUNTS[server] >= 200, COUNTS  # it really sent a good number
    for name, p in servers.items():
        assert p.proc.poll() is None, f"{name} died: {p.output()[-3000:]}"
        _answers(p.port)
    print(f"\nfuzz {server}: {COUNTS[server]} mutated frames in {time.monotonic() - start:.1f} s; "
          f"tracebacks logged: {proc.output().count('Traceback')}")
