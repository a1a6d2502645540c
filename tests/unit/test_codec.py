"""RemotingCommand codec, example by example, for both twins (the ``codec`` fixture runs py and c).

Properties and the twins' agreement are in test_codec_hypothesis.py; the recorded C++ client
frames in test_wire_vectors.py.
"""
from __future__ import annotations

import json
import struct
from enum import IntEnum

import pytest

from fastmq.errors import FrameError, RemotingCommandError

MiB = 1024 * 1024


def frame(header: bytes, body: bytes = b"", st: int = 0) -> bytes:
    return struct.pack(">II", 4 + len(header) + len(body), (st << 24) | len(header)) + header + body


def binary_header(code=1, lang=0, version=1, opaque=1, flag=0, remark=b"", ext=b"") -> bytes:
    return (struct.pack(">hbhii", code, lang, version, opaque, flag) + struct.pack(">i", len(remark)) + remark
            + struct.pack(">i", len(ext)) + ext)


def fields(c) -> tuple:
    return (c.code, c.language, c.version, c.opaque, c.flag, c.remark, c.ext_fields, c.serialize_type, c.body)


# ------------------------------------------------------------------ the command object

def test_defaults_and_flags(codec) -> None:
    c = codec.RemotingCommand(10)
    assert fields(c) == (10, 3, 409, 0, 0, None, None, 0, None)
    assert not c.is_response and not c.is_oneway
    c.flag = 3
    assert c.is_response and c.is_oneway
    assert "response" in repr(c) and "code=10" in repr(c)


def test_equality_is_by_value(codec) -> None:
    a = codec.RemotingCommand(1, opaque=2, ext_fields={"k": "v"}, body=b"x")
    b = codec.RemotingCommand(1, opaque=2, ext_fields={"k": "v"}, body=b"x")
    assert a == b and not (a != b)
    b.opaque = 3
    assert a != b
    assert a != "a string"
    with pytest.raises(TypeError):
        hash(a)


def test_int_fields_at_the_int32_bounds_are_kept(codec) -> None:
    lo, hi = -(2**31), 2**31 - 1
    for v in (lo, -1, 0, hi):  # (-1: the compiled check's error value, which must not read as one)
        c = codec.RemotingCommand(v, opaque=v, flag=0, version=v)
        back = codec.FrameDecoder().feed(codec.encode_frame(c))[0]
        assert (back.code, back.opaque, back.version) == (v, v, v)


def test_int_enums_are_accepted_and_written_as_numbers(codec) -> None:
    class Code(IntEnum):
        SEND = 10

    f = codec.encode_frame(codec.RemotingCommand(Code.SEND, opaque=Code.SEND))
    assert f[8:].startswith(b'{"code":10,') and b'"opaque":10,' in f


@pytest.mark.parametrize("kw, msg", [
    ({"code": 2**31}, "code 2147483648 out of range"),
    ({"code": 2**70}, "code 1180591620717411303424 out of range"),  # past a C long long too
    ({"opaque": -(2**64)}, "opaque -18446744073709551616 out of range"),
    ({"opaque": -(2**31) - 1}, "opaque"),
    ({"code": True}, "code must be an int, not bool"),
    ({"flag": "1"}, "flag must be an int, not str"),
    ({"version": 1.0}, "version must be an int, not float"),
    ({"serialize_type": 5}, "serialize type"),
    ({"serialize_type": "JSON"}, "serialize"),
    ({"ext_fields": {"a": 1}}, "str -> str"),
    ({"ext_fields": {1: "a"}}, "str -> str"),
    ({"ext_fields": [("a", "b")]}, "ext_fields must be a dict"),
    ({"remark": 5}, "remark must be a str"),
    ({"remark": "\ud800"}, "UTF-8"),
    ({"ext_fields": {"k": "\udfff"}}, "UTF-8"),
    ({"language": 300}, "language"),
    ({"language": -1}, "language"),
    ({"body": "text"}, "body must be bytes"),
])
def test_unencodable_commands_raise_remoting_command_error(codec, kw, msg) -> None:
    # The compiled twin refuses a bad int when it is set, the reference when it is encoded:
    # both raise RemotingCommandError before a byte is written.
    with pytest.raises(RemotingCommandError, match=msg):
        codec.encode_frame(codec.RemotingCommand(**{"code": 1, **kw}))


@pytest.mark.parametrize("kw", [{"code": 40000}, {"version": -40000}, {"language": 128},
                                {"ext_fields": {"k" * 40000: "v"}}])
def test_binary_narrow_fields(codec, kw) -> None:
    with pytest.raises(RemotingCommandError):
        codec.encode_frame(codec.RemotingCommand(**{"code": 1, "serialize_type": 1, **kw}))
    if "ext_fields" not in kw:
        codec.encode_frame(codec.RemotingCommand(**{"code": 1, **kw}))  # JSON has room


def test_encode_rejects_non_commands(codec) -> None:
    with pytest.raises((TypeError, AttributeError)):
        codec.encode_frame(None)
    with pytest.raises((TypeError, AttributeError)):
        codec.encode_frames([codec.RemotingCommand(1), None])


# ------------------------------------------------------------------ JSON layout, both ways

def test_json_header_is_written_like_java(codec) -> None:
    c = codec.RemotingCommand(310, language=0, version=409, opaque=7, remark="hi",
                              ext_fields={"b": "TopicTest", "a": "group"}, body=b"payload")
    f = codec.encode_frame(c)
    total, mark = struct.unpack(">II", f[:8])
    header = f[8:8 + mark]
    assert total == len(f) - 4 and mark >> 24 == 0 and f.endswith(b"payload")
    assert header == (b'{"code":310,"extFields":{"b":"TopicTest","a":"group"},"flag":0,"language":"JAVA",'
                      b'"opaque":7,"remark":"hi","serializeTypeCurrentRPC":"JSON","version":409}')


def test_json_escapes_match_json_dumps(codec) -> None:
    nasty = 'q"b\\s/n\nr\rt\tb\bf\f\x00\x01\x1f\x7f é€😀 \u2028'
    c = codec.RemotingCommand(1, remark=nasty, ext_fields={nasty: nasty, "i": "TAGS\x01a\x02KEYS\x01k"})
    header = codec.encode_frame(c)[8:]
    enc = json.JSONEncoder(ensure_ascii=False, separators=(",", ":"))
    assert enc.encode(nasty).encode("utf-8") in header
    assert b'"TAGS\\u0001a\\u0002KEYS\\u0001k"' in header
    assert codec.decode_frame(codec.encode_frame(c)) == c


def test_language_names(codec) -> None:
    for n, name in enumerate(codec.LANGUAGE_NAMES):
        assert f'"language":"{name}"'.encode() in codec.encode_frame(codec.RemotingCommand(1, language=n))
        assert codec.decode_frame(frame(b'{"language":"%s"}' % name.encode())).language == n
    assert b'"language":"OTHER"' in codec.encode_frame(codec.RemotingCommand(1, language=200))
    assert codec.decode_frame(frame(b'{"language":"COBOL"}')).language == 7
    assert codec.decode_frame(frame(b'{"language":3}')).language == 3


def test_cpp_client_header(codec) -> None:
    """jsoncpp: sorted keys, ints among the ext strings, remark "", a trailing newline."""
    header = (b'{"code":10,"extFields":{"batch":false,"bornTimestamp":1700000000123,"flag":0,'
              b'"properties":"TAGS\\u0001tagA\\u0002KEYS\\u0001k1\\u0002","queueId":3,"x":null,"f":1.50,'
              b'"z":-0,"e":1E3},"flag":0,"language":"CPP","opaque":"7","remark":"","version":63}\n')
    c = codec.decode_frame(frame(header, b"hello"))
    assert fields(c) == (10, 1, 63, 7, 0, "", {"batch": "false", "bornTimestamp": "1700000000123", "flag": "0",
                                               "properties": "TAGS\x01tagA\x02KEYS\x01k1\x02", "queueId": "3",
                                               "f": "1.50", "z": "0", "e": "1E3"}, 0, b"hello")


@pytest.mark.parametrize("text, value", [(b'"12"', 12), (b'" -5 "', -5), (b'"+7"', 7), (b'"\\u0031"', 1),
                                         (b'"000000000000000000000000042"', 42), (b"-0", 0), (b"null", 0),
                                         (b"2147483647", 2**31 - 1), (b'"-2147483648"', -(2**31))])
def test_int_fields_as_numbers_or_strings(codec, text, value) -> None:
    assert codec.decode_frame(frame(b'{"opaque":' + text + b"}")).opaque == value


def test_unicode_and_surrogate_pairs(codec) -> None:
    c = codec.decode_frame(frame('{"remark":"é\\u00e9\\ud83d\\ude00😀","extFields":{"ключ":"值"}}'.encode()))
    assert c.remark == "éé😀😀" and c.ext_fields == {"ключ": "值"}


def test_unknown_keys_and_escaped_known_keys(codec) -> None:
    c = codec.decode_frame(frame(b' { "co\\u0064e" : 12 , "unknown":{"deep":[1,{"x":null},"\\ud800",-1.5e3,true]},'
                                 b'"other":"x\\"y", "extFields" : { } } \r\n\t'))
    assert (c.code, c.remark, c.ext_fields, c.language) == (12, None, {}, 0)


def test_repeated_keys_last_one_wins(codec) -> None:
    """As json.loads: a later value replaces an earlier one, even an earlier one of the wrong type."""
    c = codec.decode_frame(frame(b'{"code":true,"code":5,"remark":1,"remark":"r","extFields":{"a":[]},'
                                 b'"extFields":{"a":"1","a":null,"b":"2","b":"3"}}'))
    assert (c.code, c.remark, c.ext_fields) == (5, "r", {"b": "3"})
    with pytest.raises(FrameError):
        codec.decode_frame(frame(b'{"code":5,"code":true}'))


def test_huge_numbers_are_frame_errors_or_text(codec) -> None:
    many = b"9" * 5000
    with pytest.raises(FrameError):
        codec.decode_frame(frame(b'{"code":' + many + b"}"))
    with pytest.raises(FrameError):
        codec.decode_frame(frame(b'{"code":"' + many + b'"}'))
    assert codec.decode_frame(frame(b'{"extFields":{"n":' + many + b"}}")).ext_fields == {"n": many.decode()}


# ------------------------------------------------------------------ ROCKETMQ binary header

def test_binary_layout_both_ways(codec) -> None:
    c = codec.RemotingCommand(310, language=0, version=409, opaque=7, flag=2, remark="ré",
                              ext_fields={"a": "1", "ключ": ""}, serialize_type=1, body=b"B")
    f = codec.encode_frame(c)
    ext = b"".join(struct.pack(">h", len(k)) + k + struct.pack(">i", len(v)) + v
                   for k, v in ((b"a", b"1"), ("ключ".encode(), b"")))
    assert f == frame(binary_header(310, 0, 409, 7, 2, "ré".encode(), ext), b"B", st=1)
    assert codec.decode_frame(f) == c


def test_binary_empty_remark_and_ext_read_back_as_none(codec) -> None:
    c = codec.decode_frame(codec.encode_frame(codec.RemotingCommand(1, remark="", ext_fields={}, serialize_type=1)))
    assert (c.remark, c.ext_fields, c.serialize_type) == (None, None, 1)


def test_response_keeps_the_serialize_type_of_its_request(codec) -> None:
    req = codec.decode_frame(codec.encode_frame(codec.RemotingCommand(10, opaque=9, serialize_type=1)))
    resp = codec.RemotingCommand(0, opaque=req.opaque, flag=1, serialize_type=req.serialize_type)
    assert codec.encode_frame(resp)[4] == 1


# ------------------------------------------------------------------ bad input

BAD_FRAMES = [
    pytest.param(struct.pack(">II", 2, 0), id="total-below-4"),
    pytest.param(struct.pack(">II", 16 * MiB + 1, 0), id="total-over-16MiB"),
    pytest.param(struct.pack(">II", 0xFFFFFFFF, 0), id="total-4GiB"),
    pytest.param(struct.pack(">II", 8, 5) + b"{}{}", id="header-past-frame"),
    pytest.param(struct.pack(">II", 4, 0xFFFFFF), id="header-len-max"),
    pytest.param(frame(b"{}", st=2), id="unknown-serialize-type-2"),
    pytest.param(frame(b"{}", st=0xFF), id="unknown-serialize-type-255"),
    pytest.param(frame(b""), id="empty-json-header"),
    pytest.param(frame(b'{"code":1'), id="json-truncated"),
    pytest.param(frame(b'{"code":1}x'), id="json-extra-data"),
    pytest.param(frame(b'{"code":1}{}'), id="json-two-objects"),
    pytest.param(frame(b'{"a":1,}'), id="json-trailing-comma"),
    pytest.param(frame(b"{'code':1}"), id="json-single-quotes"),
    pytest.param(frame(b'{code:1}'), id="json-unquoted-key"),
    pytest.param(frame(b'{"code":NaN}'), id="json-nan"),
    pytest.param(frame(b'{"extFields":{"a":Infinity}}'), id="json-infinity"),
    pytest.param(frame(b'{"code":012}'), id="json-leading-zero"),
    pytest.param(frame(b'{"code":1.}'), id="json-bad-fraction"),
    pytest.param(frame(b'{"code":-}'), id="json-lone-minus"),
    pytest.param(frame(b'{"remark":"\\x"}'), id="json-bad-escape"),
    pytest.param(frame(b'{"remark":"\\u12"}'), id="json-short-u-escape"),
    pytest.param(frame(b'{"remark":"\\u12g4"}'), id="json-bad-hex"),
    pytest.param(frame(b'{"remark":"a\nb"}'), id="raw-newline-in-string"),
    pytest.param(frame(b'{"extFields":{"k":"\x01"}}'), id="raw-control-char-in-ext"),
    pytest.param(frame(b'{"unknown":"\x1f"}'), id="raw-control-char-in-skipped"),
    pytest.param(frame(b'{"remark":"\\ud800"}'), id="lone-high-surrogate"),
    pytest.param(frame(b'{"extFields":{"k":"\\udc00x"}}'), id="lone-low-surrogate"),
    pytest.param(frame(b'{"extFields":{"\\ud83dx":"v"}}'), id="lone-surrogate-in-key"),
    pytest.param(frame(b'{"remark":"\xff"}'), id="invalid-utf8"),
    pytest.param(frame(b'{"remark":"\xc3("}'), id="invalid-utf8-continuation"),
    pytest.param(frame(b'{"remark":"\xed\xa0\x80"}'), id="utf8-encoded-surrogate"),
    pytest.param(frame(b'{"skipped":"\xc3"}'), id="invalid-utf8-in-skipped"),
    pytest.param(frame(b'{"\\n\xff":1}'), id="invalid-utf8-in-escaped-key"),
    pytest.param(frame(b'\xef\xbb\xbf{}'), id="utf8-bom"),
    pytest.param(frame(b"[1,2]"), id="not-an-object"),
    pytest.param(frame(b'"code"'), id="a-string"),
    pytest.param(frame(b"[" * 100000), id="deep-nesting"),
    pytest.param(frame(b'{"x":' + b"[" * 5000 + b"]" * 5000 + b"}"), id="deep-but-closed"),
    pytest.param(frame(b'{"code":"12a"}'), id="code-not-digits"),
    pytest.param(frame(b'{"code":"1_0"}'), id="code-underscore"),
    pytest.param(frame('{"code":"١٢"}'.encode()), id="code-arabic-digits"),
    pytest.param(frame(b'{"code":""}'), id="code-empty-string"),
    pytest.param(frame(b'{"code":1.5}'), id="code-float"),
    pytest.param(frame(b'{"code":1e2}'), id="code-exponent"),
    pytest.param(frame(b'{"code":true}'), id="code-bool"),
    pytest.param(frame(b'{"code":[1]}'), id="code-list"),
    pytest.param(frame(b'{"opaque":4294967296}'), id="opaque-over-int32"),
    pytest.param(frame(b'{"flag":"-2147483649"}'), id="flag-string-under-int32"),
    pytest.param(frame(b'{"language":1.5}'), id="language-float"),
    pytest.param(frame(b'{"language":256}'), id="language-over-255"),
    pytest.param(frame(b'{"language":["CPP"]}'), id="language-list"),
    pytest.param(frame(b'{"remark":5}'), id="remark-number"),
    pytest.param(frame(b'{"remark":{}}'), id="remark-object"),
    pytest.param(frame(b'{"extFields":[]}'), id="ext-list"),
    pytest.param(frame(b'{"extFields":"a=b"}'), id="ext-string"),
    pytest.param(frame(b'{"extFields":{"a":{"b":1}}}'), id="ext-nested-object"),
    pytest.param(frame(b'{"extFields":{"a":[1]}}'), id="ext-nested-list"),
    pytest.param(frame(b"\x00\x01\x00", st=1), id="binary-short"),
    pytest.param(frame(binary_header(remark=b"x")[:-3], st=1), id="binary-truncated-ext-length"),
    pytest.param(frame(struct.pack(">hbhii", 1, 0, 1, 1, 0) + struct.pack(">i", 100) + b"\0\0\0\0", st=1),
                 id="binary-remark-past-end"),
    pytest.param(frame(struct.pack(">hbhii", 1, 0, 1, 1, 0) + struct.pack(">i", -1) + b"\0\0\0\0", st=1),
                 id="binary-remark-negative"),
    pytest.param(frame(binary_header() + b"\0", st=1), id="binary-ext-length-mismatch"),
    pytest.param(frame(binary_header(ext=b"\x00"), st=1), id="binary-ext-key-length-cut"),
    pytest.param(frame(binary_header(ext=b"\x00\x09ab\0\0\0\0"), st=1), id="binary-ext-key-past-end"),
    pytest.param(frame(binary_header(ext=b"\xff\xffab\0\0\0\0"), st=1), id="binary-ext-key-negative"),
    pytest.param(frame(binary_header(ext=b"\x00\x01a\0\0\0\x09b"), st=1), id="binary-ext-value-past-end"),
    pytest.param(frame(binary_header(lang=-1), st=1), id="binary-negative-language"),
    pytest.param(frame(binary_header(remark=b"\xff"), st=1), id="binary-remark-invalid-utf8"),
    pytest.param(frame(binary_header(ext=b"\x00\x01\xff\0\0\0\0"), st=1), id="binary-key-invalid-utf8"),
    pytest.param(frame(binary_header(ext=b"\x00\x01a\0\0\0\x01\xc3"), st=1), id="binary-value-invalid-utf8"),
]


@pytest.mark.parametrize("data", BAD_FRAMES)
def test_bad_frames_raise_frame_error_and_poison_the_decoder(codec, data: bytes) -> None:
    with pytest.raises(FrameError):
        codec.decode_frame(data)
    dec = codec.FrameDecoder()
    with pytest.raises(FrameError) as first:
        dec.feed(data + b"\0" * 8 if len(data) == 8 else data)
    with pytest.raises(FrameError) as again:  # poisoned: the same error from now on
        dec.feed(codec.encode_frame(codec.RemotingCommand(1)))
    assert again.value is first.value
    assert dec.buffered() == 0


@pytest.mark.parametrize("data", [b"", b"\0\0\0", b"\0\0\0\x10\0\0\0\x02{}",
                                  frame(b'{"code":1}')[:-1], frame(b'{"code":1}', b"body")[:-1]])
def test_truncated_frames(codec, data: bytes) -> None:
    with pytest.raises(FrameError):
        codec.decode_frame(data)
    dec = codec.FrameDecoder()
    assert dec.feed(data) == [] and dec.buffered() == len(data)  # the push decoder waits for the rest


def test_decode_frame_wants_exactly_one_frame(codec) -> None:
    one = frame(b"{}")
    with pytest.raises(FrameError, match="follow"):
        codec.decode_frame(one + one)


def test_max_frame_size_is_configurable(codec) -> None:
    f = codec.encode_frame(codec.RemotingCommand(1, body=b"x" * 2000))
    with pytest.raises(FrameError, match="exceeds the maximum of 1000"):
        codec.FrameDecoder(max_frame_size=1000).feed(f)
    with pytest.raises(FrameError, match="exceeds the maximum of 1000"):
        codec.decode_frame(f, max_frame_size=1000)
    assert len(codec.FrameDecoder(max_frame_size=4096).feed(f)) == 1
    assert codec.FrameDecoder().max_frame_size == 16 * MiB
    # the limit is seen on the length prefix alone, before any body is buffered
    with pytest.raises(FrameError, match="exceeds"):
        codec.FrameDecoder(max_frame_size=1000).feed(f[:4])


def test_oversized_prefix_split_across_reads_is_refused_and_nothing_kept(codec) -> None:
    """Guards against buffering a frame that will be refused: a length prefix arriving in two
    reads is judged as soon as its fourth byte lands, and the refused stream keeps no bytes."""
    f = codec.encode_frame(codec.RemotingCommand(1, body=b"x" * 2000))
    dec = codec.FrameDecoder(max_frame_size=1000)
    assert dec.feed(f[:2]) == [] and dec.buffered() == 2
    with pytest.raises(FrameError, match="exceeds the maximum of 1000"):
        dec.feed(f[2:4])
    assert dec.buffered() == 0
    with pytest.raises(FrameError):  # the stream stays refused
        dec.feed(b"")


def test_frame_of_exactly_the_maximum(codec) -> None:
    f = codec.encode_frame(codec.RemotingCommand(1, body=b"x" * 100))
    limit = len(f) - 4
    assert codec.decode_frame(f, max_frame_size=limit).body == b"x" * 100
    with pytest.raises(FrameError):
        codec.decode_frame(f, max_frame_size=limit - 1)


# ------------------------------------------------------------------ the push decoder

def test_one_feed_decodes_every_whole_frame(codec) -> None:
    cmds = [codec.RemotingCommand(i, opaque=i, body=bytes(i) or None, serialize_type=i % 2) for i in range(50)]
    stream = codec.encode_frames(cmds)
    dec = codec.FrameDecoder()
    out = dec.feed(stream + stream[:10])
    assert out == cmds and dec.buffered() == 10
    assert dec.feed(stream[10:]) == cmds
    assert dec.buffered() == 0


@pytest.mark.parametrize("kind", [bytes, bytearray, memoryview])
def test_feed_takes_any_buffer(codec, kind) -> None:
    f = codec.encode_frame(codec.RemotingCommand(5, body=b"abc"))
    dec = codec.FrameDecoder()
    assert dec.feed(kind(f[:3])) == []
    assert [c.body for c in dec.feed(kind(f[3:]))] == [b"abc"]


def test_feed_does_not_keep_a_view_of_the_callers_buffer(codec) -> None:
    buf = bytearray(codec.encode_frame(codec.RemotingCommand(5, body=b"abc")) * 2)
    dec = codec.FrameDecoder()
    out = dec.feed(memoryview(buf)[:-2])
    buf[:] = b"\0" * len(buf)  # the caller reuses its read buffer
    buf.extend(b"x")  # and may resize it: no export may be left behind
    rest = codec.encode_frame(codec.RemotingCommand(5, body=b"abc"))[-2:]
    assert [c.body for c in out + dec.feed(rest)] == [b"abc", b"abc"]


def test_a_big_frame_in_small_chunks(codec) -> None:
    body = bytes(range(256)) * 4096  # 1 MiB
    f = codec.encode_frame(codec.RemotingCommand(1, body=body))
    dec = codec.FrameDecoder()
    out = []
    for i in range(0, len(f), 1000):
        out += dec.feed(f[i:i + 1000])
        assert dec.buffered() <= len(f)
    assert len(out) == 1 and out[0].body == body and dec.buffered() == 0


def test_empty_feed(codec) -> None:
    dec = codec.FrameDecoder()
    assert dec.feed(b"") == [] and dec.buffered() == 0


def test_encode_frames_is_the_concatenation(codec) -> None:
    cmds = [codec.RemotingCommand(i, remark=str(i), serialize_type=i % 2) for i in range(5)]
    assert codec.encode_frames(cmds) == b"".join(codec.encode_frame(c) for c in cmds)
    assert codec.encode_frames(iter(cmds)) == codec.encode_frames(cmds)
    assert codec.encode_frames([]) == b""


class _Entry:
    def __init__(self, done: bool = False) -> None:
        self.got: list[object] = []
        self._done = done

    def answered(self) -> bool:
        return self._done

    def on_response(self, cmd: object) -> None:
        self.got.append(cmd)


def test_settle_responses_hands_each_answer_to_its_entry(codec) -> None:
    """One socket read's commands: responses go to their pending entries (popped), done entries
    are left alone, unknown opaques are reported, requests come back in order."""
    req1 = codec.RemotingCommand(10, opaque=7)
    req2 = codec.RemotingCommand(11, opaque=8, flag=2)   # oneway: still a request
    waiting, finished = _Entry(), _Entry(done=True)
    pending = {1: waiting, 2: finished, 3: _Entry()}
    r1 = codec.RemotingCommand(0, opaque=1, flag=1)
    r2 = codec.RemotingCommand(0, opaque=2, flag=1)
    lost = codec.RemotingCommand(0, opaque=99, flag=1)
    requests, unmatched = codec.settle_responses([req1, r1, lost, r2, req2], pending)
    assert requests == [req1, req2] and unmatched == [99]
    assert waiting.got == [r1] and finished.got == [] and list(pending) == [3]
    assert codec.settle_responses([], pending) == (None, None)
    assert codec.settle_responses([codec.RemotingCommand(0, opaque=3, flag=1)], pending) == (None, None)
    assert pending == {}
