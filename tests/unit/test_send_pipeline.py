"""The broker's compiled send path, stage by stage (fastmq._ext.send_batch, the broker's ``send``
stage, the store's ``record_writer``): both twins, against the slow path's own encoders (store
format, codec, index), and against each other on random requests."""
from __future__ import annotations

import importlib
import struct
import zlib
from types import SimpleNamespace

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from fastmq._ext.codec import FrameDecoder, encode_frames
from fastmq._ext.send_py import answer_template
from fastmq.protocol.codes import RequestCode
from fastmq.protocol.command import create_request, response_for
from fastmq.protocol.headers import SendMessageRequestHeader
from fastmq.protocol.message import Message, decode_record, encode_batch_body, java_string_hash, pack_host
from fastmq.store.index import IndexService
from tests.support import examples

BORN = pack_host("10.1.2.3", 5555)
STORE = pack_host("127.0.0.1", 10911)
CLUSTER = b"CLUSTER\x01DefaultCluster\x02"
TOPICS = {"T1": (4, 4, 0), "T2": (8, 8, 0x4), "话题": (2, 2, 0)}
PREFIX = STORE.hex().upper().encode()
COL = {name: i for i, name in enumerate(importlib.import_module("fastmq._ext.send_batch_py").COLUMNS)}
STAGES = ("send_batch", "send", "record_writer")


def _pipeline(kind: str) -> SimpleNamespace:
    """Every stage of the send path in one twin (``py`` or ``c``): a batch one twin's encoder made
    goes to that twin's record writer only (the compiled writer reads the compiled batch's C fields)."""
    names: dict = {}
    for stem in STAGES:
        mod = importlib.import_module(f"fastmq._ext.{stem}_{kind}")
        names.update((name, getattr(mod, name)) for name in mod.__all__)
    return SimpleNamespace(**names)


@pytest.fixture(scope="module", params=[pytest.param("py", id="py"),
                                        pytest.param("c", id="c", marks=pytest.mark.c_ext)])
def send(request: pytest.FixtureRequest) -> SimpleNamespace:
    """Each twin of the whole send path in turn (``py`` and ``c``)."""
    return _pipeline(request.param)


def _send(topic: str = "T1", qid: int = 1, props: str | None = "TAGS\x01a\x02", body: bytes = b"hello", *,
          code: int = RequestCode.SEND_MESSAGE_V2, sys_flag: int = 0, batch: bool = False, flag: int = 7,
          reconsume: int | None = 2, oneway: bool = False):
    h = SendMessageRequestHeader("PG", topic, "TBW102", 4, qid, sys_flag, 1_700_000_000_123, flag, props, reconsume,
                                 False, None, batch)
    fields = h.to_fields() if code == RequestCode.SEND_MESSAGE else h.to_v2_fields()
    req = create_request(code, fields, body)
    if oneway:
        req.flag = 2
    return req


def _batch_body(n: int = 3) -> bytes:
    return encode_batch_body([Message("T1", f"m{i}".encode() * (i + 1), flag=i,
                                      properties={"TAGS": "标签", "KEYS": f"k{i} kk{i}", "UNIQ_KEY": f"U{i}"})
                              for i in range(n)])


def test_crc32_and_java_hash(send) -> None:
    for data in (b"", b"x", bytes(range(256)) * 9, b"123456789"):
        assert send.crc32(data) == zlib.crc32(data)
    for text in ("", "TagA", "标签", "😀tag", "a" * 300):
        assert send.java_hash(text.encode()) == java_string_hash(text)


def test_records_are_the_store_format(send) -> None:
    reqs = [_send(props="TAGS\x01标签\x02KEYS\x01k1 k2\x02WAIT\x01false\x02"),
            _send("T2", 3, None, b"", code=RequestCode.SEND_MESSAGE, sys_flag=0x1, reconsume=None)]
    b = send.encode_sends(reqs, TOPICS, BORN, STORE, CLUSTER, 4 << 20)
    assert (b.n, b.slow, b.fast, b.keys) == (2, [], [0, 1], [("T1", 1), ("T2", 3)])
    recs = b.records
    m0 = decode_record(recs, 0)
    assert (m0.topic, m0.queue_id, m0.flag, m0.body, m0.reconsume_times, m0.born_timestamp) == \
        ("T1", 1, 7, b"hello", 2, 1_700_000_000_123)
    assert m0.born_host == ("10.1.2.3", 5555) and m0.store_host == ("127.0.0.1", 10911)
    assert m0.properties == {"TAGS": "标签", "KEYS": "k1 k2", "WAIT": "false", "CLUSTER": "DefaultCluster"}
    m1 = decode_record(recs, m0.store_size)
    assert (m1.topic, m1.queue_id, m1.sys_flag, m1.body, m1.reconsume_times) == ("T2", 3, 0x5, b"", 0)
    cols = b.cols
    assert cols[0, COL["tags"]] == java_string_hash("标签") and cols[1, COL["tags"]] == 0
    assert list(cols[:, COL["flags"]]) == [2, 1]  # WAIT=false + KEYS; waits, no keys
    assert b.wait and b.total_size == len(recs)


def test_properties_as_the_java_client_sends_them_take_the_fast_path(send) -> None:
    """4.9's Java client drops the separator after its last property; the record puts it back
    before CLUSTER, single sends and batch entries alike."""
    java_props = "KEYS\x01k1\x02TAGS\x01TagJ\x02UNIQ_KEY\x01" + "AB" * 28 + "\x02WAIT\x01true"
    props = b"TAGS\x01batch"
    entry = struct.pack(">iiiii", 0, 0, 0, 5, 2) + b"m0" + struct.pack(">H", len(props)) + props
    entry = struct.pack(">i", len(entry)) + entry[4:]
    b = send.encode_sends([_send(props=java_props), _send(body=entry, code=RequestCode.SEND_BATCH_MESSAGE,
                                                          props=None)], TOPICS, BORN, STORE, CLUSTER, 4096)
    assert (b.slow, b.fast, b.n) == ([], [0, 1], 2)
    m0 = decode_record(b.records, 0)
    assert m0.properties == {"KEYS": "k1", "TAGS": "TagJ", "UNIQ_KEY": "AB" * 28, "WAIT": "true",
                             "CLUSTER": "DefaultCluster"}
    assert b.records[m0.store_size - len(CLUSTER) - 1:m0.store_size] == b"\x02" + CLUSTER
    m1 = decode_record(b.records, m0.store_size)
    assert m1.properties == {"TAGS": "batch", "CLUSTER": "DefaultCluster"} and m1.body == b"m0"
    assert b.cols[0, COL["tags"]] == java_string_hash("TagJ") and b.cols[1, COL["tags"]] == java_string_hash("batch")


def test_batch_request_becomes_one_record_per_entry(send) -> None:
    b = send.encode_sends([_send(body=_batch_body(3), code=RequestCode.SEND_BATCH_MESSAGE, props=None)], TOPICS,
                          BORN, STORE, CLUSTER, 4 << 20)
    assert (b.n, b.slow, b.fast) == (3, [], [0])
    pos = 0
    for i in range(3):
        m = decode_record(b.records, pos)
        assert m.body == f"m{i}".encode() * (i + 1) and m.flag == i and m.properties["UNIQ_KEY"] == f"U{i}"
        pos += m.store_size


@pytest.mark.parametrize("req, why", [
    (_send("Unknown"), "topic not in the fast table"),
    (_send(qid=4), "queue id over its bound"),
    (_send(props="DELAY\x013\x02"), "delay level"),
    (_send(props="CLUSTER\x01x\x02"), "CLUSTER already set"),
    (_send(props="\x01a\x02"), "empty property name"),
    (_send(props="TAGS\x02"), "name without value separator"),
    (_send(props="KEYS\x01" + "k" * 40 + "\x01x\x02"), "a second name separator deep in a long value"),
    (_send(props="KEYS\x01" + "k" * 23 + "\x01x\x02"), "a second name separator just before the long scan"),
    (_send(sys_flag=0x4), "prepared transaction"),
    (_send(props="TRAN_MSG\x01true\x02"), "transaction property (a half: stored by the general path)"),
    (_send(body=b"x" * 5000), "over max_size"),
    (_send(body=b"\x00" * 30, code=RequestCode.SEND_BATCH_MESSAGE), "malformed batch body"),
    (_send(body=b"", code=RequestCode.SEND_BATCH_MESSAGE), "empty batch"),
    (create_request(RequestCode.SEND_MESSAGE_V2, {"a": "PG", "b": "T1"}, b"x"), "missing fields"),
    (create_request(RequestCode.SEND_MESSAGE_V2, {"a": "PG", "b": "T1", "c": "T", "d": "4", "e": "1x", "f": "0",
                                                  "g": "1", "h": "0"}, b"x"), "queue id not a number"),
    (create_request(RequestCode.SEND_MESSAGE_V2, {"a": "PG", "b": "T1", "c": "T", "d": "4", "e": "1", "f": "0",
                                                  "g": "1", "h": "99999999999"}, b"x"), "flag over int32"),
    (create_request(RequestCode.SEND_MESSAGE_V2, {"a": "PG", "b": "T1", "c": "T", "d": "4", "e": "1", "f": "0",
                                                  "g": "1", "h": "0", "m": " TRUE"}, b"x"), "odd batch spelling"),
    # numbers Java's Integer.parseInt refuses: the slow path answers SYSTEM_ERROR naming the field
    (create_request(RequestCode.SEND_MESSAGE_V2, {"a": "PG", "b": "T1", "c": "T", "d": "2147483648", "e": "1",
                                                  "f": "0", "g": "1", "h": "0"}, b"x"), "queue nums over int32"),
    (create_request(RequestCode.SEND_MESSAGE_V2, {"a": "PG", "b": "T1", "c": "T", "d": "4", "e": "-4294967296",
                                                  "f": "0", "g": "1", "h": "0"}, b"x"), "queue id under int32"),
    (create_request(RequestCode.SEND_MESSAGE_V2, {"a": "PG", "b": "T1", "c": "T", "d": "4", "e": "1", "f": "0",
                                                  "g": "1", "h": "0", "l": "x"}, b"x"), "maxReconsumeTimes not a number"),
    (create_request(RequestCode.SEND_MESSAGE, {"producerGroup": "PG", "topic": "T1", "defaultTopic": "T",
                                               "defaultTopicQueueNums": "4", "queueId": "1", "sysFlag": "0",
                                               "bornTimestamp": "1", "flag": "0", "maxReconsumeTimes": "2147483648"},
                    b"x"), "maxReconsumeTimes over int32 (long names)"),
    (create_request(RequestCode.PULL_MESSAGE, {}), "not a send"),
    (create_request(RequestCode.SEND_MESSAGE_V2, {"a": "PG"}, b"x", serialize_type=1), "binary header"),
])
def test_what_the_fast_path_leaves_to_the_slow_one(send, req, why: str) -> None:
    ok = _send()
    b = send.encode_sends([ok, req, ok], TOPICS, BORN, STORE, CLUSTER, 4096)
    assert b.slow == [1], why
    assert b.fast == [0, 2] and b.n == 2


def test_only_known_producer_groups_take_the_fast_path(send) -> None:
    """The processor passes the producer groups that passed its name gate; others go the long way."""
    v1, v2 = _send(code=RequestCode.SEND_MESSAGE), _send()
    other = _send()
    other.ext_fields["a"] = "../x"
    b = send.encode_sends([v1, v2, other], TOPICS, BORN, STORE, CLUSTER, 4096, groups={"PG"})
    assert (b.fast, b.slow) == ([0, 1], [2])
    b = send.encode_sends([v1, v2, other], TOPICS, BORN, STORE, CLUSTER, 4096, groups=set())
    assert (b.fast, b.slow) == ([], [0, 1, 2])
    b = send.encode_sends([v1, v2, other], TOPICS, BORN, STORE, CLUSTER, 4096)  # no set: groups not judged
    assert b.fast == [0, 1, 2]


@st.composite
def _random_requests(draw) -> list:
    reqs = []
    for _ in range(draw(st.integers(1, 12))):
        kind = draw(st.sampled_from(["v2", "v1", "batch", "bad", "oneway"]))
        topic = draw(st.sampled_from(["T1", "T2", "话题", "Nope"]))
        props = draw(st.one_of(st.none(), st.just(""), st.lists(
            st.tuples(st.sampled_from(["TAGS", "KEYS", "UNIQ_KEY", "WAIT", "X", "DELAY", "TRAN_MSG", "ü"]),
                      st.text(st.characters(blacklist_characters="\x01\x02", blacklist_categories=("Cs",)),
                              max_size=8)), max_size=4).map(lambda kv: "".join(f"{k}\x01{v}\x02" for k, v in kv)),
            # as the Java client sends them: no separator after the last pair
            st.lists(st.tuples(st.sampled_from(["TAGS", "KEYS", "WAIT"]), st.text("ab", max_size=4)),
                     min_size=1, max_size=3).map(lambda kv: "\x02".join(f"{k}\x01{v}" for k, v in kv))))
        body = draw(st.binary(max_size=300))
        qid = draw(st.integers(-1, 9))
        if kind == "batch":
            reqs.append(_send(topic, qid, props, _batch_body(draw(st.integers(1, 4))),
                              code=RequestCode.SEND_BATCH_MESSAGE))
        elif kind == "bad":
            reqs.append(create_request(RequestCode.SEND_MESSAGE_V2, draw(st.dictionaries(
                st.sampled_from(list("abcdefghijm")), st.text(max_size=5), max_size=11)), body))
        else:
            reqs.append(_send(topic, qid, props, body, oneway=kind == "oneway",
                              code=RequestCode.SEND_MESSAGE if kind == "v1" else RequestCode.SEND_MESSAGE_V2))
    return reqs


@pytest.mark.c_ext
@settings(max_examples=examples(150), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.data())
def test_twins_agree_end_to_end(data) -> None:
    """encode, place (over a file boundary), index and answer: same bytes and rows from both."""
    py, c = _pipeline("py"), _pipeline("c")
    reqs = data.draw(_random_requests())
    rr = data.draw(st.integers(0, 100))
    out = []
    for mod in (py, c):
        b = mod.encode_sends(reqs, TOPICS, BORN, STORE, CLUSTER, 1200, rr)
        mapping = bytearray(2500)
        nxt = np.array([5] * len(b.keys), np.int64)
        i, pos, placed = 0, 100, []
        for file_from in (0, 2500, 5000, 7500, 10000, 12500, 15000, 17500):
            mapping[:] = bytes(2500)
            i, pos = mod.place_records(b, mapping, pos, 2500, file_from, i, nxt, 1_700_000_000_999)
            placed.append(bytes(mapping))
            pos = 0
            if i >= b.n:
                break
        index = bytearray(40 + 16 * 4 + 30 * 20)
        state = [0, 0, 0, 0, 0, 1]
        stop = mod.index_records(b, 0, index, 16, 30, state, 1_700_000_000_999)
        answers = mod.encode_answers(b, reqs, PREFIX, answer_template("DefaultRegion", True))
        out.append((b.records, b.cols.tolist(), b.keys, b.slow, b.fast, b.rr, b.wait, b.total_size, i,
                    placed, list(nxt), bytes(index), state, stop, answers))
    assert out[0] == out[1]


def test_cols_is_a_writable_int64_view_that_outlives_its_batch(send) -> None:
    """The compiled batch keeps its rows in C memory and lends them to numpy (``cols``): writes
    through the view are what the stages read, and the view keeps the batch alive."""
    reqs = [_send(), _send(body=_batch_body(20), code=RequestCode.SEND_BATCH_MESSAGE)]  # rows grow past one a request
    b = send.encode_sends(reqs, TOPICS, BORN, STORE, CLUSTER, 4 << 20)
    cols = b.cols
    assert cols.shape == (21, len(COL)) and cols.dtype == np.int64
    assert cols[:, COL["req"]].tolist() == [0] + [1] * 20 and cols[:, COL["size"]].sum() == b.total_size
    cols[0, COL["commit_log_offset"]] = 0xABC
    assert b"0000000000000ABC" in send.encode_answers(b, reqs, PREFIX, answer_template("DefaultRegion", True))
    records = b.records
    del b
    assert cols[0, COL["commit_log_offset"]] == 0xABC and cols[1:, COL["pos"]].min() > 0 and records
    empty = send.encode_sends([], TOPICS, BORN, STORE, CLUSTER, 4 << 20)
    assert empty.n == 0 and empty.cols.shape == (0, len(COL))


def test_answers_are_what_the_codec_writes(send) -> None:
    reqs = [_send(), _send("T2", 2), _send(body=_batch_body(2), code=RequestCode.SEND_BATCH_MESSAGE),
            _send(oneway=True)]
    b = send.encode_sends(reqs, TOPICS, BORN, STORE, CLUSTER, 4 << 20)
    b.cols[:, COL["queue_offset"]] = [10, 0, 11, 12, 13]
    b.cols[:, COL["commit_log_offset"]] = [0, 0x1A2B, 0xFFFF_FFFF_FF, 5, 6]
    got = send.encode_answers(b, reqs, PREFIX, answer_template("DefaultRegion", True))
    want = []
    for r, (ids, qid, qoff) in zip(reqs[:3], [("0" * 16, 1, 10), ("0000000000001A2B", 2, 0),
                                              ("000000FFFFFFFFFF,0000000000000005", 1, 11)]):
        ids = ",".join(PREFIX.decode() + x for x in ids.split(","))
        want.append(response_for(r, 0, None, {"msgId": ids, "queueId": qid, "queueOffset": qoff,
                                             "MSG_REGION": "DefaultRegion", "TRACE_ON": "true"}))
    assert got == encode_frames(want)
    assert [f.opaque for f in FrameDecoder().feed(got)] == [r.opaque for r in reqs[:3]]


def test_sends_of_several_connections_in_one_batch(send) -> None:
    """Sends gathered from several connections: each record carries its own connection's born
    host, and each connection's answers are cut from the batch by request range."""
    other = pack_host("10.9.8.7", 4242)
    reqs = [_send(), _send("T2", 2), _send("NoSuchTopic"), _send(oneway=True), _send("T1", 3)]
    hosts = [BORN, BORN, other, other, other]
    b = send.encode_sends(reqs, TOPICS, BORN, STORE, CLUSTER, 4 << 20, born_hosts=hosts)
    assert (b.fast, b.slow) == ([0, 1, 3, 4], [2])
    pos, borns = 0, []
    for _ in range(b.n):
        m = decode_record(b.records, pos)
        borns.append(m.born_host)
        pos += m.store_size
    assert borns == [("10.1.2.3", 5555), ("10.1.2.3", 5555), ("10.9.8.7", 4242), ("10.9.8.7", 4242)]
    template = answer_template("DefaultRegion", True)
    whole = send.encode_answers(b, reqs, PREFIX, template)
    first = send.encode_answers(b, reqs, PREFIX, template, lo=0, hi=2)
    second = send.encode_answers(b, reqs, PREFIX, template, lo=2, hi=5)
    assert first + second == whole
    assert [f.opaque for f in FrameDecoder().feed(first)] == [reqs[0].opaque, reqs[1].opaque]
    assert [f.opaque for f in FrameDecoder().feed(second)] == [reqs[4].opaque]  # no answer to a oneway
    assert send.encode_answers(b, reqs, PREFIX, template, lo=2, hi=4) == b""
    with pytest.raises(ValueError):  # one host per request
        send.encode_sends(reqs, TOPICS, BORN, STORE, CLUSTER, 4 << 20, born_hosts=hosts[:2])
    with pytest.raises(ValueError):  # IPv4 hosts only, as for born_host
        send.encode_sends(reqs, TOPICS, BORN, STORE, CLUSTER, 4 << 20, born_hosts=[pack_host("::1", 1)] * 5)


def test_binary_header_sends_take_the_fast_path_and_are_answered_in_kind(send) -> None:
    """RocketMQ's benchmark Producer sends its requests in the binary (ROCKETMQ) header: with
    ``binary`` they take the fast path, and each answer is what the codec writes for the same
    response in the request's own header form."""
    from fastmq._ext.send_py import binary_answer_template

    reqs = [_send(), _send("T2", 2), _send(body=_batch_body(2), code=RequestCode.SEND_BATCH_MESSAGE), _send()]
    for r in reqs[1:3]:
        r.serialize_type = 1
    reqs[3].opaque = -5  # Java's opaque is a signed int
    assert send.encode_sends(reqs, TOPICS, BORN, STORE, CLUSTER, 4 << 20).slow == [1, 2]
    b = send.encode_sends(reqs, TOPICS, BORN, STORE, CLUSTER, 4 << 20, binary=True)
    assert (b.fast, b.slow) == ([0, 1, 2, 3], [])
    b.cols[:, COL["queue_offset"]] = [10, 0, 11, 12, 7]
    b.cols[:, COL["commit_log_offset"]] = [0, 0x1A2B, 0xFFFF_FFFF_FF, 5, 9]
    template, binary = answer_template("DefaultRegion", True), binary_answer_template("DefaultRegion", True)
    got = send.encode_answers(b, reqs, PREFIX, template, binary_template=binary)
    want = []
    for r, (ids, qid, qoff) in zip(reqs, [("0" * 16, 1, 10), ("0000000000001A2B", 2, 0),
                                          ("000000FFFFFFFFFF,0000000000000005", 1, 11), ("0000000000000009", 1, 7)]):
        resp = response_for(r, 0, None, {"msgId": ",".join(PREFIX.decode() + x for x in ids.split(",")),
                                         "queueId": qid, "queueOffset": qoff, "MSG_REGION": "DefaultRegion",
                                         "TRACE_ON": "true"})
        resp.serialize_type = r.serialize_type
        want.append(resp)
    assert got == encode_frames(want)
    assert [f.serialize_type for f in FrameDecoder().feed(got)] == [0, 1, 1, 0]
    with pytest.raises(ValueError):  # a binary answer cannot be written without its template
        send.encode_answers(b, reqs, PREFIX, template)


def test_index_entries_match_the_python_indexer(send, tmp_path) -> None:
    reqs = [_send(props="KEYS\x01a b  c\x02UNIQ_KEY\x01U1\x02"), _send("话题", 0, "UNIQ_KEY\x01U2\x02"),
            _send(props="TAGS\x01x\x02")]
    b = send.encode_sends(reqs, TOPICS, BORN, STORE, CLUSTER, 4 << 20)
    b.cols[:, COL["commit_log_offset"]] = [100, 200, 300]
    ts = 1_700_000_005_000
    svc = IndexService(tmp_path / "py", slots=16, entries=30)
    svc.put("T1", ["a", "b", "c", "U1"], 100, ts)
    svc.put("话题", ["U2"], 200, ts)
    want = bytes(svc.files[0]._mm)
    state = [0, 0, 0, 0, 0, 1]
    mapping = bytearray(len(want))
    assert send.index_records(b, 0, mapping, 16, 30, state, ts) == 3
    assert bytes(mapping) == want
    assert state[:4] == [ts, ts, 100, 200] and state[5] == 6
    svc.close()


def test_a_trace_message_s_many_keys_are_indexed_as_the_python_indexer(send, tmp_path) -> None:
    # a trace message's KEYS is one long value of hundreds of ids; keys of every length around
    # the scans' byte-at-a-time prefixes, runs of spaces, non-ASCII, and properties after it
    keys = [f"7F0000010B5C18B4AAC2512F{i:08X}" for i in range(300)]
    keys += ["k" * n for n in range(1, 40)] + ["标签键", "😀k", "é" * 9, "x7"]
    value = "  ".join(keys[:150]) + " " + " ".join(keys[150:]) + " "
    reqs = [_send(props=f"TAGS\x01t\x02KEYS\x01{value}\x02UNIQ_KEY\x01U9\x02WAIT\x01true\x02"),
            _send(props=f"KEYS\x01{value}")]  # (the Java client's form: no separator at the end)
    b = send.encode_sends(reqs, TOPICS, BORN, STORE, CLUSTER, 4 << 20)
    assert b.fast == [0, 1]
    b.cols[:, COL["commit_log_offset"]] = [100, 200]
    ts = 1_700_000_005_000
    svc = IndexService(tmp_path / "py", slots=512, entries=800)
    svc.put("T1", keys + ["U9"], 100, ts)
    svc.put("T1", keys, 200, ts)
    want = bytes(svc.files[0]._mm)
    state = [0, 0, 0, 0, 0, 1]
    mapping = bytearray(len(want))
    assert send.index_records(b, 0, mapping, 512, 800, state, ts) == 2
    assert bytes(mapping) == want
    svc.close()


def test_java_hash_of_long_mixed_text(send) -> None:
    # (the compiled hash takes eight, then four ASCII bytes a step: non-ASCII at every offset of a step)
    for n in range(0, 20):
        for odd in ("é", "标", "😀"):
            for text in ("a" * n + odd + "b" * (19 - n), odd * n + "abcdefgh"[: n % 8], "Ab1" * n + odd):
                assert send.java_hash(text.encode()) == java_string_hash(text), text


def test_full_index_file_stops_before_a_record(send) -> None:
    reqs = [_send(props="KEYS\x01a b\x02"), _send(props="KEYS\x01c d e\x02")]
    b = send.encode_sends(reqs, TOPICS, BORN, STORE, CLUSTER, 4 << 20)
    state = [0, 0, 0, 0, 0, 1]
    assert send.index_records(b, 0, bytearray(40 + 8 * 4 + 5 * 20), 8, 5, state, 1) == 1
    assert state[5] == 3


def test_place_records_refuses_a_short_mapping(send) -> None:
    b = send.encode_sends([_send()], TOPICS, BORN, STORE, CLUSTER, 4 << 20)
    with pytest.raises(ValueError):
        send.place_records(b, bytearray(10), 0, 100, 0, 0, np.zeros(1, np.int64), 0)
    with pytest.raises(ValueError):  # no next offset for the batch's queue key
        send.place_records(b, bytearray(1000), 0, 1000, 0, 0, np.zeros(0, np.int64), 0)
    with pytest.raises(ValueError):
        send.place_records(b, bytearray(1000), -8, 1000, 0, 0, np.zeros(1, np.int64), 0)
    with pytest.raises(ValueError):
        send.encode_sends([_send()], TOPICS, pack_host("::1", 1), STORE, CLUSTER, 4 << 20)
    with pytest.raises(ValueError):  # an index mapping shorter than its layout: refused, not overrun
        send.index_records(b, 0, bytearray(100), 16, 30, [0, 0, 0, 0, 0, 1], 0)
    with pytest.raises(ValueError):
        send.index_records(b, 0, bytearray(100), 0, 0, [0, 0, 0, 0, 0, 1], 0)


@pytest.mark.parametrize("req", [_send(), _send("T2", 3, props="KEYS\x01a b\x02TAGS\x01t\x02", body=b"x" * 300)])
def test_place_one_writes_what_place_records_writes(send, req) -> None:
    """The one-record writer (a lone send) and the general one: the same bytes, rows and tag code."""
    one, many = (send.encode_sends([req], TOPICS, BORN, STORE, CLUSTER, 4 << 20) for _ in range(2))
    m1, m2 = bytearray(2000), bytearray(2000)
    placed = send.place_one(one, m1, 100, 2000, 4000, 77, 1_700_000_000_999)
    nxt = np.array([77], np.int64)
    assert send.place_records(many, m2, 100, 2000, 4000, 0, nxt, 1_700_000_000_999) == (1, placed[0])
    assert placed == (100 + one.total_size, int(one.cols[0, COL["tags"]]))
    assert (bytes(m1), one.cols.tolist()) == (bytes(m2), many.cols.tolist())
    assert one.cols[0, COL["queue_offset"]] == 77 and one.cols[0, COL["commit_log_offset"]] == 4100


def test_place_one_writes_the_consume_queue_entry(send) -> None:
    """Given a consume-queue mapping, the one-record writer also writes the record's 20-byte
    entry there (commit-log offset, size, tag code, big-endian); a record that does not fit
    writes neither, and an entry position outside the mapping is refused before anything is."""
    req = _send("T2", 3, props="KEYS\x01a\x02TAGS\x01t\x02")
    b = send.encode_sends([req], TOPICS, BORN, STORE, CLUSTER, 4 << 20)
    plain = send.encode_sends([req], TOPICS, BORN, STORE, CLUSTER, 4 << 20)
    m1, m2, cq = bytearray(2000), bytearray(2000), bytearray(100)
    placed = send.place_one(b, m1, 100, 2000, 4000, 7, 1_700_000_000_999, cq, 40)
    assert placed == send.place_one(plain, m2, 100, 2000, 4000, 7, 1_700_000_000_999)
    assert m1 == m2 and b.cols.tolist() == plain.cols.tolist()
    tag = int(b.cols[0, COL["tags"]])
    assert tag != 0
    assert cq == bytes(40) + struct.pack(">qiq", 4100, b.total_size, tag) + bytes(40)
    full = bytearray(100)
    assert send.place_one(b, bytearray(2000), 1990, 2000, 0, 0, 1, full, 0) is None
    assert full == bytearray(100)  # no room for the record: no entry either
    for bad in (-1, 81):
        m, q = bytearray(2000), bytearray(100)
        with pytest.raises(ValueError):
            send.place_one(b, m, 0, 2000, 0, 0, 1, q, bad)
        assert m == bytearray(2000) and q == bytearray(100)


def test_place_one_leaves_the_end_marker_room(send) -> None:
    b = send.encode_sends([_send()], TOPICS, BORN, STORE, CLUSTER, 4 << 20)
    end = 50 + b.total_size + 8
    mapping = bytearray(end)
    assert send.place_one(b, mapping, 51, end, 0, 0, 1) is None  # one byte short: nothing written
    assert mapping == bytearray(end)
    assert send.place_one(b, mapping, 50, end, 0, 0, 1)[0] == end - 8
    with pytest.raises(ValueError):  # a mapping shorter than the file size it is said to have
        send.place_one(b, bytearray(10), 0, 100, 0, 0, 0)
    with pytest.raises(ValueError):
        send.place_one(b, bytearray(1000), -1, 1000, 0, 0, 0)
    two = send.encode_sends([_send(), _send()], TOPICS, BORN, STORE, CLUSTER, 4 << 20)
    with pytest.raises(ValueError):  # a batch of two records is place_records's
        send.place_one(two, bytearray(1000), 0, 1000, 0, 0, 0)


@pytest.mark.c_ext
@pytest.mark.parametrize("order", [
    ("T1/1", "T1/1", "T2/3", "T1/1", "T2/3"),
    ("T1/1", "bad-new-key", "T1/1", "T2/0"),          # a key taken back while it is the second
    ("bad-first-key", "T2/0", "T2/0", "T1/1"),        # the first key taken back
    ("T1/1", "T2/0", "bad-new-key", "话题/1", "T2/0"),  # taken back once the keys have an index
])
def test_queue_keys_agree_with_the_pure_twin(order) -> None:
    """The compiled batch keeps one queue key without a dict and makes one for a second: the keys
    and each row's key column are the pure twin's, including keys of requests taken back."""
    def req(spec: str):
        if spec.startswith("bad"):  # a batch whose second entry goes the long way, after taking a new key
            body = _batch_body(1) + encode_batch_body([Message("T1", b"d", properties={"DELAY": "3"})])
            return _send("T2", 7, body=body, code=RequestCode.SEND_BATCH_MESSAGE)
        topic, qid = spec.split("/")
        return _send(topic, int(qid))
    reqs = [req(spec) for spec in order]
    got = [(b.keys, b.cols[:, COL["key"]].tolist(), b.slow, b.fast)
           for b in (_pipeline(kind).encode_sends(reqs, TOPICS, BORN, STORE, CLUSTER, 4 << 20) for kind in ("py", "c"))]
    assert got[0] == got[1]
    bad = [i for i, spec in enumerate(order) if spec.startswith("bad")]
    assert got[1][2] == bad and ("T2", 7) not in got[1][0]  # the taken-back key is gone


def test_a_batch_refused_midway_leaves_no_trace(send) -> None:
    """The second entry needs the slow path: the first entry's record, its queue key and its
    round-robin turn are all taken back."""
    body = encode_batch_body([Message("T2", b"ok"), Message("T2", b"delayed", properties={"DELAY": "2"})])
    reqs = [_send("T2", -1, body=body, code=RequestCode.SEND_BATCH_MESSAGE), _send("T1", 0)]
    b = send.encode_sends(reqs, TOPICS, BORN, STORE, CLUSTER, 4 << 20, rr=5)
    assert (b.slow, b.fast, b.keys, b.rr, b.n) == ([0], [1], [("T1", 0)], 5, 1)
    assert decode_record(b.records, 0).body == b"hello"


def test_the_cpp_client_sends_take_the_fast_path(send) -> None:
    """Every SEND the official C++ client recorded (SEND_MESSAGE, numbers as JSON numbers,
    ``batch: "0"/"1"``): all but the delayed one are taken, and each record holds what the
    slow path would store (the client's properties plus CLUSTER)."""
    import json
    from pathlib import Path

    from fastmq._ext.codec import decode_frame
    from fastmq.protocol.message import decode_batch_body, decode_properties

    from tests.support import WIRE_VECTORS

    path = WIRE_VECTORS / "producer.jsonl"
    reqs = [decode_frame(bytes.fromhex(r["frame_hex"])) for r in map(json.loads, path.read_text().splitlines())
            if r.get("direction") == "client->server" and r.get("code") == RequestCode.SEND_MESSAGE]
    assert len(reqs) == 9
    topics = {t: (8, 8, 0) for t in {r.ext_fields["topic"] for r in reqs}}
    b = send.encode_sends(reqs, topics, BORN, STORE, CLUSTER, 4 << 20)
    delayed = [i for i, r in enumerate(reqs) if "DELAY" in decode_properties(r.ext_fields["properties"])]
    assert b.slow == delayed and len(b.fast) == 8
    pos = 0
    for i in b.fast:
        r = reqs[i]
        props = decode_properties(r.ext_fields["properties"])
        entries = (decode_batch_body(r.body) if r.ext_fields.get("batch") == "1"
                   else [Message(r.ext_fields["topic"], r.body, properties=props)])
        for e in entries:
            m = decode_record(b.records, pos)
            assert (m.topic, m.body, m.queue_id) == (r.ext_fields["topic"], e.body, int(r.ext_fields["queueId"]))
            assert m.properties == {**e.properties, "CLUSTER": "DefaultCluster"}
            assert m.sys_flag == int(r.ext_fields["sysFlag"])
            pos += m.store_size
    assert pos == len(b.records)


def test_puts_are_counted_per_topic_for_stats(send) -> None:
    """TOPIC_PUT_NUMS from one socket read's batch: a topic's messages and requests over its queues."""
    from fastmq.broker.processors.send import SendMessageProcessor
    from fastmq.broker.stats import TOPIC_PUT_NUMS, BrokerStatsManager

    reqs = [_send("T1", 1), _send("T1", 2), _send("T2", 3),
            _send("T1", 1, None, _batch_body(3), code=RequestCode.SEND_BATCH_MESSAGE)]
    b = send.encode_sends(reqs, TOPICS, BORN, STORE, CLUSTER, 4096)
    stats = BrokerStatsManager()
    SendMessageProcessor._count_puts(SimpleNamespace(broker=SimpleNamespace(stats=stats)), b, reqs)
    t1, t2 = stats.get(TOPIC_PUT_NUMS, "T1"), stats.get(TOPIC_PUT_NUMS, "T2")
    assert (t1.value, t1.times, t2.value, t2.times) == (5, 3, 1, 1)
    one_req = [_send("T2", 3)]
    one = send.encode_sends(one_req, TOPICS, BORN, STORE, CLUSTER, 4096)
    SendMessageProcessor._count_puts(SimpleNamespace(broker=SimpleNamespace(stats=stats)), one, one_req)
    assert (t2.value, t2.times) == (2, 2)
    # sends gathered from several connections, each to its own queue of one topic
    spread_reqs = [_send("T2", q) for q in range(8)]
    spread = send.encode_sends(spread_reqs, TOPICS, BORN, STORE, CLUSTER, 4096)
    SendMessageProcessor._count_puts(SimpleNamespace(broker=SimpleNamespace(stats=stats)), spread, spread_reqs)
    assert (t2.value, t2.times) == (10, 10)
