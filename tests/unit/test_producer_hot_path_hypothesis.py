"""Twin parity of the producer's hot path (fastmq/_ext/produce_c against produce_py), by hypothesis.

Same inputs, same outputs: request frames byte for byte (or the same exception for what cannot be
encoded), UNIQ_KEYs, month bounds, and batch bodies with their joined keys.
"""
from __future__ import annotations

from typing import Any, Callable

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from fastmq.protocol.message import Message
from tests.support import examples

pytestmark = pytest.mark.c_ext
_SETTINGS = settings(max_examples=examples(150), deadline=None)

_PREFIX = st.text("0123456789ABCDEF", min_size=20, max_size=20)
_NOW = st.integers(0, 1 << 42)
_ANY_INT = st.one_of(st.integers(-(2 ** 31), 2 ** 31 - 1), st.integers(-(2 ** 63), 2 ** 63 - 1))
# Property texts reach the separators, surrogates (unencodable) and non-ASCII.
_TEXT = st.text(st.characters(codec="utf-8") | st.sampled_from(["\x01", "\x02", "\ud800"]), max_size=12)
_PROPS = st.one_of(st.dictionaries(_TEXT, _TEXT, max_size=5),
                   st.dictionaries(_TEXT, st.integers(-5, 5) | st.none(), max_size=3), st.none())


@pytest.fixture(scope="module")
def twins() -> tuple[Any, Any]:
    from fastmq._ext import produce_c, produce_py
    return produce_c, produce_py


def _outcome(fn: Callable[[], Any]) -> tuple[str, Any]:
    try:
        return "ok", fn()
    except Exception as exc:
        # The twins fail alike: the same type, and fastmq's own refusals (ValueError) with the same text;
        # a TypeError's text is the interpreter's or Cython's wording of the same wrong type.
        return type(exc).__name__, str(exc) if isinstance(exc, ValueError) else None


@_SETTINGS
@given(ms=_NOW)
def test_month_bounds(twins, ms: int) -> None:
    c, py = twins
    assert c.month_bounds(ms) == py.month_bounds(ms)


@_SETTINGS
@given(prefix=_PREFIX, steps=st.lists(st.tuples(st.integers(0, 300), _NOW), max_size=8))
def test_uniq_ids(twins, prefix: str, steps: list[tuple[int, int]]) -> None:
    c, py = twins
    a, b = c.UniqIds(prefix), py.UniqIds(prefix)
    for n, now in steps:
        assert a.take(n, now) == b.take(n, now)
        assert a.next(now) == b.next(now)


@_SETTINGS
@given(prefix=st.text(max_size=24))
def test_uniq_ids_bad_prefix(twins, prefix: str) -> None:
    c, py = twins
    assert _outcome(lambda: c.UniqIds(prefix).prefix) == _outcome(lambda: py.UniqIds(prefix).prefix)


@_SETTINGS
@given(group=_TEXT, opaque=_ANY_INT, topic=_TEXT, qid=_ANY_INT, sys_flag=_ANY_INT, born=_ANY_INT, flag=_ANY_INT,
       properties=_PROPS, body=st.binary(max_size=64) | st.just("text"), batch=st.booleans(),
       queue_nums=st.integers(0, 64))
def test_request_frame(twins, group: str, opaque: int, topic: str, qid: int, sys_flag: int, born: int, flag: int,
                       properties: Any, body: Any, batch: bool, queue_nums: int) -> None:
    c, py = twins
    outs = [_outcome(lambda m=m: m.SendRequestWriter(group, "TBW102", queue_nums, 3, 409).frame(
        opaque, topic, qid, sys_flag, born, flag, properties, body, batch)) for m in (c, py)]
    assert outs[0] == outs[1]


# Long texts of what JSON escapes among plain bytes: the compiled escaper passes over 8 plain
# bytes at a time, so the bytes to escape land at every offset of a word and across words.
_ESCAPED = st.text(st.sampled_from(["a", "Z", " ", "~", '"', "\\", "\x00", "\x1f", "\n", "\x7f", "\x01", "\x02", "é",
                                    "\u4e2d"]), max_size=40)


@_SETTINGS
@given(properties=st.dictionaries(_ESCAPED, _ESCAPED, max_size=4), topic=_ESCAPED)
def test_request_frame_escapes(twins, properties: dict[str, str], topic: str) -> None:
    c, py = twins
    outs = [_outcome(lambda m=m: m.SendRequestWriter("g", "TBW102", 4, 3, 409).frame(
        7, topic, 1, 0, 1, 0, properties, b"x", False)) for m in (c, py)]
    assert outs[0] == outs[1]


@_SETTINGS
@given(group=_TEXT, topic=_TEXT, qid=_ANY_INT, flag=_ANY_INT, properties=_PROPS,
       body=st.binary(max_size=64) | st.just("text"), batch=st.booleans(), access_key=_TEXT,
       token=st.none() | _TEXT)
def test_signed_request_frame(twins, group: str, topic: str, qid: int, flag: int, properties: Any, body: Any,
                              batch: bool, access_key: str, token: str | None) -> None:
    """Signed frames (each twin with its own twin's HMAC key) agree too, refusals included."""
    from fastmq._ext import acl_check_c, acl_check_py

    class Signer:
        def __init__(self, key: Any) -> None:
            self.access_key, self.security_token, self.key = access_key, token, key

    outs = [_outcome(lambda m=m, k=k: m.SendRequestWriter(group, "TBW102", 4, 3, 409, signer=Signer(k.HmacKey(b"s")))
                     .frame(7, topic, qid, 0, 1, flag, properties, body, batch))
            for m, k in zip(twins, (acl_check_c, acl_check_py))]
    assert outs[0] == outs[1]


def _messages(draw: Any) -> list[Message]:
    n = draw(st.integers(0, 5))
    msgs = []
    for i in range(n):
        props: dict[str, str] = draw(st.dictionaries(st.sampled_from(["KEYS", "TAGS", "DELAY", "X"]),
                                                     st.sampled_from(["", "0", "3", "a", "a\x02"]), max_size=3))
        if draw(st.booleans()):
            props["UNIQ_KEY"] = f"GIVEN{i}"
        body = draw(st.sampled_from([b"x", b"", b"y" * 40, bytearray(b"z")]))
        topic = draw(st.sampled_from(["T", "T", "T", "Other"]))
        msgs.append(Message(topic, body, draw(st.integers(-(2 ** 31), 2 ** 31 - 1)), props))
    return msgs


@_SETTINGS
@given(data=st.data(), max_body=st.integers(1, 64))
def test_encode_batch(twins, data: Any, max_body: int) -> None:
    c, py = twins
    msgs = _messages(data.draw)
    copies = [Message(m.topic, m.body, m.flag, dict(m.properties)) for m in msgs]
    got = _outcome(lambda: c.encode_batch(msgs, "T", max_body, c.UniqIds("0" * 20)))
    # The keys a twin makes read the clock: hand the compiled twin's to the pure one, which then makes none.
    for mine, theirs in zip(copies, msgs):
        if "UNIQ_KEY" in theirs.properties and got[0] == "ok":
            mine.properties["UNIQ_KEY"] = theirs.properties["UNIQ_KEY"]
    want = _outcome(lambda: py.encode_batch(copies, "T", max_body, py.UniqIds("0" * 20)))
    assert got == want
    if got[0] != "ok" or got[1] is None:
        assert [m.properties for m in msgs] == [m.properties for m in copies]  # nothing changed
