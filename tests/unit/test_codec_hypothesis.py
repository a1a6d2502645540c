"""Properties of the codec twins, and that the compiled twin agrees with the reference.

Round trips and garbage run for each twin (``codec`` fixture); the differential tests (``c_ext``)
feed the same bytes or the same command to both and want identical bytes, identical commands,
or FrameError from both. Bugs found here get an ``@example``.
"""
from __future__ import annotations

import importlib
import json
import struct

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from fastmq.errors import FrameError
from tests.support import examples

SETTINGS = settings(max_examples=examples(200), deadline=None, suppress_health_check=[HealthCheck.too_slow])

i32 = st.integers(-(2**31), 2**31 - 1)
i16 = st.integers(-32768, 32767)
# Lone surrogates cannot be encoded as UTF-8: the encoder refuses them (tested in test_codec.py).
text = st.text(st.characters(blacklist_categories=("Cs",)), max_size=30)
nasty_text = st.one_of(text, st.text(st.sampled_from('"\\/\b\f\n\r\t\x00\x01\x1f\x7f é€😀\u2028aZ09'), max_size=12))
ext = st.one_of(st.none(), st.dictionaries(nasty_text, nasty_text, max_size=8))
body = st.one_of(st.none(), st.binary(min_size=1, max_size=200))


def frame(header: bytes, body_: bytes = b"", st_: int = 0) -> bytes:
    return struct.pack(">II", 4 + len(header) + len(body_), (st_ << 24) | len(header)) + header + body_


def fields(c) -> tuple:
    return (c.code, c.language, c.version, c.opaque, c.flag, c.remark, c.ext_fields, c.serialize_type, c.body)


@st.composite
def commands(draw, mod, serialize_type=None):
    st_ = draw(st.sampled_from([0, 1])) if serialize_type is None else serialize_type
    narrow = st_ == 1
    return mod.RemotingCommand(
        draw(i16 if narrow else i32), language=draw(st.integers(0, 127 if narrow else 255)),
        version=draw(i16 if narrow else i32), opaque=draw(i32), flag=draw(i32),
        remark=draw(st.one_of(st.none(), nasty_text)), ext_fields=draw(ext), serialize_type=st_, body=draw(body))


def expected_after_round_trip(c) -> tuple:
    f = list(fields(c))
    if c.serialize_type == 1:  # RocketMQSerializable: an empty remark or map reads back as null
        f[5] = c.remark or None
        f[6] = c.ext_fields or None
    elif c.language >= 14:
        f[1] = 7  # the JSON name of an unknown language is OTHER
    return tuple(f)


# ------------------------------------------------------------------ each twin on its own

@SETTINGS
@given(data=st.data())
def test_round_trip(codec, data) -> None:
    c = data.draw(commands(codec))
    assert fields(codec.decode_frame(codec.encode_frame(c))) == expected_after_round_trip(c)


@SETTINGS
@given(data=st.data(), cuts=st.lists(st.integers(0, 300), max_size=30))
def test_decoder_under_any_chunking(codec, data, cuts) -> None:
    cmds = data.draw(st.lists(commands(codec), min_size=1, max_size=6))
    stream = codec.encode_frames(cmds)
    dec = codec.FrameDecoder()
    out, pos = [], 0
    for cut in cuts:
        out += dec.feed(stream[pos:pos + cut])
        pos += cut
        assert dec.buffered() <= len(stream)
    out += dec.feed(stream[pos:])
    assert [fields(x) for x in out] == [expected_after_round_trip(c) for c in cmds]
    assert dec.buffered() == 0


@settings(max_examples=examples(400), deadline=None)
@given(st.binary(max_size=300), st.integers(1, 64))
@example(b"\x00\x00\x00\x05\x00\x00\x00\x01{", 1)
@example(b"\x00\x00\x00\x0c\x00\x00\x00\x08" + b'{"code":' + b"\x00\x00", 3)
def test_garbage_streams_raise_frame_error_only(codec, data: bytes, chunk: int) -> None:
    dec = codec.FrameDecoder(max_frame_size=1 << 16)
    try:
        for i in range(0, len(data), chunk):
            dec.feed(data[i:i + chunk])
    except FrameError:
        with pytest.raises(FrameError):
            dec.feed(b"")


@settings(max_examples=examples(400), deadline=None)
@given(st.binary(max_size=200), st.sampled_from([0, 1, 2, 0x80]), st.binary(max_size=8))
def test_garbage_headers_raise_frame_error_only(codec, header: bytes, st_: int, b: bytes) -> None:
    try:
        codec.decode_frame(frame(header, b, st_))
    except FrameError:
        pass


@st.composite
def mutated_frames(draw, mod):
    f = bytearray(mod.encode_frame(draw(commands(mod))))
    for _ in range(draw(st.integers(1, 4))):
        op = draw(st.sampled_from(["flip", "insert", "delete", "set"]))
        i = draw(st.integers(8, max(8, len(f) - 1)))
        if op == "flip" and i < len(f):
            f[i] ^= 1 << draw(st.integers(0, 7))
        elif op == "insert":
            f[i:i] = draw(st.binary(min_size=1, max_size=3))
        elif op == "delete" and i < len(f):
            del f[i]
        elif op == "set" and i < len(f):
            f[i] = draw(st.sampled_from(b'"\\{}[],:0-9eEtfnu\x00\x80\xff\n'))
    f[0:4] = struct.pack(">I", len(f) - 4)  # keep the framing right: the header is what is under test
    return bytes(f)


@settings(max_examples=examples(300), deadline=None)
@given(data=st.data())
def test_mutated_frames_raise_frame_error_only(codec, data) -> None:
    f = data.draw(mutated_frames(codec))
    try:
        codec.decode_frame(f)
    except FrameError:
        pass


# ------------------------------------------------------------------ the twins agree

def _twins():
    return importlib.import_module("fastmq._ext.codec_py"), importlib.import_module("fastmq._ext.codec_c")


def _outcome(mod, f: bytes):
    try:
        return fields(mod.decode_frame(f))
    except FrameError:
        return FrameError


def _same_command(dst, c):
    return dst.RemotingCommand(c.code, language=c.language, version=c.version, opaque=c.opaque, flag=c.flag,
                               remark=c.remark, ext_fields=c.ext_fields, serialize_type=c.serialize_type, body=c.body)


@pytest.mark.c_ext
@SETTINGS
@given(data=st.data())
def test_twins_encode_identical_bytes_and_read_each_other(data) -> None:
    py, c = _twins()
    cp = data.draw(commands(py))
    cc = _same_command(c, cp)
    fp, fc = py.encode_frame(cp), c.encode_frame(cc)
    assert fp == fc
    assert fields(py.decode_frame(fc)) == fields(c.decode_frame(fp)) == expected_after_round_trip(cp)
    assert py.encode_frames([cp, cp]) == c.encode_frames([cc, cc])


json_scalar = st.one_of(
    st.none(), st.booleans(), st.integers(-(2**40), 2**40), st.integers(-(2**31), 2**31 - 1), nasty_text,
    st.floats(allow_nan=False, allow_infinity=False),
    st.from_regex(r"\A[ \t]?[+-]?[0-9]{1,12}[ \n]?\Z"),  # numbers as strings, the way jsoncpp and Go send them
    st.sampled_from(["JAVA", "CPP", "GO", "", "0", "-0", "00012", "2147483648", "1_0", "١", "\ud800"]))
json_value = st.recursive(json_scalar, lambda inner: st.lists(inner, max_size=3)
                          | st.dictionaries(text, inner, max_size=3), max_leaves=6)
header_key = st.one_of(st.sampled_from(["code", "extFields", "flag", "language", "opaque", "remark",
                                        "serializeTypeCurrentRPC", "version", "a", "b", "i"]), text)
ext_pairs = st.lists(st.tuples(st.one_of(st.sampled_from(list("abcdefghijklmn")), nasty_text), json_value),
                     max_size=8)


@st.composite
def json_headers(draw) -> bytes:
    """Header text with repeated keys, odd spacing, \\u escapes or raw UTF-8, a trailing newline..."""
    ascii_only = draw(st.booleans())
    sep_item = draw(st.sampled_from([",", ", ", " ,\n"]))
    sep_kv = draw(st.sampled_from([":", ": ", " : "]))

    def dump(v) -> str:
        return json.dumps(v, ensure_ascii=ascii_only, separators=(sep_item, sep_kv))

    items = []
    for key, value in draw(st.lists(st.tuples(header_key, json_value), max_size=9)):
        if key == "extFields" and draw(st.booleans()):
            value_text = "{" + sep_item.join(dump(k) + sep_kv + dump(v) for k, v in draw(ext_pairs)) + "}"
        else:
            value_text = dump(value)
        items.append(dump(key) + sep_kv + value_text)
    tail = draw(st.sampled_from(["", "\n", " \r\n", "\t"]))
    return ("{" + sep_item.join(items) + "}" + tail).encode("utf-8", "surrogatepass")


@pytest.mark.c_ext
@settings(max_examples=examples(600), deadline=None)
@given(json_headers(), body)
@example(b'{"code":true,"code":1}', None)
@example(b'{"extFields":{"a":[]},"extFields":{}}', None)
@example(b'{"\\n\xff":1}', None)
@example(b'{"code":"' + b"0" * 5000 + b'1"}', None)
@example(b'{"code":"' + b"1" * 5000 + b'"}', None)
@example(b'{"extFields":{"a":' + b"1" * 5000 + b"}}", None)
@example(b'{"extFields":{"a":"1","a":null}}', None)
@example(b'{"extFields":{"a":[],"a":null}}', None)
@example(b'{"extFields":{"":"\\ud800","":null}}', None)
@example(b'{"extFields":{"z":-0,"y":-0.0,"x":1E400}}', None)
def test_twins_decode_json_headers_alike(header: bytes, b) -> None:
    py, c = _twins()
    f = frame(header, b or b"")
    assert _outcome(py, f) == _outcome(c, f)


@pytest.mark.c_ext
@settings(max_examples=examples(400), deadline=None)
@given(code=st.integers(-(2**32), 2**32), ext_=st.one_of(st.none(), st.lists(st.tuples(nasty_text, json_scalar),
                                                                              max_size=8)),
       lang=st.sampled_from(["JAVA", "CPP", "PYTHON", "NODE_JS", "COBOL", ""]), remark=st.one_of(st.none(), nasty_text),
       ser=st.sampled_from(['"JSON"', '"ROCKETMQ"', '"X"', "null", None]), tail=st.sampled_from(["", "\n", " x"]),
       ascii_only=st.booleans())
def test_twins_agree_on_the_java_layout(code, ext_, lang, remark, ser, tail, ascii_only) -> None:
    """Headers in the exact key order Java and fastmq write (the compiled fast path), with hostile values."""
    py, c = _twins()

    def d(v) -> str:
        return json.dumps(v, ensure_ascii=ascii_only, separators=(",", ":"))

    parts = ['{"code":' + d(code)]
    if ext_ is not None:
        parts.append(',"extFields":{' + ",".join(d(k) + ":" + d(v) for k, v in ext_) + "}")
    parts.append(',"flag":0,"language":' + d(lang) + ',"opaque":7')
    if remark is not None:
        parts.append(',"remark":' + d(remark))
    if ser is not None:
        parts.append(',"serializeTypeCurrentRPC":' + ser)
    parts.append(',"version":409}' + tail)
    f = frame("".join(parts).encode("utf-8", "surrogatepass"))
    assert _outcome(py, f) == _outcome(c, f)


# values of hundreds to thousands of characters: plain runs with hostile characters between them
long_text = st.lists(st.one_of(st.text(st.sampled_from("abcXYZ019 _-#%"), min_size=1, max_size=90), nasty_text),
                     min_size=1, max_size=120).map("".join)


@pytest.mark.c_ext
@settings(max_examples=examples(200), deadline=None)
@given(values=st.lists(long_text, min_size=1, max_size=3), ascii_only=st.booleans())
@example(values=["KEYS\x01" + " ".join(f"{i:032X}" for i in range(300)) + "\x02WAIT\x01true\x02"], ascii_only=True)
@example(values=["x" * 511 + "\x01" + "y" * 600 + "\u00e9"], ascii_only=True)
@example(values=["\x01" * 600], ascii_only=True)
def test_twins_agree_on_long_escaped_values(values, ascii_only) -> None:
    """Header values longer than the compiled fast path's stack buffer (a trace message's KEYS
    run to kilobytes, escaped for their separators) read back alike, and as written."""
    py, c = _twins()
    ext_ = {chr(97 + i): v for i, v in enumerate(values)}
    header = ('{"code":310,"extFields":' + json.dumps(ext_, ensure_ascii=ascii_only, separators=(",", ":"))
              + ',"flag":0,"language":"JAVA","opaque":7,"serializeTypeCurrentRPC":"JSON","version":409}')
    f = frame(header.encode("utf-8"))
    assert _outcome(py, f) == _outcome(c, f)
    assert c.decode_frame(f).ext_fields == ext_


@pytest.mark.c_ext
@settings(max_examples=examples(400), deadline=None)
@given(data=st.data())
def test_twins_agree_on_mutated_frames(data) -> None:
    py, c = _twins()
    f = data.draw(mutated_frames(py))
    assert _outcome(py, f) == _outcome(c, f)


@pytest.mark.c_ext
@settings(max_examples=examples(400), deadline=None)
@given(st.binary(max_size=120), st.sampled_from([0, 1]))
def test_twins_agree_on_garbage_headers(header: bytes, st_: int) -> None:
    py, c = _twins()
    f = frame(header, b"", st_)
    assert _outcome(py, f) == _outcome(c, f)


@pytest.mark.c_ext
@settings(max_examples=examples(200), deadline=None)
@given(st.lists(st.binary(max_size=40), max_size=12), st.integers(1, 1 << 12))
def test_twins_agree_on_garbage_streams(chunks, max_frame) -> None:
    py, c = _twins()
    results = []
    for mod in (py, c):
        dec = mod.FrameDecoder(max_frame_size=max_frame)
        got = []
        try:
            for ch in chunks:
                got += [fields(x) for x in dec.feed(ch)]
        except FrameError:
            got.append(FrameError)
        results.append((got, dec.buffered()))
    assert results[0] == results[1]
