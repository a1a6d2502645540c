"""The batch path of transactions, both twins: a half taken by the send stage
(``fastmq._ext.send``'s ``half_topic``) and the records of an END_TRANSACTION built from the stored
half (``fastmq._ext.end_transaction``) are byte for byte what the broker's long way stores
(``TransactionalMessageBridge`` over the store's encoder), and the twins agree on random halves."""
from __future__ import annotations

import importlib
import struct
from types import SimpleNamespace

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from fastmq.broker.transaction.bridge import TransactionalMessageBridge
from fastmq.protocol import topic as tv
from fastmq.protocol.codes import RequestCode
from fastmq.protocol.command import create_request
from fastmq.protocol.headers import SendMessageRequestHeader
from fastmq.protocol.message import (MessageConst, MessageExt, decode_properties, decode_record, java_string_hash,
                                     pack_host)
from fastmq.store.config import MessageStoreConfig
from fastmq.store.put_message import MessageEncoder
from tests.support import examples

BORN = pack_host("10.1.2.3", 5555)
STORE_ADDR = ("127.0.0.1", 10911)
STORE = pack_host(*STORE_ADDR)
CLUSTER = b"CLUSTER\x01DefaultCluster\x02"
TOPICS = {"T1": (4, 4, 0), "T2": (8, 8, 0x4)}
HALF, OP = tv.TRANS_HALF_TOPIC, tv.TRANS_OP_HALF_TOPIC
COL = {name: i for i, name in enumerate(importlib.import_module("fastmq._ext.send_batch_py").COLUMNS)}
HALF_AT, HALF_QOFF, NOW = 4096, 17, 1_700_000_000_555
_QOFF, _PHYS, _STORETS = 20, 28, 56  # record positions (IPv4 hosts)


def _twin(kind: str) -> SimpleNamespace:
    names: dict = {}
    for stem in ("send", "end_transaction"):
        mod = importlib.import_module(f"fastmq._ext.{stem}_{kind}")
        names.update((name, getattr(mod, name)) for name in mod.__all__)
    return SimpleNamespace(**names)


@pytest.fixture(scope="module", params=[pytest.param("py", id="py"),
                                        pytest.param("c", id="c", marks=pytest.mark.c_ext)])
def tx(request: pytest.FixtureRequest) -> SimpleNamespace:
    return _twin(request.param)


def _half_request(topic: str = "T1", qid: int = 2, props: str = "", body: bytes = b"hello", sys_flag: int = 0x4,
                  group: str = "PG") -> object:
    props = props or (f"UNIQ_KEY\x01U1\x02TAGS\x01tg\x02KEYS\x01k1 k2\x02TRAN_MSG\x01true\x02PGROUP\x01{group}"
                      f"\x02WAIT\x01true")
    h = SendMessageRequestHeader(group, topic, "TBW102", 4, qid, sys_flag, 1_700_000_000_123, 3, props, 1)
    return create_request(RequestCode.SEND_MESSAGE_V2, h.to_v2_fields(), body)


def _long_way_half(req) -> bytes:
    """What the send processor's long way stores for this half (send_message, then the bridge)."""
    f = req.ext_fields
    props = decode_properties(f["i"])
    props[MessageConst.CLUSTER] = "DefaultCluster"
    topic = f["b"]
    msg = MessageExt(topic=topic, body=req.body, flag=int(f["h"]), properties=props, queue_id=int(f["e"]),
                     sys_flag=int(f["f"]) | TOPICS[topic][2], born_timestamp=int(f["g"]),
                     born_host=("10.1.2.3", 5555), reconsume_times=int(f["j"]))
    return _encode(TransactionalMessageBridge.to_half(msg))


def _encode(msg: MessageExt) -> bytes:
    out = MessageEncoder(MessageStoreConfig(), STORE).encode([msg], NOW)
    assert isinstance(out, tuple), out
    return bytes(out[0][0].record)


def _stored(rec: bytes, at: int = HALF_AT, qoff: int = HALF_QOFF) -> bytes:
    """``rec`` as the store places it: queue offset, commit-log offset and store time filled in."""
    b = bytearray(rec)
    struct.pack_into(">q", b, _QOFF, qoff)
    struct.pack_into(">q", b, _PHYS, at)
    struct.pack_into(">q", b, _STORETS, NOW - 5)
    return bytes(b)


def test_a_half_takes_the_fast_path_as_the_long_way_stores_it(tx) -> None:
    for topic, qid in (("T1", 2), ("T2", 7)):
        req = _half_request(topic, qid)
        b = tx.encode_sends([req], TOPICS, BORN, STORE, CLUSTER, 4 << 20, half_topic=HALF)
        assert (b.fast, b.slow, b.keys) == ([0], [], [(HALF, 0)])
        assert b.records == _long_way_half(req)
        row = b.cols[0]
        assert row[COL["queue_id"]] == qid  # the answer names the requested queue (4.9)
        m = decode_record(b.records)
        assert (m.topic, m.queue_id, m.sys_flag & 0xC) == (HALF, 0, 0)
        assert (m.properties[MessageConst.REAL_TOPIC], m.properties[MessageConst.REAL_QUEUE_ID]) == (topic, str(qid))


@pytest.mark.parametrize("why, kwargs, half_topic", [
    ("the broker takes no halves", {}, None),
    ("TRAN_MSG not exactly true", {"props": "TRAN_MSG\x01TRUE\x02PGROUP\x01PG\x02"}, HALF),
    ("TRAN_MSG twice", {"props": "TRAN_MSG\x01true\x02TRAN_MSG\x01true\x02"}, HALF),
    ("a delay level", {"props": "TRAN_MSG\x01true\x02DELAY\x013\x02"}, HALF),
    ("REAL_TOPIC given", {"props": "TRAN_MSG\x01true\x02REAL_TOPIC\x01X\x02"}, HALF),
    ("REAL_QID given", {"props": "REAL_QID\x011\x02TRAN_MSG\x01true"}, HALF),
    ("the broker picks the queue", {"qid": -1}, HALF),
    ("a prepared flag without TRAN_MSG", {"props": "TAGS\x01a\x02"}, HALF),
    ("a rollback flag without TRAN_MSG", {"props": "TAGS\x01a\x02", "sys_flag": 0xC}, HALF),
])
def test_what_the_half_fast_path_leaves_to_the_long_way(tx, why: str, kwargs: dict, half_topic: str | None) -> None:
    plain = create_request(RequestCode.SEND_MESSAGE_V2, SendMessageRequestHeader(
        "PG", "T1", "TBW102", 4, 1, 0, 1, 0, "TAGS\x01a\x02").to_v2_fields(), b"x")
    b = tx.encode_sends([plain, _half_request(**kwargs), plain], TOPICS, BORN, STORE, CLUSTER, 4 << 20,
                        half_topic=half_topic)
    assert (b.fast, b.slow) == ([0, 2], [1]), why


def test_a_half_without_the_prepared_flag_is_a_half(tx) -> None:
    """TRAN_MSG=true is what makes a half (4.9's SendMessageProcessor), the flag is reset anyway."""
    req = _half_request(sys_flag=0)
    b = tx.encode_sends([req], TOPICS, BORN, STORE, CLUSTER, 4 << 20, half_topic=HALF)
    assert b.fast == [0] and b.records == _long_way_half(req)


def _long_way_end(half: bytes, commit: bool) -> list[bytes]:
    """What the END_TRANSACTION processor's long way stores: the bridge's real and op messages."""
    m = decode_record(half)
    out = []
    if commit:
        real = TransactionalMessageBridge.to_committed(m, HALF_AT)
        assert real is not None
        out.append(_encode(real))
    op = MessageExt(topic=OP, body=str(m.queue_offset).encode(), queue_id=m.queue_id,
                    properties={MessageConst.TAGS: tv.TRANS_OP_REMOVE_TAG}, born_timestamp=NOW, born_host=STORE_ADDR)
    out.append(_encode(op))
    return out


def _records(b) -> list[bytes]:
    recs, cols = b.records, b.cols
    return [recs[int(r[COL["pos"]]):int(r[COL["pos"]] + r[COL["size"]])] for r in cols]


@pytest.mark.parametrize("commit", [True, False])
def test_end_records_are_what_the_long_way_stores(tx, commit: bool) -> None:
    for topic, qid, props in (("T1", 2, ""), ("T2", 7, "TRAN_MSG\x01true\x02PGROUP\x01PG\x02WAIT\x01false\x02"),
                              ("T1", 0, "PGROUP\x01PG\x02TRAN_MSG\x01true\x02TAGS\x01\x02")):
        half = _stored(tx.encode_sends([_half_request(topic, qid, props)], TOPICS, BORN, STORE, CLUSTER, 4 << 20,
                                       half_topic=HALF).records)
        b = tx.end_records(half, HALF_AT, HALF.encode(), b"PG", HALF_QOFF, commit, OP.encode(), b"d", NOW, STORE,
                           4 << 20)
        assert b is not None
        assert _records(b) == _long_way_end(half, commit)
        assert b.keys == ([(topic, qid)] if commit else []) + [(OP, 0)]
        m = decode_record(half)
        tags = m.properties.get("TAGS")
        codes = ([_tags_code(tags)] if commit else []) + [_tags_code("d")]
        assert [int(t) for t in b.cols[:, COL["tags"]]] == codes
        assert b.fast == [0] and b.n == (2 if commit else 1)
        wait = m.properties.get("WAIT") != "false"
        index = bool(m.properties.get("KEYS") or m.properties.get("UNIQ_KEY"))
        assert [int(f) for f in b.cols[:, COL["flags"]]] == ([(1 if wait else 0) | (2 if index else 0)]
                                                             if commit else []) + [1]


def _tags_code(text: str | None) -> int:
    return java_string_hash(text) if text else 0


def test_end_records_leave_the_doubtful_to_the_long_way(tx) -> None:
    half = _stored(tx.encode_sends([_half_request()], TOPICS, BORN, STORE, CLUSTER, 4 << 20,
                                   half_topic=HALF).records)

    def end(rec: bytes = half, at: int = HALF_AT, group: bytes = b"PG", qoff: int = HALF_QOFF,
            max_size: int = 4 << 20):
        return tx.end_records(rec, at, HALF.encode(), group, qoff, True, OP.encode(), b"d", NOW, STORE, max_size)

    assert end() is not None
    assert end(group=b"PG2") is None                # the producer group wrong
    assert end(qoff=HALF_QOFF + 1) is None           # the transaction state table offset wrong
    assert end(at=HALF_AT + 1) is None               # the commit log offset wrong
    assert end(half[:-1]) is None                    # not one whole record
    assert end(max_size=len(half) - 30) is None      # the real record over the limit
    plain = _stored(_encode(MessageExt(topic="T1", body=b"x", properties={"PGROUP": "PG"},
                                       born_host=("10.1.2.3", 5555))))
    assert end(plain) is None                        # not a half
    m = decode_record(half)

    def variant(**props: str | None) -> bytes:
        p = dict(m.properties)
        for k, v in props.items():
            if v is None:
                p.pop(k)
            else:
                p[k] = v
        return _stored(_encode(MessageExt(topic=HALF, body=m.body, properties=p, born_host=m.born_host,
                                          sys_flag=m.sys_flag)))

    assert end(variant()) is not None
    for bad in ({"REAL_TOPIC": None}, {"REAL_QID": None}, {"REAL_QID": "-1"}, {"REAL_QID": "x"},
                {"REAL_QID": "2147483648"}, {"REAL_TOPIC": "a b"}, {"REAL_TOPIC": ""}, {"DELAY": "2"},
                {"PGROUP": None}):
        assert end(variant(**bad)) is None, bad


@pytest.mark.c_ext
@settings(max_examples=examples(150), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.data())
def test_twins_agree_on_halves_and_their_end(data) -> None:
    py, c = _twin("py"), _twin("c")
    names = st.sampled_from(["TAGS", "KEYS", "UNIQ_KEY", "WAIT", "X", "DELAY", "TRAN_MSG", "PGROUP", "REAL_TOPIC",
                             "REAL_QID"])
    values = st.one_of(st.sampled_from(["true", "PG", "false", "", "3"]),
                       st.text(st.characters(blacklist_characters="\x01\x02", blacklist_categories=("Cs",)),
                               max_size=6))
    reqs = []
    for _ in range(data.draw(st.integers(1, 6))):
        pairs = data.draw(st.lists(st.tuples(names, values), max_size=5))
        props = "".join(f"{k}\x01{v}\x02" for k, v in pairs)
        reqs.append(_half_request(data.draw(st.sampled_from(["T1", "T2", "Nope"])), data.draw(st.integers(-1, 9)),
                                  props or "TRAN_MSG\x01true", data.draw(st.binary(max_size=40)),
                                  data.draw(st.sampled_from([0, 4, 8, 12]))))
    half_topic = data.draw(st.sampled_from([HALF, None]))
    commit = data.draw(st.booleans())
    out = []
    for mod in (py, c):
        b = mod.encode_sends(reqs, TOPICS, BORN, STORE, CLUSTER, 600, 3, half_topic=half_topic)
        ends = []
        for row in b.cols.tolist():
            rec = _stored(b.records[row[COL["pos"]]:row[COL["pos"]] + row[COL["size"]]])
            e = mod.end_records(rec, HALF_AT, HALF.encode(), b"PG", HALF_QOFF, commit, OP.encode(), b"d", NOW, STORE,
                                600)
            ends.append(None if e is None else (e.records, e.cols.tolist(), e.keys, e.fast, e.wait, e.total_size))
        out.append((b.records, b.cols.tolist(), b.keys, b.slow, b.fast, b.rr, ends))
    assert out[0] == out[1]


_END = {"producerGroup": "PG", "tranStateTableOffset": "17", "commitLogOffset": "4096", "commitOrRollback": "8",
        "fromTransactionCheck": "false", "msgId": "7F00000100002A9F0000000000001000", "transactionId": "U1"}


def test_end_fields_take_only_what_the_long_way_would_read_alike(tx) -> None:
    legal = {"PG"}
    assert tx.end_fields(_END, legal) == (b"PG", 17, 4096, True)
    assert tx.end_fields(dict(_END, commitOrRollback="12"), legal) == (b"PG", 17, 4096, False)
    short = {k: v for k, v in _END.items() if k not in ("fromTransactionCheck", "transactionId")}
    assert tx.end_fields(dict(short, bname="broker-a"), legal) == (b"PG", 17, 4096, True)
    assert tx.end_fields(_END, set()) is None  # a group the name check has not passed yet
    for bad in ({"commitOrRollback": "0"}, {"commitOrRollback": "+8"}, {"commitOrRollback": "08"},
                {"fromTransactionCheck": "true"}, {"fromTransactionCheck": "False"}, {"tranStateTableOffset": "-1"},
                {"commitLogOffset": ""}, {"commitLogOffset": "1" * 19}, {"commitLogOffset": "\uff11"},
                {"tranStateTableOffset": " 17"}, {"topic": "T"}, {"group": "G"}, {"producerGroup": ""}):
        assert tx.end_fields(dict(_END, **bad), legal | {""}) is None, bad
    for gone in ("producerGroup", "msgId", "commitOrRollback", "commitLogOffset", "tranStateTableOffset"):
        assert tx.end_fields({k: v for k, v in _END.items() if k != gone}, legal) is None, gone
    assert tx.end_fields(dict(_END, producerGroup="P\ud800"), {"P\ud800"}) is None
    assert tx.end_fields(None, legal) is None and tx.end_fields(dict(_END, msgId=None), legal) is None


@pytest.mark.c_ext
@settings(max_examples=examples(200), deadline=None)
@given(st.dictionaries(st.sampled_from(sorted(_END) + ["bname", "topic"]),
                       st.one_of(st.sampled_from(["8", "12", "0", "true", "false", "PG", "", "17", "-3"]),
                                 st.text(max_size=20)), max_size=9))
def test_the_twins_agree_on_end_fields(fields) -> None:
    legal = {"PG", ""}
    assert _twin("py").end_fields(fields, legal) == _twin("c").end_fields(fields, legal)
