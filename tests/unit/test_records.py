"""The plain-IPv4 record decoder twins (fastmq/_ext/records_*): equal objects, equal ``None`` for
every body they leave to the reference, equal errors, and the same values as ``decode_records``."""
from __future__ import annotations

import dataclasses

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from fastmq._ext import records_py
from fastmq.protocol.message import MessageExt, decode_records, encode_record
from tests.support import examples

_SETTINGS = settings(max_examples=examples(200), deadline=None, suppress_health_check=[HealthCheck.too_slow])

_I32 = st.integers(-(1 << 31), (1 << 31) - 1)
_I64 = st.integers(-(1 << 63), (1 << 63) - 1)
_TEXT = st.text(st.characters(blacklist_characters="\x01\x02", blacklist_categories=["Cs"]), max_size=12)
_TOPIC = st.one_of(
    st.sampled_from(["T", "%RETRY%G", "Töpic", "主题", "x" * 127]),
    st.text(st.characters(blacklist_categories=["Cs"]), min_size=1, max_size=30).filter(
        lambda t: len(t.encode()) <= 127),
)
# Raw property bytes reach pieces without a \x01, empty names, repeated names and bad UTF-8.
_PROPS = st.one_of(
    st.dictionaries(_TEXT, _TEXT, max_size=6),
    st.lists(st.sampled_from([b"a", b"K", b"\x01", b"\x02", b"v", "é".encode(), b"\xff", b"\xc3"]),
             max_size=12).map(b"".join),
)
_V4 = st.builds(lambda a, p: (f"{a >> 24}.{(a >> 16) & 255}.{(a >> 8) & 255}.{a & 255}", p),
                st.integers(0, (1 << 32) - 1), st.integers(0, (1 << 31) - 1))
_HOST = st.one_of(st.sampled_from([("10.0.0.1", 5000), ("192.168.1.7", 10911)]), _V4,
                  st.binary(min_size=8, max_size=8))


@st.composite
def _record(draw, v6: bool = False) -> bytes:
    return bytes(encode_record(
        topic=draw(_TOPIC), body=draw(st.binary(max_size=64)), properties=draw(_PROPS),
        queue_id=draw(_I32), flag=draw(_I32), queue_offset=draw(_I64), phys_offset=draw(_I64),
        sys_flag=draw(_I32), born_timestamp=draw(_I64),
        born_host=("::1", 7) if v6 else draw(_HOST), store_timestamp=draw(_I64),
        store_host=draw(_HOST), reconsume_times=draw(_I32), prepared_transaction_offset=draw(_I64),
        crc=draw(_I32)))


_BODY = st.lists(_record(), max_size=8).map(b"".join)


def _same(records, data: bytes):
    """Both twins' answer for ``data`` (asserted equal), and that answer."""
    got = records.decode_v4(data, MessageExt)
    want = records_py.decode_v4(data, MessageExt)
    assert got == want
    if got is not None:
        for obj in got:
            assert type(obj) is MessageExt
            assert list(vars(obj)) == list(records_py.FIELDS)  # __init__'s own __dict__ order
    return got


def test_fields_are_message_ext_init_order() -> None:
    # The compiled twin fills __dict__ instead of calling __init__: that is only the same object
    # while MessageExt is a plain dataclass of exactly these fields.
    assert tuple(f.name for f in dataclasses.fields(MessageExt)) == records_py.FIELDS
    assert not hasattr(MessageExt, "__post_init__")
    assert "__slots__" not in vars(MessageExt)


@_SETTINGS
@given(_BODY)
def test_twins_equal_and_equal_to_reference(records, data: bytes) -> None:
    got = _same(records, data)
    try:
        want = decode_records(data, verify_crc=False)
    except Exception:  # a body the reference rejects never passes as plain
        assert got is None
    else:
        if got is not None:
            assert got == want


@_SETTINGS
@given(st.lists(_record(), min_size=1, max_size=4), st.integers(0, 3), st.data())
def test_an_ipv6_record_anywhere_leaves_the_body_to_the_reference(records, recs, at, data) -> None:
    recs.insert(min(at, len(recs)), data.draw(_record(v6=True)))
    assert _same(records, b"".join(recs)) is None


@_SETTINGS
@given(_BODY.filter(bool), st.data())
def test_truncated_body(records, body: bytes, data) -> None:
    cut = data.draw(st.integers(1, len(body)))
    got = _same(records, body[:-cut])
    if got is not None:  # cut at a record boundary: the records before it
        assert got == decode_records(body[:-cut], verify_crc=False)


@_SETTINGS
@given(_BODY.filter(bool), st.data())
def test_corrupt_byte(records, body: bytes, data) -> None:
    buf = bytearray(body)
    at = data.draw(st.integers(0, len(buf) - 1))
    buf[at] ^= data.draw(st.integers(1, 255))
    got = _same(records, bytes(buf))
    if got is not None:
        assert got == decode_records(bytes(buf), verify_crc=False)


@_SETTINGS
@given(st.binary(max_size=300))
def test_garbage(records, data: bytes) -> None:
    got = _same(records, data)
    if got is not None:  # only a body of well-formed records decodes
        assert got == decode_records(data, verify_crc=False)


def test_empty_body(records) -> None:
    assert records.decode_v4(b"", MessageExt) == []


@pytest.mark.parametrize("bad", [bytearray(b""), memoryview(b""), None, "x"])
def test_not_bytes_same_error(records, bad) -> None:
    with pytest.raises(TypeError) as got:
        records.decode_v4(bad, MessageExt)
    with pytest.raises(TypeError) as want:
        records_py.decode_v4(bad, MessageExt)
    assert str(got.value) == str(want.value)


def test_hosts_and_topics_shared_values(records) -> None:
    recs = [encode_record(topic="T", body=b"x", properties={"A": "1"}, born_host=("10.0.0.1", 1),
                          store_host=("10.0.0.1", 1), queue_offset=i) for i in range(3)]
    out = records.decode_v4(b"".join(map(bytes, recs)), MessageExt)
    assert [m.queue_offset for m in out] == [0, 1, 2]
    assert all(m.born_host == m.store_host == ("10.0.0.1", 1) for m in out)
    # each object owns its properties dict: a handler may change one message's properties
    out[0].properties["B"] = "2"
    assert out[1].properties == {"A": "1"}


def test_more_property_names_than_the_compiled_cache_holds(records) -> None:
    # 16 names are remembered per body; the rest are decoded each time, the values of remembered
    # names are reused only while they repeat.
    recs = [encode_record(topic="T", body=b"", properties={f"N{(i * 7 + j) % 40}": ("same" if j % 2 else f"v{i}")
                                                           for j in range(25)}) for i in range(6)]
    data = b"".join(map(bytes, recs))
    out = _same(records, data)
    assert out == decode_records(data, verify_crc=False)
    assert len(out[5].properties) == 25


class _Counted(MessageExt):
    """A record class with a ``__setattr__`` of its own: the compiled twin's direct sets and
    ``tp_new`` are only for a class without one (or a ``__new__``); this one goes through both."""

    made = 0

    def __new__(cls, *args: object, **kwargs: object) -> "_Counted":
        _Counted.made += 1
        return super().__new__(cls)

    def __setattr__(self, name: str, value: object) -> None:
        object.__setattr__(self, name, value.upper() if name == "topic" and isinstance(value, str) else value)


def test_a_class_with_its_own_new_and_setattr_gets_them(records) -> None:
    recs = [encode_record(topic="t", body=b"x", properties={"A": "1"}, queue_offset=i) for i in range(2)]
    data = b"".join(map(bytes, recs))
    before = _Counted.made
    out = records.decode_v4(data, _Counted)
    assert _Counted.made - before == 2
    assert [type(m) for m in out] == [_Counted, _Counted]
    assert [m.topic for m in out] == ["T", "T"]
    assert [m.queue_offset for m in out] == [0, 1]
    assert [vars(m) for m in out] == [vars(m) for m in records_py.decode_v4(data, _Counted)]
