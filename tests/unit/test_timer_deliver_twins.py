"""The timer-delivery record builder: both twins give the same bytes and rows, and the bytes are
what the general path (message objects, ``delivered_message`` and the store's encoder) stores."""
from __future__ import annotations

import importlib

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from fastmq.broker.timer import delivered_message
from fastmq.protocol.message import decode_record, encode_properties, encode_record, pack_host

TIMER = b"rmq_sys_wheel_timer"
STORE = pack_host("127.0.0.1", 10911)
NOW = 1_700_000_123_456


def _twin(kind: str):
    return importlib.import_module(f"fastmq._ext.timer_deliver_{kind}").delivered_records


TWINS = [pytest.param("py", id="py"), pytest.param("c", id="c", marks=pytest.mark.c_ext)]


def _held(props: dict[str, str], body: bytes = b"body", topic: bytes = TIMER, sys_flag: int = 0) -> bytes:
    rec = encode_record(topic=topic, body=body, properties=props, queue_id=0, flag=7, sys_flag=sys_flag,
                        born_timestamp=1_700_000_000_001, born_host=("10.0.0.9", 4242),
                        store_timestamp=1_700_000_000_500, store_host=("127.0.0.1", 10911), reconsume_times=2,
                        queue_offset=5, phys_offset=4096)
    return bytes(rec)


BASE = {"TIMER_DELIVER_MS": "1700000001000", "TIMER_OUT_MS": "1700000000000", "UNIQ_KEY": "U1",
        "REAL_TOPIC": "Orders", "REAL_QID": "3", "TAGS": "tg", "WAIT": "true", "KEYS": "k1 k2"}


def _rows(b) -> list[list[int]]:
    return np.asarray(b.cols)[:b.n].tolist()


@pytest.mark.parametrize("kind", TWINS)
def test_same_bytes_as_the_general_path(kind: str) -> None:
    rec = _held(BASE)
    b, left = _twin(kind)([rec, memoryview(rec)], TIMER, NOW, STORE, 4 * 1024 * 1024)
    assert left == [] and b.n == 2 and b.keys == [("Orders", 3)]
    staging = bytes(b.records if hasattr(b, "records") else b.staging)
    size = _rows(b)[0][2]
    got = decode_record(staging[:size])
    want = delivered_message(decode_record(rec), 1_700_000_000_500, NOW)
    assert want is not None
    assert (got.topic, got.queue_id, got.body, got.flag, got.born_timestamp, got.reconsume_times) == (
        want.topic, want.queue_id, want.body, want.flag, want.born_timestamp, want.reconsume_times)
    assert got.properties == want.properties
    assert got.store_host == ("127.0.0.1", 10911)


@pytest.mark.parametrize("kind", TWINS)
@pytest.mark.parametrize("props,topic", [
    ({k: v for k, v in BASE.items() if k != "REAL_TOPIC"}, TIMER),
    ({**BASE, "REAL_QID": "x"}, TIMER),
    ({**BASE, "REAL_QID": "99999999999"}, TIMER),
    ({**BASE, "REAL_TOPIC": "bad topic"}, TIMER),
    (BASE, b"Other"),
])
def test_odd_records_are_left(kind: str, props, topic) -> None:
    good = _held(BASE)
    b, left = _twin(kind)([good, _held(props, topic=topic), b"", b"\x00" * 10], TIMER, NOW, STORE, 1 << 22)
    assert left == [1, 2, 3] and b.n == 1


_name = st.text(st.sampled_from("ABKTWRUIQ_EYSLMDGO"), min_size=1, max_size=12)
_value = st.text(st.characters(blacklist_characters="\x01\x02", blacklist_categories=("Cs",)), max_size=20)


@settings(max_examples=200, deadline=None)
@given(extra=st.dictionaries(_name, _value, max_size=6), body=st.binary(max_size=64),
       topics=st.lists(st.sampled_from(["A", "B", "%RETRY%g"]), min_size=1, max_size=5),
       qids=st.lists(st.integers(0, 2 ** 31 - 1), min_size=1, max_size=5))
def test_twins_agree(extra, body, topics, qids) -> None:
    recs = []
    for i, t in enumerate(topics):
        props = {**extra, "REAL_TOPIC": t, "REAL_QID": str(qids[i % len(qids)]), "TIMER_OUT_MS": "5"}
        recs.append(_held(props, body))
    out = []
    for kind in ("py", "c"):
        b, left = _twin(kind)(recs, TIMER, NOW, STORE, 1 << 22)
        out.append((bytes(b.records if hasattr(b, "records") else b.staging)[:int(sum(r[2] for r in _rows(b)))],
                    _rows(b), list(b.keys), left))
    assert out[0] == out[1]


@pytest.mark.parametrize("kind", TWINS)
def test_real_topic_ids_from_one_buffer(kind: str) -> None:
    fn = importlib.import_module(f"fastmq._ext.timer_deliver_{kind}").real_topic_ids
    recs = [_held(BASE), _held({**BASE, "REAL_TOPIC": "Bills"}), _held(BASE),
            _held({k: v for k, v in BASE.items() if k != "REAL_TOPIC"}), _held({**BASE, "REAL_TOPIC": "a b"}),
            _held(BASE)[:-1], _held({**BASE, "REAL_TOPIC": "Bills"})]
    buf = b"".join(recs)
    starts = np.cumsum([0] + [len(r) for r in recs[:-1]]).astype(np.int64)
    sizes = np.array([len(r) for r in recs], np.int32)
    sizes[5] += 1  # a size that does not match the record's own
    ids = {"Known": 0}
    got = fn(buf, starts, sizes, ids)
    assert got.dtype == np.int32 and got.tolist() == [1, 2, 1, -1, -1, -1, 2]
    assert ids == {"Known": 0, "Orders": 1, "Bills": 2}
    out_of_buf = fn(buf, np.array([len(buf) - 10, -1], np.int64), np.array([100, 10], np.int32), ids)
    assert out_of_buf.tolist() == [-1, -1]
    with pytest.raises(ValueError):
        fn(buf, starts, sizes[:2], ids)
