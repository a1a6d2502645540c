"""SEND_BATCH_MESSAGE bodies: both encoder twins, byte for byte, and what they refuse."""
from __future__ import annotations

import importlib

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from fastmq.protocol.message import Message, MessageFormatError, decode_batch_body, encode_batch_body
from tests.support import examples

_text = st.text(st.characters(blacklist_characters="\x01\x02", blacklist_categories=("Cs",)), max_size=12)
_messages = st.lists(st.builds(
    lambda body, flag, props: Message("T", body, flag, props),
    st.binary(max_size=200), st.integers(-(1 << 31), (1 << 31) - 1),
    st.dictionaries(_text.filter(bool), st.one_of(_text, st.integers()), max_size=5)), max_size=8)


@settings(max_examples=examples(200), deadline=None)
@given(_messages)
def test_round_trip(msgs) -> None:
    body = encode_batch_body(msgs)
    back = decode_batch_body(body, "T")
    assert [(m.body, m.flag, m.properties) for m in back] == \
        [(m.body, m.flag, {k: str(v) for k, v in m.properties.items()}) for m in msgs]


@pytest.mark.c_ext
@settings(max_examples=examples(200), deadline=None)
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


@settings(max_examples=examples(60), deadline=None)
@given(st.lists(st.tuples(st.integers(0, 3000), st.booleans()), max_size=40), st.integers(200, 20_000))
def test_split_batch_keeps_each_body_within_the_limit(sizes, limit: int) -> None:
    """split_batch counts a message's exact encoded size (a UNIQ_KEY included, added or not), so
    every chunk but a lone oversized message encodes within ``limit``, in the original order."""
    from fastmq.client.message_id import create_uniq_id
    from fastmq.client.producer import split_batch

    msgs = [Message("T", b"x" * n, properties={"UNIQ_KEY": create_uniq_id()} if keyed else {"KEYS": "k"})
            for n, keyed in sizes]
    chunks = list(split_batch(msgs, limit))
    assert [m for c in chunks for m in c] == msgs
    for c in chunks:
        filled = [Message(m.topic, m.body, m.flag, {"UNIQ_KEY": "0" * 32, **m.properties}) for m in c]
        size = len(encode_batch_body(filled))
        assert size <= limit or len(c) == 1
    for a, b in zip(chunks, chunks[1:]):  # a chunk ends only where the next message would not fit
        filled = [Message(m.topic, m.body, m.flag, {"UNIQ_KEY": "0" * 32, **m.properties}) for m in a + b[:1]]
        assert len(encode_batch_body(filled)) > limit
