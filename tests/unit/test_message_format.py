"""Stored-message format, properties, tag codes and offset message ids."""
from __future__ import annotations

import struct
import zlib

import pytest

from fastmq.errors import FastMQError
from fastmq.protocol.message import (
    BLANK_MAGIC, MAGIC_V1, PHYS_OFFSET_POS, QUEUE_OFFSET_POS, MessageConst, MessageFormatError,
    MessageSysFlag, body_crc, create_offset_msg_id, decode_offset_msg_id, decode_properties,
    decode_record, decode_records, encode_properties, encode_record, java_string_hash,
    record_length, store_timestamp_pos, tags_code,
)

# Values printed by a real JVM (java 'String.hashCode()'), not by our formula.
JAVA_HASHES = [
    ("TagA", 2598919),
    ("TagB", 2598920),
    ("", 0),
    ("*", 42),
    ("\u6807\u7b7e", 857175),                 # 标签
    ("tag-\u00e9", 110118774),
    ("\U0001F600", 1772899),                   # astral: two surrogate code units
    ("a\U0001F600b", 57849694),
    ("\U0001D11Emusic", 1496085755),
    ("TagA||TagB", 1789476431),
    ("\u00dcn\u00efc\u00f6d\u00e9", 1055431381),
    ("z" * 20, 1718487168),
    ("Hello, World! \u4f60\u597d", -29146616),  # negative: sign must survive
    ("negative-test-string-xyz", 482619488),
]


@pytest.mark.parametrize("s,expected", JAVA_HASHES)
def test_java_string_hash_matches_jvm(s: str, expected: int) -> None:
    assert java_string_hash(s) == expected
    assert tags_code(s or None) == expected


def test_tags_code_none() -> None:
    assert tags_code(None) == 0


def test_properties_round_trip() -> None:
    props = {MessageConst.UNIQ_CLIENT_MESSAGE_ID_KEYIDX: "AB12", MessageConst.KEYS: "k1 k2",
             MessageConst.TAGS: "标签", MessageConst.WAIT_STORE_MSG_OK: "true", "user": "v=1"}
    raw = encode_properties(props)
    assert raw.startswith(b"UNIQ_KEY\x01AB12\x02KEYS\x01k1 k2\x02")
    assert decode_properties(raw) == props
    assert decode_properties(raw.decode()) == props
    assert encode_properties({}) == b""
    assert decode_properties(b"") == {}


def test_properties_lenient_and_errors() -> None:
    # pieces without a name separator are skipped, as RocketMQ does
    assert decode_properties(b"junk\x02a\x01b\x02\x02") == {"a": "b"}
    with pytest.raises(MessageFormatError):
        encode_properties({"a\x01": "b"})
    with pytest.raises(MessageFormatError):
        encode_properties({"a": "b\x02c"})
    with pytest.raises(MessageFormatError):
        decode_properties(b"\xff\xfe")


def test_offset_msg_id_v4_and_v6() -> None:
    mid = create_offset_msg_id("10.0.0.1", 10911, 1234)
    assert mid == "0A00000100002A9F00000000000004D2"
    assert decode_offset_msg_id(mid) == ("10.0.0.1", 10911, 1234)
    assert decode_offset_msg_id(mid.lower()) == ("10.0.0.1", 10911, 1234)
    mid6 = create_offset_msg_id("::1", 10911, 2**40)
    assert len(mid6) == 56 and mid6 == mid6.upper()
    assert decode_offset_msg_id(mid6) == ("::1", 10911, 2**40)


@pytest.mark.parametrize("bad", ["", "XYZ", "G" * 32, "0" * 31, "0" * 40])
def test_offset_msg_id_bad(bad: str) -> None:
    with pytest.raises(MessageFormatError) as ei:
        decode_offset_msg_id(bad)
    assert isinstance(ei.value, FastMQError) and isinstance(ei.value, ValueError)


def _record(**kw: object) -> bytearray:
    base: dict[str, object] = dict(
        topic="TopicTest", body=b"hello body", properties={"TAGS": "TagA", "KEYS": "k1"},
        queue_id=3, flag=7, queue_offset=11, phys_offset=4096, sys_flag=0, born_timestamp=1000,
        born_host=("192.168.0.2", 50000), store_timestamp=2000, store_host=("10.0.0.1", 10911),
        reconsume_times=2, prepared_transaction_offset=0)
    base.update(kw)
    return encode_record(**base)  # type: ignore[arg-type]


def test_record_layout_by_hand() -> None:
    rec = _record()
    total = record_length(0, 10, 9, len(encode_properties({"TAGS": "TagA", "KEYS": "k1"})))
    assert len(rec) == total
    assert struct.unpack_from(">iIiii", rec, 0) == (total, MAGIC_V1, zlib.crc32(b"hello body") & 0x7FFFFFFF, 3, 7)
    assert struct.unpack_from(">q", rec, QUEUE_OFFSET_POS)[0] == 11
    assert struct.unpack_from(">q", rec, PHYS_OFFSET_POS)[0] == 4096
    assert struct.unpack_from(">q", rec, store_timestamp_pos(0))[0] == 2000
    assert rec[48:52] == bytes([192, 168, 0, 2])
    assert rec[-len(b"TAGS\x01TagA\x02KEYS\x01k1\x02"):] == b"TAGS\x01TagA\x02KEYS\x01k1\x02"


def test_record_round_trip_v4() -> None:
    m = decode_record(_record())
    assert (m.topic, m.body, m.flag, m.queue_id, m.queue_offset) == ("TopicTest", b"hello body", 7, 3, 11)
    assert m.commit_log_offset == 4096 and m.store_timestamp == 2000 and m.born_timestamp == 1000
    assert m.born_host == ("192.168.0.2", 50000) and m.store_host == ("10.0.0.1", 10911)
    assert m.reconsume_times == 2 and m.tags == "TagA" and m.keys == ["k1"]
    assert m.body_crc == body_crc(b"hello body")
    assert m.msg_id == create_offset_msg_id("10.0.0.1", 10911, 4096)


def test_record_round_trip_v6_hosts() -> None:
    rec = _record(born_host=("::1", 1), store_host=("fe80::2", 10911))
    m = decode_record(rec)
    assert m.sys_flag & MessageSysFlag.BORNHOST_V6 and m.sys_flag & MessageSysFlag.STOREHOST_V6
    assert m.born_host == ("::1", 1) and m.store_host == ("fe80::2", 10911)
    assert struct.unpack_from(">q", rec, store_timestamp_pos(m.sys_flag))[0] == 2000
    assert len(rec) == len(_record()) + 24
    assert len(m.msg_id) == 56


def test_empty_body_and_props() -> None:
    m = decode_record(encode_record(topic="T", body=b""))
    assert m.body == b"" and m.properties == {}


def test_decode_concatenated_records() -> None:
    recs = [_record(body=bytes([i]) * (i * 10), queue_offset=i) for i in range(5)]
    out = decode_records(b"".join(recs))
    assert [m.queue_offset for m in out] == list(range(5))
    assert [len(m.body) for m in out] == [0, 10, 20, 30, 40]
    assert decode_records(b"") == []


def test_decode_errors() -> None:
    rec = _record()
    with pytest.raises(MessageFormatError, match="truncated"):
        decode_record(rec[:20])
    with pytest.raises(MessageFormatError, match="total size"):
        decode_record(rec[:-1])
    bad = bytearray(rec)
    struct.pack_into(">I", bad, 4, 0x12345678)
    with pytest.raises(MessageFormatError, match="magic"):
        decode_record(bad)
    blank = struct.pack(">iI", 64, BLANK_MAGIC) + bytes(56)
    with pytest.raises(MessageFormatError, match="blank"):
        decode_record(blank)
    body_at = rec.index(b"hello body")
    bad = bytearray(rec)
    bad[body_at] ^= 0x01
    with pytest.raises(MessageFormatError, match="CRC"):
        decode_record(bad)
    assert decode_record(bad, verify_crc=False).body[0] == ord("h") ^ 1
    # a body length pointing past the record
    bad = bytearray(rec)
    struct.pack_into(">i", bad, body_at - 4, 10_000)
    with pytest.raises(MessageFormatError, match="body length"):
        decode_record(bad)
    # trailing garbage after a good record fails only at the garbage
    with pytest.raises(MessageFormatError):
        decode_records(rec + b"\x00" * 10)


def test_encode_errors() -> None:
    with pytest.raises(MessageFormatError):
        encode_record(topic="x" * 128, body=b"")
    with pytest.raises(MessageFormatError):
        encode_record(topic="T", body=b"", born_host=("not-an-ip", 1))
    with pytest.raises(MessageFormatError):
        encode_record(topic="T", body=b"", properties={"k": "v" * 40000})


# --------------------------------------------------------------------------- property-based

from hypothesis import given, settings, strategies as st  # noqa: E402
from tests.support import examples

_prop_text = st.text(st.characters(blacklist_characters="\x01\x02", blacklist_categories=("Cs",)), max_size=20)


@settings(max_examples=examples(150), deadline=None)
@given(
    topic=st.text(st.characters(blacklist_categories=("Cs",)), min_size=1, max_size=30),
    body=st.binary(max_size=300),
    props=st.dictionaries(_prop_text.filter(bool), _prop_text, max_size=5),
    queue_id=st.integers(0, 2**31 - 1),
    offsets=st.tuples(st.integers(-2**63, 2**63 - 1), st.integers(0, 2**63 - 1), st.integers(0, 2**63 - 1)),
    v6=st.booleans(),
)
def test_record_round_trip_property(topic: str, body: bytes, props: dict[str, str], queue_id: int,
                                    offsets: tuple[int, int, int], v6: bool) -> None:
    if len(topic.encode()) > 127:
        return
    host = ("::ffff:10.1.2.3", 65535) if v6 else ("10.1.2.3", 65535)
    rec = encode_record(topic=topic, body=body, properties=props, queue_id=queue_id,
                        queue_offset=offsets[0], phys_offset=offsets[1], store_timestamp=offsets[2],
                        born_host=host, store_host=host)
    m = decode_record(rec)
    assert (m.topic, m.body, m.properties, m.queue_id) == (topic, body, props, queue_id)
    assert (m.queue_offset, m.commit_log_offset, m.store_timestamp) == offsets
    assert m.store_size == len(rec)
    assert decode_offset_msg_id(m.msg_id)[2] == offsets[1]


@settings(max_examples=examples(200), deadline=None)
@given(st.text(max_size=40))
def test_java_hash_matches_formula_on_utf16_units(s: str) -> None:
    raw = s.encode("utf-16-be", "surrogatepass")
    h = 0
    for (c,) in struct.iter_unpack(">H", raw):
        h = (31 * h + c) % 2**32
    assert java_string_hash(s) == (h - 2**32 if h >= 2**31 else h)


def test_batch_body_round_trip_and_layout() -> None:
    from fastmq.protocol.message import Message, decode_batch_body, encode_batch_body

    msgs = [Message("T", b"one", 0, {"TAGS": "a", "UNIQ_KEY": "K1"}), Message("T", b"", 5, {})]
    raw = encode_batch_body(msgs)
    size0 = struct.unpack_from(">i", raw, 0)[0]
    assert struct.unpack_from(">iiiii", raw, 0) == (size0, 0, 0, 0, 3)
    assert raw[20:23] == b"one"
    out = decode_batch_body(raw, topic="T")
    assert [(m.body, m.flag, m.properties) for m in out] == [(m.body, m.flag, m.properties) for m in msgs]
    assert decode_batch_body(b"") == []
    for bad in (raw[:-1], raw[:10], b"\x00" * 22):
        with pytest.raises(MessageFormatError):
            decode_batch_body(bad)
    wrong = bytearray(raw)
    struct.pack_into(">i", wrong, 0, size0 + 1)
    with pytest.raises(MessageFormatError, match="disagrees"):
        decode_batch_body(wrong)
