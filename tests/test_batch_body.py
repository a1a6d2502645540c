"""SEND_BATCH_MESSAGE bodies: both encoder twins, byte for byte, and what they refuse."""
from __future__ import annotations

import importlib

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from fastmq.protocol.message import Message, MessageFormatError, decode_batch_body, encode_batch_body

_text = st.text(st.characters(blacklist_characters="\x01\x02", blacklist_categories=("Cs",)), max_size=12)
_messages = st.lists(st.builds(
    lambda body, flag, props: Message("T", body, flag, props),
    st.binary(max_size=200), st.integers(-(1 << 31), (1 << 31) - 1),
    st.dictionaries(_text.filter(bool), st.one_of(_text, st.integers()), max_size=5)), max_size=8)


@settings(max_examples=200, deadline=None)
@given(_messages)
def test_round_trip(msgs) -> None:
    body = encode_batch_body(msgs)
    back = decode_batch_body(body, "T")
    assert [(m.body, m.flag, m.properties) for m in back] == \
        [(m.body, m.flag, {k: str(v) for k, v in m.properties.items()}) for m in msgs]


@pytest.mark.c_ext
@settings(max_examples=200, deadline=None)
@given(_messages)
def test_twins_agree(msgs) -> None:
    py, c = importlib.import_module("fastmq._ext.batch_py"), importlib.import_module("fastmq._ext.batch_c")
    assert py.encode_batch_body(msgs) == c.encode_batch_body(msgs)


def test_bodies_of_every_buffer_kind(batch) -> None:
    msgs = [Message("T", b"a"), Message("T", bytearray(b"bb"), 3), Message("T", memoryview(b"ccc"), -1)]
    assert [m.body for m in decode_batch_body(batch.encode_batch_body(msgs))] == [b"a", b"bb", b"ccc"]
    assert batch.encode_batch_body([]) == b""


@pytest.mark.parametrize("msg, text", [
    (Message("T", b"x", properties={"a\x01": "v"}), "reserved separator"),
    (Message("T", b"x", properties={"a": "v\x02"}), "reserved separator"),
    (Message("T", b"x", properties={"a": "v" * 40000}), "allows 32767"),
    (Message("T", b"x", 1 << 31), "outside int32"),
])
def test_what_cannot_be_encoded(batch, msg, text: str) -> None:
    with pytest.raises(ValueError, match=text.replace("(", r"\(")):
        batch.encode_batch_body([Message("T", b"ok"), msg])
    with pytest.raises(MessageFormatError):
        encode_batch_body([msg])
