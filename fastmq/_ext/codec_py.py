"""RemotingCommand codec, pure-Python reference twin of ``codec_c``.

Wire layout of one frame (RocketMQ RemotingCommand, integers big-endian)::

    int32  total   = 4 + header_len + body_len   (these 4 bytes excluded)
    int32  mark    = (serialize_type << 24) | header_len
    bytes  header  JSON (serialize_type 0) or ROCKETMQ binary (1)
    bytes  body    the rest of the frame

JSON header (what fastjson and jsoncpp write; keys in this order on encode)::

    {"code":N,"extFields":{...},"flag":N,"language":"JAVA","opaque":N,
     "remark":"...","serializeTypeCurrentRPC":"JSON","version":N}

``extFields`` and ``remark`` are omitted when None. On decode, integer fields
may arrive as JSON numbers or as strings of digits (the C++ client mixes
both); ext field values of any scalar JSON type become ``str``; ``null`` ext
values are dropped, as a Java ``HashMap<String,String>`` would never send them.

ROCKETMQ binary header (RocketMQSerializable)::

    int16 code | int8 language | int16 version | int32 opaque | int32 flag |
    int32 remark_len + UTF-8 | int32 ext_len + (int16 klen, key, int32 vlen, value)*

In the binary form an empty remark or an empty ext map decodes as None, the
same normalisation Java applies.

Every malformed input raises :class:`fastmq.errors.FrameError`; values that
cannot be encoded raise :class:`fastmq.errors.RemotingCommandError`.
"""
from __future__ import annotations

import json
import struct
from typing import Any, Iterable

from ..errors import FrameError, RemotingCommandError
from ..protocol.codes import LANGUAGE_NAMES, LanguageCode
from ._protocols import DEFAULT_MAX_FRAME_SIZE, FLAG_ONEWAY, FLAG_RESPONSE, SERIALIZE_JSON, SERIALIZE_ROCKETMQ

__all__ = ["RemotingCommand", "FrameDecoder", "encode_frame", "encode_frames", "decode_frame", "settle_responses",
           "LANGUAGE_NAMES", "MAX_HEADER_LENGTH"]

_LANGUAGE_BY_NAME = {name: i for i, name in enumerate(LANGUAGE_NAMES)}
_OTHER = int(LanguageCode.OTHER)
_SERIALIZE_NAMES = ("JSON", "ROCKETMQ")

#: The header length shares its word with the serialize type: 24 bits.
MAX_HEADER_LENGTH = 0xFFFFFF

_INT32_MIN, _INT32_MAX = -(1 << 31), (1 << 31) - 1
_ASCII_WS = " \t\n\r\x0b\x0c"
_json_encoder = json.JSONEncoder(ensure_ascii=False, separators=(",", ":"), check_circular=False)
_json_decoder = json.JSONDecoder()
_BIN_FIXED = struct.Struct(">hbhii")
_I32 = struct.Struct(">i")
_U32 = struct.Struct(">I")
_I16 = struct.Struct(">h")


class RemotingCommand:
    """One RocketMQ request or response (see ``_protocols.RemotingCommandProto``)."""

    __slots__ = ("code", "language", "version", "opaque", "flag", "remark", "ext_fields", "serialize_type", "body")

    def __init__(self, code: int = 0, *, language: int = 3, version: int = 409, opaque: int = 0, flag: int = 0,
                 remark: str | None = None, ext_fields: dict[str, str] | None = None, serialize_type: int = 0,
                 body: bytes | None = None) -> None:
        self.code = code
        self.language = language
        self.version = version
        self.opaque = opaque
        self.flag = flag
        self.remark = remark
        self.ext_fields = ext_fields
        self.serialize_type = serialize_type
        self.body = body

    @property
    def is_response(self) -> bool:
        return bool(self.flag & FLAG_RESPONSE)

    @property
    def is_oneway(self) -> bool:
        return bool(self.flag & FLAG_ONEWAY)

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, RemotingCommand):
            return NotImplemented
        return all(getattr(self, s) == getattr(other, s) for s in self.__slots__)

    __hash__ = None  # type: ignore[assignment]  # mutable

    def __repr__(self) -> str:
        kind = "response" if self.is_response else "request"
        blen = len(self.body) if self.body is not None else 0
        return (f"<RemotingCommand {kind} code={self.code} opaque={self.opaque} flag={self.flag} "
                f"remark={self.remark!r} ext={self.ext_fields!r} body={blen}B>")


# --------------------------------------------------------------------- encode

def _check_int(name: str, v: object, lo: int = _INT32_MIN, hi: int = _INT32_MAX) -> int:
    if type(v) is not int and not isinstance(v, int) or isinstance(v, bool):
        raise RemotingCommandError(f"{name} must be an int, not {type(v).__name__}")
    if not lo <= v <= hi:
        raise RemotingCommandError(f"{name} {v} out of range [{lo}, {hi}]")
    return int(v)  # an IntEnum prints as its name on some Pythons


def _check_ext(ext: object) -> dict[str, str]:
    if not isinstance(ext, dict):
        raise RemotingCommandError(f"ext_fields must be a dict, not {type(ext).__name__}")
    for k, v in ext.items():
        if type(k) is not str or type(v) is not str:
            raise RemotingCommandError(f"ext_fields entries must be str -> str, got {k!r}: {v!r}")
    return ext


def _encode_json_header(cmd: RemotingCommand) -> bytes:
    lang = _check_int("language", cmd.language, 0, 255)
    lang_name = LANGUAGE_NAMES[lang] if lang < len(LANGUAGE_NAMES) else "OTHER"
    parts = ['{"code":', str(_check_int("code", cmd.code))]
    if cmd.ext_fields is not None:
        parts.append(',"extFields":')
        parts.append(_json_encoder.encode(_check_ext(cmd.ext_fields)))
    parts += [',"flag":', str(_check_int("flag", cmd.flag)), ',"language":"', lang_name,
              '","opaque":', str(_check_int("opaque", cmd.opaque))]
    if cmd.remark is not None:
        if type(cmd.remark) is not str:
            raise RemotingCommandError(f"remark must be a str, not {type(cmd.remark).__name__}")
        parts.append(',"remark":')
        parts.append(_json_encoder.encode(cmd.remark))
    parts += [',"serializeTypeCurrentRPC":"', _SERIALIZE_NAMES[cmd.serialize_type], '","version":',
              str(_check_int("version", cmd.version)), "}"]
    try:
        return "".join(parts).encode("utf-8")
    except UnicodeEncodeError as exc:
        raise RemotingCommandError(f"header text is not encodable as UTF-8: {exc.reason}") from None


def _utf8(name: str, s: str) -> bytes:
    try:
        return s.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise RemotingCommandError(f"{name} is not encodable as UTF-8: {exc.reason}") from None


def _encode_binary_header(cmd: RemotingCommand) -> bytes:
    out = bytearray(_BIN_FIXED.pack(_check_int("code", cmd.code, -32768, 32767),
                                    _check_int("language", cmd.language, 0, 127),
                                    _check_int("version", cmd.version, -32768, 32767),
                                    _check_int("opaque", cmd.opaque), _check_int("flag", cmd.flag)))
    if cmd.remark:
        if type(cmd.remark) is not str:
            raise RemotingCommandError(f"remark must be a str, not {type(cmd.remark).__name__}")
        r = _utf8("remark", cmd.remark)
        out += _I32.pack(len(r))
        out += r
    else:
        out += b"\0\0\0\0"
    if cmd.ext_fields:
        ext = bytearray()
        for k, v in _check_ext(cmd.ext_fields).items():
            kb, vb = _utf8("ext_fields key", k), _utf8("ext_fields value", v)
            if len(kb) > 32767:
                raise RemotingCommandError(f"ext_fields key of {len(kb)} bytes is over 32767")
            ext += _I16.pack(len(kb))
            ext += kb
            ext += _I32.pack(len(vb))
            ext += vb
        out += _I32.pack(len(ext))
        out += ext
    else:
        out += b"\0\0\0\0"
    return bytes(out)


def encode_frame(cmd: RemotingCommand) -> bytes:
    """The whole frame of ``cmd``, length prefix included, in ``cmd.serialize_type``."""
    st = cmd.serialize_type
    if st == SERIALIZE_JSON:
        header = _encode_json_header(cmd)
    elif st == SERIALIZE_ROCKETMQ:
        header = _encode_binary_header(cmd)
    else:
        raise RemotingCommandError(f"unknown serialize type {st!r}")
    body: object = cmd.body  # callers may hand any object here; it is checked below
    blen = 0
    if body is not None:
        if not isinstance(body, (bytes, bytearray, memoryview)):
            raise RemotingCommandError(f"body must be bytes, not {type(body).__name__}")
        blen = body.nbytes if type(body) is memoryview else len(body)  # len() counts items, not bytes
    hlen = len(header)
    if hlen > MAX_HEADER_LENGTH:
        raise RemotingCommandError(f"header of {hlen} bytes is over {MAX_HEADER_LENGTH}")
    total = 4 + hlen + blen
    if total > 0x7FFFFFFF:
        raise RemotingCommandError(f"frame of {total} bytes is too large")
    prefix = _U32.pack(total) + _U32.pack((st << 24) | hlen)
    if blen and body is not None:  # blen > 0 only for a body; the test narrows its type
        return b"".join((prefix, header, body))
    return prefix + header


def encode_frames(cmds: Iterable[RemotingCommand]) -> bytes:
    """All frames of ``cmds`` concatenated: one buffer for one socket write."""
    return b"".join([encode_frame(c) for c in cmds])


# --------------------------------------------------------------------- decode

def _int_field(obj: dict[str, Any], name: str, default: int) -> int:
    v = obj.get(name)
    if v is None:
        return default
    if type(v) is int:
        pass
    elif type(v) is str:
        s = v.strip(_ASCII_WS)
        # int() alone would also take "1_0" and non-ASCII digits; Java would not.
        sign = s[:1] if s[:1] in ("+", "-") else ""
        body = s[len(sign):]
        if not body or not body.isascii() or not body.isdigit():
            raise FrameError(f"header field {name!r} is not an integer: {v!r}")
        digits = body.lstrip("0") or "0"
        if len(digits) > 10:  # and int() of thousands of digits raises ValueError, not FrameError
            raise FrameError(f"header field {name!r} out of int32 range: {s[:40]!r}")
        v = int(sign + digits)
    elif type(v) is _FloatText and v[-1:].isdigit() and "." not in v and "e" not in v.lower():
        raise FrameError(f"header field {name!r} out of int32 range: {v[:40]}")
    else:
        raise FrameError(f"header field {name!r} must be a number, not {type(v).__name__}")
    if not _INT32_MIN <= v <= _INT32_MAX:
        raise FrameError(f"header field {name!r} out of int32 range: {v}")
    return v


class _FloatText(str):
    """A JSON number with a fraction or exponent (or too many digits for ``int()``), kept as its
    own text (an ext field "1.50" stays "1.50"); its own type so that a typed field (code,
    remark...) can still tell it is no string."""


def _parse_float(text: str) -> str:
    return _FloatText(text)


def _parse_int(text: str) -> int | str:
    # int() of more than sys.get_int_max_str_digits() digits (640 at the least) raises
    # ValueError; no int32 field is that long, and an ext value keeps its text anyway.
    return int(text) if len(text) <= 640 else _FloatText(text)


def _parse_constant(name: str) -> object:
    raise FrameError(f"invalid JSON constant {name} in header")


_strict_decoder = json.JSONDecoder(parse_float=_parse_float, parse_constant=_parse_constant)
# Only for a header whose numbers int() refuses: a hook on every int would slow every frame.
_big_int_decoder = json.JSONDecoder(parse_float=_parse_float, parse_int=_parse_int, parse_constant=_parse_constant)


def _no_lone_surrogates(s: str) -> None:
    try:
        s.encode("utf-8")
    except UnicodeEncodeError:
        raise FrameError("header has a lone UTF-16 surrogate escape") from None


def _decode_json_header(header: bytes | memoryview, body: bytes | None) -> RemotingCommand:
    try:
        text = bytes(header).decode("utf-8")
    except UnicodeDecodeError as exc:
        raise FrameError(f"header is not valid UTF-8: {exc.reason} at byte {exc.start}") from None
    try:
        try:
            obj = _strict_decoder.decode(text)
        except json.JSONDecodeError:
            raise
        except ValueError:  # int() of too many digits (sys.get_int_max_str_digits)
            obj = _big_int_decoder.decode(text)
    except json.JSONDecodeError as exc:
        raise FrameError(f"header is not valid JSON: {exc.msg} at char {exc.pos}") from None
    except RecursionError:
        raise FrameError("header JSON nests too deeply") from None
    if type(obj) is not dict:
        raise FrameError(f"header JSON must be an object, not {type(obj).__name__}")
    check_surrogates = "\\u" in text and ("\\ud" in text or "\\uD" in text)
    lang = obj.get("language")
    if lang is None:
        language = 0
    elif type(lang) is str:
        language = _LANGUAGE_BY_NAME.get(lang, _OTHER)
    elif type(lang) is int and 0 <= lang <= 255:
        language = lang
    else:
        raise FrameError(f"header field 'language' must be a name, not {lang!r}")
    remark = obj.get("remark")
    if remark is not None:
        if type(remark) is not str:
            raise FrameError(f"header field 'remark' must be a string, not {type(remark).__name__}")
        if check_surrogates:
            _no_lone_surrogates(remark)
    ext = obj.get("extFields")
    ext_fields: dict[str, str] | None = None
    if ext is not None:
        if type(ext) is not dict:
            raise FrameError(f"header field 'extFields' must be an object, not {type(ext).__name__}")
        ext_fields = {}
        for k, v in ext.items():
            t = type(v)
            if t is str:
                pass
            elif t is _FloatText:
                v = str(v)
            elif t is int:
                v = str(v)
            elif t is bool:
                v = "true" if v else "false"
            elif v is None:
                continue
            else:
                raise FrameError(f"extFields value of {k!r} must be a scalar, not {t.__name__}")
            if check_surrogates:
                _no_lone_surrogates(k)
                _no_lone_surrogates(v)
            ext_fields[k] = v
    return RemotingCommand(_int_field(obj, "code", 0), language=language, version=_int_field(obj, "version", 0),
                           opaque=_int_field(obj, "opaque", 0), flag=_int_field(obj, "flag", 0), remark=remark,
                           ext_fields=ext_fields, serialize_type=SERIALIZE_JSON, body=body)


def _utf8_field(name: str, raw: bytes | memoryview) -> str:
    try:
        return bytes(raw).decode("utf-8")
    except UnicodeDecodeError as exc:
        raise FrameError(f"{name} is not valid UTF-8: {exc.reason}") from None


def _decode_binary_header(h: memoryview, body: bytes | None) -> RemotingCommand:
    n = len(h)
    if n < _BIN_FIXED.size + 8:
        raise FrameError(f"binary header of {n} bytes is shorter than its fixed part")
    code, language, version, opaque, flag = _BIN_FIXED.unpack_from(h, 0)
    if language < 0:
        raise FrameError(f"binary header language {language} is negative")
    pos = _BIN_FIXED.size
    rlen, = _I32.unpack_from(h, pos)
    pos += 4
    if rlen < 0 or rlen > n - pos - 4:
        raise FrameError(f"binary header remark length {rlen} runs past the header")
    remark = _utf8_field("remark", h[pos:pos + rlen]) if rlen else None
    pos += rlen
    elen, = _I32.unpack_from(h, pos)
    pos += 4
    if elen < 0 or elen != n - pos:
        raise FrameError(f"binary header ext length {elen} does not match the {n - pos} bytes left")
    ext_fields: dict[str, str] | None = None
    if elen:
        ext_fields = {}
        while pos < n:
            if n - pos < 2:
                raise FrameError("binary ext field truncated in its key length")
            klen, = _I16.unpack_from(h, pos)
            pos += 2
            if klen < 0 or klen > n - pos - 4:
                raise FrameError(f"binary ext key length {klen} runs past the header")
            key = _utf8_field("ext key", h[pos:pos + klen])
            pos += klen
            vlen, = _I32.unpack_from(h, pos)
            pos += 4
            if vlen < 0 or vlen > n - pos:
                raise FrameError(f"binary ext value length {vlen} runs past the header")
            ext_fields[key] = _utf8_field("ext value", h[pos:pos + vlen])
            pos += vlen
    return RemotingCommand(code, language=language, version=version, opaque=opaque, flag=flag, remark=remark,
                           ext_fields=ext_fields, serialize_type=SERIALIZE_ROCKETMQ, body=body)


def _decode_payload(buf: memoryview, start: int, total: int) -> RemotingCommand:
    """Decode the frame whose mark word is at ``start`` and whose length field said ``total``."""
    mark, = _U32.unpack_from(buf, start)
    st = mark >> 24
    hlen = mark & 0xFFFFFF
    if hlen > total - 4:
        raise FrameError(f"header length {hlen} runs past the frame of {total} bytes")
    hstart = start + 4
    bstart = hstart + hlen
    bend = start + total
    body = bytes(buf[bstart:bend]) if bend > bstart else None
    if st == SERIALIZE_JSON:
        return _decode_json_header(buf[hstart:bstart], body)
    if st == SERIALIZE_ROCKETMQ:
        return _decode_binary_header(buf[hstart:bstart], body)
    raise FrameError(f"unknown serialize type {st}")


def _check_total(total: int, max_frame_size: int) -> None:
    if total < 4:
        raise FrameError(f"frame length {total} is shorter than its header-length word")
    if total > max_frame_size:
        raise FrameError(f"frame length {total} exceeds the maximum of {max_frame_size}")


def decode_frame(frame: bytes | bytearray | memoryview, max_frame_size: int = DEFAULT_MAX_FRAME_SIZE
                 ) -> RemotingCommand:
    """Decode one whole frame (length prefix included); it must be exactly one frame."""
    buf = memoryview(frame).cast("B")
    if len(buf) < 8:
        raise FrameError(f"frame of {len(buf)} bytes is truncated")
    total, = _U32.unpack_from(buf, 0)
    _check_total(total, max_frame_size)
    if total != len(buf) - 4:
        raise FrameError(f"frame length field says {total} but {len(buf) - 4} bytes follow it")
    return _decode_payload(buf, 4, total)


class FrameDecoder:
    """Push decoder: ``feed`` socket chunks, get the whole commands they complete.

    Holds at most one partial frame. Bytes already buffered are copied once
    more at most per frame (into the bytearray), so a frame arriving in many
    small chunks costs linear, not quadratic, time.
    """

    __slots__ = ("max_frame_size", "_buf", "_need", "_error")

    def __init__(self, max_frame_size: int = DEFAULT_MAX_FRAME_SIZE) -> None:
        self.max_frame_size = max_frame_size
        self._buf = bytearray()
        self._need = 0  # bytes the buffered partial frame still lacks (0: unknown yet)
        self._error: FrameError | None = None

    def buffered(self) -> int:
        """Bytes held for a frame not yet complete."""
        return len(self._buf)

    def feed(self, data: bytes | bytearray | memoryview) -> list[RemotingCommand]:
        if self._error is not None:
            raise self._error
        try:
            return self._feed(data)
        except FrameError as exc:
            self._error = exc
            self._buf = bytearray()
            raise

    def _feed(self, data: bytes | bytearray | memoryview) -> list[RemotingCommand]:
        buf = self._buf
        if buf:
            buf += data
            if self._need and len(buf) < self._need:
                return []  # still short of the frame we know the size of: nothing to parse
            view = memoryview(buf)
        else:
            view = memoryview(data).cast("B")
        out: list[RemotingCommand] = []
        pos, n, mx = 0, len(view), self.max_frame_size
        try:
            while n - pos >= 4:
                total, = _U32.unpack_from(view, pos)
                _check_total(total, mx)
                if n - pos - 4 < total:
                    break
                out.append(_decode_payload(view, pos + 4, total))
                pos += 4 + total
            if not buf and pos < n:
                self._buf = buf = bytearray(view[pos:])
                pos = 0
        finally:
            view.release()  # a bytearray with a live export cannot be resized
        if pos:
            if pos == len(buf):
                self._buf = buf = bytearray()  # nothing partial left: hold no buffer (see codec_c)
            else:
                del buf[:pos]
        self._need = 4 + _U32.unpack_from(buf, 0)[0] if len(buf) >= 4 else 0
        return out


def settle_responses(cmds: list[RemotingCommand], pending: dict[int, Any]
                     ) -> tuple[list[RemotingCommand] | None, list[int] | None]:
    """Hand each response of ``cmds`` (one socket read's commands) to its pending entry.

    A response's entry is popped from ``pending`` by opaque and, unless already answered, given the
    response (``entry.on_response(cmd)``). Returns the requests among ``cmds`` and the opaques of
    responses nobody waits for any more (each None when there are none).
    """
    requests: list[RemotingCommand] | None = None
    unmatched: list[int] | None = None
    for cmd in cmds:
        if cmd.flag & FLAG_RESPONSE:
            entry = pending.pop(cmd.opaque, None)
            if entry is None:
                if unmatched is None:
                    unmatched = []
                unmatched.append(cmd.opaque)
            elif not entry.answered():
                entry.on_response(cmd)
        elif requests is None:
            requests = [cmd]
        else:
            requests.append(cmd)
    return requests, unmatched

