# cython: language_level=3, embedsignature=True
"""RemotingCommand codec, compiled twin of ``codec_py`` (read that module for the contract).

Wire layout of one frame (RocketMQ RemotingCommand, integers big-endian)::

    int32  total   = 4 + header_len + body_len   (these 4 bytes excluded)
    int32  mark    = (serialize_type << 24) | header_len
    bytes  header  JSON (serialize_type 0) or ROCKETMQ binary (1)
    bytes  body    the rest of the frame

The JSON header is read by a hand-written scanner: no ``json`` module and no intermediate
objects on the hot path. Strings without escapes become ``str`` straight from the frame bytes;
the one-letter keys of SEND_MESSAGE_V2 and the usual header keys come from a table of interned
strings instead of being allocated per frame. The encoder writes exactly the bytes ``codec_py``
writes (same key order, same escapes), which the differential tests check.

Where the reference leans on ``json.loads`` the scanner reproduces its rules: a repeated key
keeps its last value (so a wrong-typed value is an error only if no later one replaces it, and
only once the whole text has proved to be JSON), lone surrogate escapes are an error only in the
remark and in the ext entries that survive, raw control characters in strings are an error, and
numbers of any length are scanned without ``int()`` (whose digit limit would raise ValueError).
"""
cimport cython
from cpython.bytes cimport PyBytes_AS_STRING, PyBytes_FromStringAndSize
from cpython.buffer cimport PyBUF_SIMPLE, PyObject_GetBuffer, PyBuffer_Release
from cpython.dict cimport PyDict_SetItem
from cpython.unicode cimport PyUnicode_DecodeUTF8, PyUnicode_AsUTF8String
from libc.stdlib cimport malloc, realloc, free
from libc.string cimport memcpy, memmove, memcmp
from libc.stdint cimport uint8_t, uint32_t, int64_t, uint64_t

from fastmq.errors import FrameError, RemotingCommandError

from cpython.object cimport PyObject
from cpython.ref cimport Py_INCREF, Py_XDECREF

cdef extern from "Python.h":
    object PyUnicode_FromKindAndData(int kind, const void *buffer, Py_ssize_t size)
    object PyUnicode_New(Py_ssize_t size, unsigned int maxchar)
    void* PyUnicode_1BYTE_DATA(object o)
    Py_ssize_t PyUnicode_GET_LENGTH(object o)
    dict _PyDict_NewPresized(Py_ssize_t minused)
    Py_ssize_t PyDict_GET_SIZE(object d)
    int PyUnicode_1BYTE_KIND
    bint PyUnicode_IS_ASCII(object o)

__all__ = ["RemotingCommand", "FrameDecoder", "encode_frame", "encode_frames", "decode_frame",
           "LANGUAGE_NAMES", "MAX_HEADER_LENGTH"]

LANGUAGE_NAMES = ("JAVA", "CPP", "DOTNET", "PYTHON", "DELPHI", "ERLANG", "RUBY", "OTHER",
                  "HTTP", "GO", "PHP", "OMS", "RUST", "NODE_JS")
MAX_HEADER_LENGTH = 0xFFFFFF
DEF_MAX_FRAME = 16 * 1024 * 1024

cdef enum:
    SER_JSON = 0
    SER_ROCKETMQ = 1
    LANG_OTHER = 7
    N_LANGS = 14

cdef int64_t I32_MIN = -2147483648
cdef int64_t I32_MAX = 2147483647

cdef tuple _LANG_BYTES = tuple(n.encode("ascii") for n in LANGUAGE_NAMES)
cdef const char* _LANG_C[14]
cdef Py_ssize_t _LANG_LEN[14]
for _i in range(14):
    _LANG_C[_i] = PyBytes_AS_STRING(<bytes>_LANG_BYTES[_i])  # the tuple keeps the bytes alive
    _LANG_LEN[_i] = len(<bytes>_LANG_BYTES[_i])
# The one-letter keys of SEND_MESSAGE_V2 come from this table instead of being allocated per frame.
cdef list _LETTERS = [chr(ord("a") + i) for i in range(26)]
cdef PyObject* _LETTER_P[26]
for _i in range(26):
    _LETTER_P[_i] = <PyObject*>_LETTERS[_i]  # the list keeps them alive


cdef int _as_i32(str name, object v) except? -1:
    """An int field's value: a Python int (IntEnum too, bool not) within int32."""
    if type(v) is not int and (not isinstance(v, int) or isinstance(v, bool)):
        raise RemotingCommandError(f"{name} must be an int, not {type(v).__name__}")
    if not I32_MIN <= v <= I32_MAX:
        raise RemotingCommandError(f"{name} {v} out of range [{I32_MIN}, {I32_MAX}]")
    return <int>v


@cython.final
@cython.freelist(256)
cdef class RemotingCommand:
    """One RocketMQ request or response (see ``_protocols.RemotingCommandProto``).

    The int fields live as C ints, so decoding a header allocates no int objects; setting one
    to a non-int or to a value outside int32 raises RemotingCommandError at once (the reference
    twin raises the same error when the command is encoded).
    """

    cdef int _code
    cdef int _language
    cdef int _version
    cdef int _opaque
    cdef int _flag
    cdef public object remark
    cdef public object ext_fields
    cdef int _serialize_type
    cdef public object body

    def __init__(self, code=0, *, language=3, version=409, opaque=0, flag=0, remark=None, ext_fields=None,
                 serialize_type=0, body=None):
        self._code = _as_i32("code", code)
        self._language = _as_i32("language", language)
        self._version = _as_i32("version", version)
        self._opaque = _as_i32("opaque", opaque)
        self._flag = _as_i32("flag", flag)
        self.remark = remark
        self.ext_fields = ext_fields
        self._serialize_type = _as_i32("serialize_type", serialize_type)
        self.body = body

    @property
    def code(self):
        return self._code

    @code.setter
    def code(self, v):
        self._code = _as_i32("code", v)

    @property
    def language(self):
        return self._language

    @language.setter
    def language(self, v):
        self._language = _as_i32("language", v)

    @property
    def version(self):
        return self._version

    @version.setter
    def version(self, v):
        self._version = _as_i32("version", v)

    @property
    def opaque(self):
        return self._opaque

    @opaque.setter
    def opaque(self, v):
        self._opaque = _as_i32("opaque", v)

    @property
    def flag(self):
        return self._flag

    @flag.setter
    def flag(self, v):
        self._flag = _as_i32("flag", v)

    @property
    def serialize_type(self):
        return self._serialize_type

    @serialize_type.setter
    def serialize_type(self, v):
        self._serialize_type = _as_i32("serialize_type", v)

    @property
    def is_response(self):
        return bool(self._flag & 1)

    @property
    def is_oneway(self):
        return bool(self._flag & 2)

    def __eq__(self, other):
        if not isinstance(other, RemotingCommand):
            return NotImplemented
        cdef RemotingCommand o = other
        return (self._code == o._code and self._language == o._language and self._version == o._version
                and self._opaque == o._opaque and self._flag == o._flag and self.remark == o.remark
                and self.ext_fields == o.ext_fields and self._serialize_type == o._serialize_type
                and self.body == o.body)

    __hash__ = None

    def __repr__(self):
        kind = "response" if self._flag & 1 else "request"
        blen = len(self.body) if self.body is not None else 0
        return (f"<RemotingCommand {kind} code={self._code} opaque={self._opaque} flag={self._flag} "
                f"remark={self.remark!r} ext={self.ext_fields!r} body={blen}B>")


cdef inline RemotingCommand _new_cmd():
    return RemotingCommand.__new__(RemotingCommand)


# ====================================================================== output buffer

cdef struct Buf:
    char* data
    Py_ssize_t len
    Py_ssize_t cap


cdef int _reserve(Buf* b, Py_ssize_t extra) except -1:
    cdef Py_ssize_t need = b.len + extra
    cdef Py_ssize_t cap
    cdef char* p
    if need <= b.cap:
        return 0
    cap = b.cap * 2 if b.cap else 256
    while cap < need:
        cap *= 2
    p = <char*>realloc(b.data, cap)
    if p == NULL:
        raise MemoryError()
    b.data = p
    b.cap = cap
    return 0


cdef inline int _put(Buf* b, const char* s, Py_ssize_t n) except -1:
    if b.len + n > b.cap:
        _reserve(b, n)
    memcpy(b.data + b.len, s, n)
    b.len += n
    return 0


cdef inline int _putc(Buf* b, char c) except -1:
    if b.len + 1 > b.cap:
        _reserve(b, 1)
    b.data[b.len] = c
    b.len += 1
    return 0


cdef int _put_int(Buf* b, int64_t v) except -1:
    cdef char tmp[24]
    cdef int i = 24
    cdef uint64_t u
    cdef bint neg = v < 0
    u = <uint64_t>(-(v + 1)) + 1 if neg else <uint64_t>v
    if u == 0:
        i -= 1
        tmp[i] = b"0"
    while u:
        i -= 1
        tmp[i] = <char>(48 + <int>(u % 10))
        u //= 10
    if neg:
        i -= 1
        tmp[i] = b"-"
    return _put(b, tmp + i, 24 - i)


cdef const char* _HEX = b"0123456789abcdef"


cdef int _put_json_str(Buf* b, str s) except -1:
    """A JSON string literal with json.dumps(ensure_ascii=False)'s escapes."""
    cdef bytes u
    cdef const unsigned char* p
    cdef Py_ssize_t n, i, start = 0
    cdef unsigned char c
    if PyUnicode_IS_ASCII(s):  # nearly every header string: its own bytes are its UTF-8
        p = <const unsigned char*>PyUnicode_1BYTE_DATA(s)
        n = PyUnicode_GET_LENGTH(s)
    else:
        try:
            u = PyUnicode_AsUTF8String(s)
        except UnicodeEncodeError as exc:
            raise RemotingCommandError(f"header text is not encodable as UTF-8: {exc.reason}") from None
        p = <const unsigned char*>PyBytes_AS_STRING(u)
        n = len(u)
    _reserve(b, n + 2)
    _putc(b, b'"')
    for i in range(n):
        c = p[i]
        if c >= 0x20 and c != 34 and c != 92:
            continue
        if i > start:
            _put(b, <const char*>p + start, i - start)
        start = i + 1
        if c == 34:
            _put(b, b'\\"', 2)
        elif c == 92:
            _put(b, b"\\\\", 2)
        elif c == 10:
            _put(b, b"\\n", 2)
        elif c == 13:
            _put(b, b"\\r", 2)
        elif c == 9:
            _put(b, b"\\t", 2)
        elif c == 8:
            _put(b, b"\\b", 2)
        elif c == 12:
            _put(b, b"\\f", 2)
        else:
            _put(b, b"\\u00", 4)
            _putc(b, _HEX[c >> 4])
            _putc(b, _HEX[c & 15])
    if n > start:
        _put(b, <const char*>p + start, n - start)
    _putc(b, b'"')
    return 0


cdef inline int64_t _check_int(str name, int64_t v, int64_t lo, int64_t hi) except? -1:
    # the fields are C ints already (int32); only narrower wire fields need a check
    if v < lo or v > hi:
        raise RemotingCommandError(f"{name} {v} out of range [{lo}, {hi}]")
    return v


cdef dict _check_ext(object ext):
    if not isinstance(ext, dict):
        raise RemotingCommandError(f"ext_fields must be a dict, not {type(ext).__name__}")
    for k, v in (<dict>ext).items():
        if type(k) is not str or type(v) is not str:
            raise RemotingCommandError(f"ext_fields entries must be str -> str, got {k!r}: {v!r}")
    return <dict>ext


cdef int _encode_json_header(Buf* b, RemotingCommand cmd) except -1:
    cdef int64_t lang = _check_int("language", cmd._language, 0, 255)
    cdef int64_t code = _check_int("code", cmd._code, I32_MIN, I32_MAX)
    cdef bytes lname
    cdef dict ext
    cdef bint first
    _put(b, b'{"code":', 8)
    _put_int(b, code)
    if cmd.ext_fields is not None:
        ext = _check_ext(cmd.ext_fields)
        _put(b, b',"extFields":{', 14)
        first = True
        for k, v in ext.items():
            if not first:
                _putc(b, b",")
            first = False
            _put_json_str(b, <str>k)
            _putc(b, b":")
            _put_json_str(b, <str>v)
        _putc(b, b"}")
    _put(b, b',"flag":', 8)
    _put_int(b, _check_int("flag", cmd._flag, I32_MIN, I32_MAX))
    _put(b, b',"language":"', 13)
    lname = <bytes>_LANG_BYTES[lang] if lang < N_LANGS else b"OTHER"
    _put(b, PyBytes_AS_STRING(lname), len(lname))
    _put(b, b'","opaque":', 11)
    _put_int(b, _check_int("opaque", cmd._opaque, I32_MIN, I32_MAX))
    if cmd.remark is not None:
        if type(cmd.remark) is not str:
            raise RemotingCommandError(f"remark must be a str, not {type(cmd.remark).__name__}")
        _put(b, b',"remark":', 10)
        _put_json_str(b, <str>cmd.remark)
    if cmd._serialize_type == SER_JSON:
        _put(b, b',"serializeTypeCurrentRPC":"JSON","version":', 44)
    else:
        _put(b, b',"serializeTypeCurrentRPC":"ROCKETMQ","version":', 48)
    _put_int(b, _check_int("version", cmd._version, I32_MIN, I32_MAX))
    _putc(b, b"}")
    return 0


cdef inline void _be32(char* p, uint32_t v) noexcept:
    p[0] = <char>(v >> 24)
    p[1] = <char>(v >> 16)
    p[2] = <char>(v >> 8)
    p[3] = <char>v


cdef inline void _be16(char* p, uint32_t v) noexcept:
    p[0] = <char>(v >> 8)
    p[1] = <char>v


cdef bytes _utf8(str name, object s):
    try:
        return PyUnicode_AsUTF8String(s)
    except UnicodeEncodeError as exc:
        raise RemotingCommandError(f"{name} is not encodable as UTF-8: {exc.reason}") from None


cdef int _put_bin_str(Buf* b, str name, object s, int width) except -1:
    """Length (int16 or int32, big-endian) and UTF-8 of ``s``; ASCII strings without a copy."""
    cdef char tmp[4]
    cdef bytes u = None
    cdef const char* p
    cdef Py_ssize_t n
    if PyUnicode_IS_ASCII(s):
        p = <const char*>PyUnicode_1BYTE_DATA(s)
        n = PyUnicode_GET_LENGTH(s)
    else:
        u = _utf8(name, s)
        p = PyBytes_AS_STRING(u)
        n = len(u)
    if width == 2:
        if n > 32767:
            raise RemotingCommandError(f"ext_fields key of {n} bytes is over 32767")
        _be16(tmp, <uint32_t>n)
    else:
        _be32(tmp, <uint32_t>n)
    _put(b, tmp, width)
    _put(b, p, n)
    return 0


cdef int _encode_binary_header(Buf* b, RemotingCommand cmd) except -1:
    cdef char tmp[13]
    cdef int64_t code = _check_int("code", cmd._code, -32768, 32767)
    cdef int64_t lang = _check_int("language", cmd._language, 0, 127)
    cdef int64_t version = _check_int("version", cmd._version, -32768, 32767)
    cdef int64_t opaque = _check_int("opaque", cmd._opaque, I32_MIN, I32_MAX)
    cdef int64_t flag = _check_int("flag", cmd._flag, I32_MIN, I32_MAX)
    cdef Py_ssize_t ext_len_pos, start
    _be16(tmp, <uint32_t>code)
    tmp[2] = <char>lang
    _be16(tmp + 3, <uint32_t>version)
    _be32(tmp + 5, <uint32_t>opaque)
    _be32(tmp + 9, <uint32_t>flag)
    _put(b, tmp, 13)
    if cmd.remark:
        if type(cmd.remark) is not str:
            raise RemotingCommandError(f"remark must be a str, not {type(cmd.remark).__name__}")
        _put_bin_str(b, "remark", cmd.remark, 4)
    else:
        _put(b, b"\0\0\0\0", 4)
    ext_len_pos = b.len
    _put(b, b"\0\0\0\0", 4)
    if cmd.ext_fields:
        start = b.len
        for k, v in _check_ext(cmd.ext_fields).items():
            _put_bin_str(b, "ext_fields key", k, 2)
            _put_bin_str(b, "ext_fields value", v, 4)
        _be32(b.data + ext_len_pos, <uint32_t>(b.len - start))
    return 0


cdef int _encode_into(Buf* b, RemotingCommand cmd) except -1:
    """Append the whole frame of ``cmd`` to ``b``."""
    cdef Py_ssize_t frame_start = b.len
    cdef Py_ssize_t hstart, hlen, blen = 0, total
    cdef Py_buffer view
    cdef int sti = cmd._serialize_type
    if sti != SER_JSON and sti != SER_ROCKETMQ:
        raise RemotingCommandError(f"unknown serialize type {sti!r}")
    body = cmd.body
    if body is not None and not isinstance(body, (bytes, bytearray, memoryview)):
        raise RemotingCommandError(f"body must be bytes, not {type(body).__name__}")
    _put(b, b"\0\0\0\0\0\0\0\0", 8)
    hstart = b.len
    try:
        if sti == SER_JSON:
            _encode_json_header(b, cmd)
        else:
            _encode_binary_header(b, cmd)
    except BaseException:
        b.len = frame_start
        raise
    hlen = b.len - hstart
    if hlen > MAX_HEADER_LENGTH:
        b.len = frame_start
        raise RemotingCommandError(f"header of {hlen} bytes is over {MAX_HEADER_LENGTH}")
    if body is not None:
        PyObject_GetBuffer(body, &view, PyBUF_SIMPLE)
        try:
            blen = view.len
            total = 4 + hlen + blen
            if total > 0x7FFFFFFF:
                b.len = frame_start
                raise RemotingCommandError(f"frame of {total} bytes is too large")
            _put(b, <const char*>view.buf, blen)
        finally:
            PyBuffer_Release(&view)
    total = 4 + hlen + blen
    _be32(b.data + frame_start, <uint32_t>total)
    _be32(b.data + frame_start + 4, (<uint32_t>sti << 24) | <uint32_t>hlen)
    return 0


def encode_frame(RemotingCommand cmd not None):
    """The whole frame of ``cmd``, length prefix included, in ``cmd._serialize_type``."""
    cdef Buf b
    b.data = NULL
    b.len = 0
    b.cap = 0
    try:
        _encode_into(&b, cmd)
        return PyBytes_FromStringAndSize(b.data, b.len)
    finally:
        free(b.data)


def encode_frames(cmds):
    """All frames of ``cmds`` concatenated: one buffer for one socket write."""
    cdef Buf b
    b.data = NULL
    b.len = 0
    b.cap = 0
    try:
        for cmd in cmds:
            if type(cmd) is not RemotingCommand:
                raise TypeError(f"encode_frames takes RemotingCommand objects, not {type(cmd).__name__}")
            _encode_into(&b, <RemotingCommand>cmd)
        return PyBytes_FromStringAndSize(b.data, b.len)
    finally:
        free(b.data)


# ====================================================================== JSON scanner

cdef struct Scan:
    const unsigned char* p
    const unsigned char* end
    bint saw_surrogate_escape


cdef inline void _ws(Scan* s) noexcept:
    while s.p < s.end and (s.p[0] == 32 or s.p[0] == 10 or s.p[0] == 13 or s.p[0] == 9):
        s.p += 1


cdef object _err(Scan* s, const unsigned char* base, str what):
    raise FrameError(f"header is not valid JSON: {what} at byte {<Py_ssize_t>(s.p - base)}")


cdef signed char _HEXV[256]
for _i in range(256):
    _HEXV[_i] = (_i - 48 if 48 <= _i <= 57 else _i - 87 if 97 <= _i <= 102 else _i - 55 if 65 <= _i <= 70 else -1)


cdef inline int _hex4(const unsigned char* p) noexcept:
    cdef int a = _HEXV[p[0]], b2 = _HEXV[p[1]], c = _HEXV[p[2]], d = _HEXV[p[3]]
    if (a | b2 | c | d) < 0:
        return -1
    return (a << 12) | (b2 << 8) | (c << 4) | d


# Byte classes inside a JSON string: 0 plain ASCII, 1 quote, 2 backslash, 3 control, 4 non-ASCII.
cdef unsigned char _SCLASS[256]
for _i in range(256):
    _SCLASS[_i] = 3 if _i < 0x20 else 1 if _i == 34 else 2 if _i == 92 else 4 if _i >= 0x80 else 0


cdef inline bint _special8(uint64_t x) noexcept:
    cdef uint64_t ones = 0x0101010101010101ULL
    cdef uint64_t high = 0x8080808080808080ULL
    cdef uint64_t q = x ^ 0x2222222222222222ULL
    cdef uint64_t b = x ^ 0x5C5C5C5C5C5C5C5CULL
    return ((x | ((q - ones) & ~q) | ((b - ones) & ~b) | ((x - 0x2020202020202020ULL) & ~x)) & high) != 0


cdef struct StrTok:
    const unsigned char* start   # first byte after the opening quote
    Py_ssize_t n                 # raw length between the quotes
    bint escaped
    bint non_ascii


cdef int _scan_string(Scan* s, const unsigned char* base, StrTok* t) except -1:
    """Find the extent of the string at s.p (which is at the opening quote); validate escapes."""
    cdef const unsigned char* p = s.p + 1
    cdef const unsigned char* end = s.end
    cdef unsigned char c, k
    cdef uint64_t x
    t.start = p
    t.escaped = False
    t.non_ascii = False
    while p < end:
        # Eight bytes at a time while none is a quote, a backslash, a control byte or non-ASCII.
        while end - p >= 8:
            memcpy(&x, p, 8)
            if _special8(x):
                break
            p += 8
        if p >= end:
            break
        k = _SCLASS[p[0]]
        if k == 0:
            p += 1
            continue
        if k == 1:
            t.n = p - t.start
            s.p = p + 1
            return 0
        if k == 2:
            t.escaped = True
            if p + 1 >= end:
                break
            c = p[1]
            if c == 117:
                if p + 6 > end or _hex4(p + 2) < 0:
                    s.p = p
                    _err(s, base, "invalid \\uXXXX escape")
                p += 6
                continue
            if c != 34 and c != 92 and c != 47 and c != 98 and c != 102 and c != 110 and c != 114 and c != 116:
                s.p = p
                _err(s, base, "invalid escape")
            p += 2
            continue
        if k == 3:
            s.p = p
            _err(s, base, "invalid control character in string")
        t.non_ascii = True
        p += 1
    s.p = p
    _err(s, base, "unterminated string")
    return -1


cdef inline Py_ssize_t _put_utf8(unsigned char* out, uint32_t cp) noexcept:
    if cp < 0x80:
        out[0] = <unsigned char>cp
        return 1
    if cp < 0x800:
        out[0] = <unsigned char>(0xC0 | (cp >> 6))
        out[1] = <unsigned char>(0x80 | (cp & 0x3F))
        return 2
    if cp < 0x10000:
        out[0] = <unsigned char>(0xE0 | (cp >> 12))
        out[1] = <unsigned char>(0x80 | ((cp >> 6) & 0x3F))
        out[2] = <unsigned char>(0x80 | (cp & 0x3F))
        return 3
    out[0] = <unsigned char>(0xF0 | (cp >> 18))
    out[1] = <unsigned char>(0x80 | ((cp >> 12) & 0x3F))
    out[2] = <unsigned char>(0x80 | ((cp >> 6) & 0x3F))
    out[3] = <unsigned char>(0x80 | (cp & 0x3F))
    return 4


cdef Py_ssize_t _unescape(StrTok* t, unsigned char* out, bint allow_lone) except -1:
    """Write the UTF-8 of an escaped string to ``out`` (never longer than the raw text).

    A lone surrogate escape is an error unless ``allow_lone`` (then it is written as its
    3-byte form, which can never equal an ASCII name).
    """
    cdef const unsigned char* p = t.start
    cdef const unsigned char* end = t.start + t.n
    cdef Py_ssize_t o = 0
    cdef int cp, lo
    cdef unsigned char c
    while p < end:
        c = p[0]
        if c != 92:
            out[o] = c
            o += 1
            p += 1
            continue
        c = p[1]
        if c == 117:
            cp = _hex4(p + 2)
            p += 6
            if 0xD800 <= cp <= 0xDBFF and p + 6 <= end and p[0] == 92 and p[1] == 117:
                lo = _hex4(p + 2)
                if 0xDC00 <= lo <= 0xDFFF:
                    cp = 0x10000 + ((cp - 0xD800) << 10) + (lo - 0xDC00)
                    p += 6
            if 0xD800 <= cp <= 0xDFFF and not allow_lone:
                raise FrameError("header has a lone UTF-16 surrogate escape")
            o += _put_utf8(out + o, <uint32_t>cp)
            continue
        if c == 110:
            out[o] = 10
        elif c == 116:
            out[o] = 9
        elif c == 114:
            out[o] = 13
        elif c == 98:
            out[o] = 8
        elif c == 102:
            out[o] = 12
        else:
            out[o] = c  # " \ /
        o += 1
        p += 2
    return o


cdef enum:
    SCACHE_SIZE = 1024
    SCACHE_MAXLEN = 40

# Header values repeat from frame to frame (producer group, topic, queue numbers, flags): short
# ASCII strings are looked up in a small direct-mapped cache before a new str is allocated. An
# entry keeps the string's first and last 8 bytes, which for up to 16 bytes is the whole string,
# so most hits cost two word compares and no memcmp.
cdef struct CacheEntry:
    PyObject* s
    uint64_t a
    uint64_t z
    Py_ssize_t n

cdef CacheEntry _scache[SCACHE_SIZE]


cdef inline object _new_ascii(const unsigned char* p, Py_ssize_t n):
    cdef object s = PyUnicode_New(n, 127)
    memcpy(PyUnicode_1BYTE_DATA(s), p, n)
    return s


cdef object _ascii_str(const unsigned char* p, Py_ssize_t n):
    """A str of n ASCII bytes; short ones come from (and go into) the cache."""
    cdef uint64_t a = 0, z = 0, h
    cdef CacheEntry* e
    cdef Py_ssize_t i
    if n > SCACHE_MAXLEN:
        return _new_ascii(p, n)
    if n >= 8:
        memcpy(&a, p, 8)
        memcpy(&z, p + n - 8, 8)
    else:
        for i in range(n):  # byte by byte: a partial memcpy here stalls the load that follows
            a = (a << 8) | p[i]
    h = (a * 0x9E3779B97F4A7C15ULL) ^ (z * 0xC2B2AE3D27D4EB4FULL) ^ (<uint64_t>n * 0x165667B19E3779F9ULL)
    e = &_scache[(h >> 40) & (SCACHE_SIZE - 1)]
    if e.s != NULL and e.n == n and e.a == a and e.z == z and (
            n <= 16 or _same(PyUnicode_1BYTE_DATA(<object>e.s), p, n)):
        return <object>e.s
    s = _new_ascii(p, n)
    Py_INCREF(s)
    Py_XDECREF(e.s)
    e.s = <PyObject*>s
    e.a = a
    e.z = z
    e.n = n
    return s


cdef object _utf8_str(const char* p, Py_ssize_t n):
    try:
        return PyUnicode_DecodeUTF8(p, n, "strict")
    except UnicodeDecodeError as exc:
        raise FrameError(f"header is not valid UTF-8: {exc.reason}") from None


cdef object _make_str(StrTok* t, bint* lone=NULL):
    """The str value of a scanned string; lone surrogate escapes are rejected, unless ``lone``
    is given: then they are kept in the str and ``lone[0]`` is set (the caller decides later,
    as json.loads + a check of what survives would)."""
    cdef unsigned char stack[512]
    cdef unsigned char* tmp
    cdef Py_ssize_t n, i
    cdef bint ascii
    if not t.escaped:
        if not t.non_ascii:
            return _ascii_str(t.start, t.n)
        return _utf8_str(<const char*>t.start, t.n)
    if t.n <= 512:
        tmp = stack
    else:
        tmp = <unsigned char*>malloc(t.n + 1)
    if tmp == NULL:
        raise MemoryError()
    try:
        if lone != NULL and t.non_ascii:
            _check_utf8(t)  # raw bytes strictly: below, surrogatepass must only let escapes through
        n = _unescape(t, tmp, lone != NULL)
        ascii = not t.non_ascii
        if ascii:
            for i in range(n):
                if tmp[i] >= 0x80:
                    ascii = False
                    break
        if ascii:
            return _new_ascii(tmp, n)
        if lone == NULL:
            return _utf8_str(<const char*>tmp, n)
        try:
            return PyUnicode_DecodeUTF8(<const char*>tmp, n, "strict")
        except UnicodeDecodeError:
            lone[0] = True
            return PyUnicode_DecodeUTF8(<const char*>tmp, n, "surrogatepass")
    finally:
        if tmp != stack:
            free(tmp)


cdef object _key_str(StrTok* t, bint* lone):
    """Like _make_str, but a one-letter key comes from the table of interned letters."""
    cdef unsigned char c
    if t.n == 1 and not t.escaped:
        c = t.start[0]
        if 97 <= c <= 122:
            return _LETTERS[c - 97]
    return _make_str(t, lone)


cdef int _check_utf8(StrTok* t) except -1:
    """Raw non-ASCII bytes of a skipped string must still be UTF-8 (the whole header must be)."""
    if t.non_ascii:
        _utf8_str(<const char*>t.start, t.n)
    return 0


cdef int _scan_number(Scan* s, const unsigned char* base, bint* is_int) except -1:
    """Advance over a JSON number; sets is_int when it has no fraction or exponent."""
    cdef const unsigned char* p = s.p
    cdef const unsigned char* end = s.end
    is_int[0] = True
    if p < end and p[0] == 45:
        p += 1
    if p >= end or not (48 <= p[0] <= 57):
        _err(s, base, "invalid number")
    if p[0] == 48:
        p += 1
    else:
        while p < end and 48 <= p[0] <= 57:
            p += 1
    if p < end and p[0] == 46:
        p += 1
        if p >= end or not (48 <= p[0] <= 57):
            s.p = p
            _err(s, base, "invalid number")
        while p < end and 48 <= p[0] <= 57:
            p += 1
        is_int[0] = False
    if p < end and (p[0] == 101 or p[0] == 69):
        p += 1
        if p < end and (p[0] == 43 or p[0] == 45):
            p += 1
        if p >= end or not (48 <= p[0] <= 57):
            s.p = p
            _err(s, base, "invalid number")
        while p < end and 48 <= p[0] <= 57:
            p += 1
        is_int[0] = False
    s.p = p
    return 0


cdef inline bint _lit(Scan* s, const char* word, Py_ssize_t n) noexcept:
    if s.end - s.p >= n and memcmp(s.p, word, n) == 0:
        s.p += n
        return True
    return False


cdef int _skip_value(Scan* s, const unsigned char* base, int depth) except -1:
    cdef StrTok t
    cdef bint is_int
    if depth > 500:
        _err(s, base, "nesting too deep")
    _ws(s)
    if s.p >= s.end:
        _err(s, base, "expected a value")
    cdef unsigned char c = s.p[0]
    if c == 34:
        _scan_string(s, base, &t)
        _check_utf8(&t)
    elif c == 123 or c == 91:
        s.p += 1
        _ws(s)
        if s.p < s.end and s.p[0] == (125 if c == 123 else 93):
            s.p += 1
            return 0
        while True:
            _ws(s)
            if c == 123:
                if s.p >= s.end or s.p[0] != 34:
                    _err(s, base, "expected a key")
                _scan_string(s, base, &t)
                _check_utf8(&t)
                _ws(s)
                if s.p >= s.end or s.p[0] != 58:
                    _err(s, base, "expected ':'")
                s.p += 1
            _skip_value(s, base, depth + 1)
            _ws(s)
            if s.p < s.end and s.p[0] == 44:
                s.p += 1
                continue
            if s.p < s.end and s.p[0] == (125 if c == 123 else 93):
                s.p += 1
                return 0
            _err(s, base, "expected ',' or a closing bracket")
    elif c == 45 or 48 <= c <= 57:
        _scan_number(s, base, &is_int)
    elif not (_lit(s, "true", 4) or _lit(s, "false", 5) or _lit(s, "null", 4)):
        _err(s, base, "unexpected character")
    return 0


cdef int64_t _digits(const unsigned char* p, Py_ssize_t n, bint* ok) noexcept:
    """Signed decimal (optional + or -) to int64; ok=False on junk or outside int32."""
    cdef bint neg = False
    cdef int64_t v = 0
    cdef Py_ssize_t i = 0
    ok[0] = False
    if n > 0 and (p[0] == 43 or p[0] == 45):
        neg = p[0] == 45
        i = 1
    if i >= n:
        return 0
    while i < n:
        if not (48 <= p[i] <= 57):
            return 0
        v = v * 10 + (p[i] - 48)
        if v > <int64_t>2147483648:
            return 0
        i += 1
    if neg:
        v = -v
    if v < I32_MIN or v > I32_MAX:
        return 0
    ok[0] = True
    return v


cdef int64_t _int_field(Scan* s, const unsigned char* base, str name, int64_t current) except? -9999999999:
    """code / flag / opaque / version: a JSON integer, a string of digits, or null (keep default)."""
    cdef StrTok t
    cdef bint is_int, ok
    cdef const unsigned char* start
    cdef const unsigned char* a
    cdef const unsigned char* b2
    cdef int64_t v
    _ws(s)
    if s.p >= s.end:
        _err(s, base, "expected a value")
    cdef unsigned char c = s.p[0]
    if c == 45 or 48 <= c <= 57:
        start = s.p
        _scan_number(s, base, &is_int)
        if not is_int:
            raise FrameError(f"header field {name!r} is not an integer: "
                             f"{bytes(start[:s.p - start]).decode('ascii')!r}")
        v = _digits(start, s.p - start, &ok)
        if not ok:
            raise FrameError(f"header field {name!r} out of int32 range: {bytes(start[:s.p - start]).decode()}")
        return v
    if c == 34:
        _scan_string(s, base, &t)
        if t.escaped or t.non_ascii:
            text = _make_str(&t)
            stripped = text.strip(" \t\n\r\x0b\x0c")
            if stripped.isascii():
                sb = stripped.encode("ascii")
                v = _digits(<const unsigned char*>PyBytes_AS_STRING(sb), len(sb), &ok)
                if ok:
                    return v
            raise FrameError(f"header field {name!r} is not an integer: {text!r}")
        a = t.start
        b2 = t.start + t.n
        while a < b2 and (a[0] == 32 or a[0] == 9 or a[0] == 10 or a[0] == 13 or a[0] == 11 or a[0] == 12):
            a += 1
        while b2 > a and (b2[-1] == 32 or b2[-1] == 9 or b2[-1] == 10 or b2[-1] == 13 or b2[-1] == 11
                          or b2[-1] == 12):
            b2 -= 1
        v = _digits(a, b2 - a, &ok)
        if not ok:
            text = PyUnicode_FromKindAndData(PyUnicode_1BYTE_KIND, t.start, t.n)
            stripped = text.strip(" \t\n\r\x0b\x0c")
            body = stripped[1:] if stripped[:1] in ("+", "-") else stripped
            if body and body.isdigit():  # no int(): a 5000-digit string would raise ValueError
                raise FrameError(f"header field {name!r} out of int32 range: {stripped[:40]!r}")
            raise FrameError(f"header field {name!r} is not an integer: {text!r}")
        return v
    if _lit(s, "null", 4):
        return current
    if _lit(s, "true", 4) or _lit(s, "false", 5):
        raise FrameError(f"header field {name!r} must be a number, not bool")
    if c == 123 or c == 91:
        _skip_value(s, base, 1)
        raise FrameError(f"header field {name!r} must be a number, not {'dict' if c == 123 else 'list'}")
    _err(s, base, "unexpected character")
    return current


cdef int _language(Scan* s, const unsigned char* base) except -1:
    cdef StrTok t
    cdef bint is_int, ok
    cdef const unsigned char* start
    cdef unsigned char* tmp
    cdef Py_ssize_t n, i
    cdef const unsigned char* name
    cdef int64_t v
    _ws(s)
    if s.p >= s.end:
        _err(s, base, "expected a value")
    cdef unsigned char c = s.p[0]
    if c == 34:
        _scan_string(s, base, &t)
        _check_utf8(&t)
        if not t.escaped:
            name = t.start
            n = t.n
            for i in range(N_LANGS):
                if len(<bytes>_LANG_BYTES[i]) == n and memcmp(PyBytes_AS_STRING(<bytes>_LANG_BYTES[i]), name, n) == 0:
                    return i
            return LANG_OTHER
        tmp = <unsigned char*>malloc(t.n + 1)
        if tmp == NULL:
            raise MemoryError()
        try:
            n = _unescape(&t, tmp, True)
            for i in range(N_LANGS):
                if len(<bytes>_LANG_BYTES[i]) == n and memcmp(PyBytes_AS_STRING(<bytes>_LANG_BYTES[i]), tmp, n) == 0:
                    return i
        finally:
            free(tmp)
        return LANG_OTHER
    if c == 45 or 48 <= c <= 57:
        start = s.p
        _scan_number(s, base, &is_int)
        if is_int:
            v = _digits(start, s.p - start, &ok)
            if ok and 0 <= v <= 255:
                return v
        raise FrameError(f"header field 'language' must be a name, not "
                         f"{bytes(start[:s.p - start]).decode('ascii')}")
    if _lit(s, "null", 4):
        return 0
    _skip_value(s, base, 1)
    raise FrameError("header field 'language' must be a name")


cdef object _scalar_text(Scan* s, const unsigned char* base, object key, bint* drop, bint* lone):
    """An extFields value as text: strings as they are, numbers by their JSON text (an integer
    normalised as Python's int() would print it), booleans as true/false; null is dropped."""
    cdef StrTok t
    cdef bint is_int
    cdef const unsigned char* start
    _ws(s)
    drop[0] = False
    if s.p >= s.end:
        _err(s, base, "expected a value")
    cdef unsigned char c = s.p[0]
    if c == 34:
        _scan_string(s, base, &t)
        return _make_str(&t, lone)
    if c == 45 or 48 <= c <= 57:
        start = s.p
        _scan_number(s, base, &is_int)
        if is_int and s.p - start == 2 and start[0] == 45 and start[1] == 48:
            return "0"  # -0 is int 0 to Python's json
        return PyUnicode_FromKindAndData(PyUnicode_1BYTE_KIND, start, s.p - start)
    if _lit(s, "true", 4):
        return "true"
    if _lit(s, "false", 5):
        return "false"
    if _lit(s, "null", 4):
        drop[0] = True
        return None
    if c == 123 or c == 91:
        _skip_value(s, base, 1)
        raise FrameError(f"extFields value of {key!r} must be a scalar, not {'dict' if c == 123 else 'list'}")
    _err(s, base, "unexpected character")


cdef int _no_lone_surrogates(dict d) except -1:
    """A lone surrogate escape is an error only in what survives the map's repeated keys and nulls."""
    for k, v in d.items():
        for x in (k, v):
            try:
                PyUnicode_AsUTF8String(x)
            except UnicodeEncodeError:
                raise FrameError("header has a lone UTF-16 surrogate escape") from None
    return 0


cdef object _ext_object(Scan* s, const unsigned char* base):
    cdef StrTok t
    cdef bint drop
    cdef bint lone = False
    cdef dict d
    cdef dict nested = None
    _ws(s)
    if s.p >= s.end:
        _err(s, base, "expected a value")
    if _lit(s, "null", 4):
        return None
    if s.p[0] != 123:
        c = s.p[0]
        _skip_value(s, base, 1)
        kind = "list" if c == 91 else "str" if c == 34 else "bool" if c in (116, 102) else "number"
        raise FrameError(f"header field 'extFields' must be an object, not {kind}")
    s.p += 1
    d = _PyDict_NewPresized(16)  # SEND_MESSAGE_V2 carries 12-14 fields: no resize on the way
    _ws(s)
    if s.p < s.end and s.p[0] == 125:
        s.p += 1
        return d
    while True:
        _ws(s)
        if s.p >= s.end or s.p[0] != 34:
            _err(s, base, "expected a key")
        if s.end - s.p >= 3 and s.p[2] == 34 and 97 <= s.p[1] <= 122:
            key = _LETTERS[s.p[1] - 97]  # SEND_MESSAGE_V2's one-letter keys, without a scan
            s.p += 3
        else:
            _scan_string(s, base, &t)
            key = _key_str(&t, &lone)
        _ws(s)
        if s.p >= s.end or s.p[0] != 58:
            _err(s, base, "expected ':'")
        s.p += 1
        _ws(s)
        if s.p < s.end and (s.p[0] == 123 or s.p[0] == 91):
            # Not a scalar: an error, unless a later value of the same key replaces it (json.loads
            # keeps the last one), so it is only noted here.
            if nested is None:
                nested = {}
            nested[key] = "dict" if s.p[0] == 123 else "list"
            _skip_value(s, base, 1)
            d.pop(key, None)
        else:
            val = _scalar_text(s, base, key, &drop, &lone)
            if nested is not None:
                nested.pop(key, None)
            if drop:
                d.pop(key, None)  # a later null hides an earlier value, as json.loads would
            else:
                PyDict_SetItem(d, key, val)
        _ws(s)
        if s.p < s.end and s.p[0] == 44:
            s.p += 1
            continue
        if s.p < s.end and s.p[0] == 125:
            s.p += 1
            if nested:
                k, kind = next(iter(nested.items()))
                raise FrameError(f"extFields value of {k!r} must be a scalar, not {kind}")
            if lone:
                _no_lone_surrogates(d)
            return d
        _err(s, base, "expected ',' or '}'")


cdef inline bint _keyis(StrTok* t, const char* name, Py_ssize_t n) noexcept:
    return t.n == n and memcmp(t.start, name, n) == 0



# ---------------------------------------------------------------- the fast path
#
# Java clients, fastmq and most peers write the header compactly and in one key order:
#   {"code":N,"extFields":{...},"flag":N,"language":"X","opaque":N,"remark":"..",
#    "serializeTypeCurrentRPC":"JSON","version":N}
# _decode_json_fast reads exactly that layout with literal compares instead of a key scan per
# token, and returns None at the first byte it does not expect (whitespace, another order, a
# non-ASCII or surrogate escape, any error...): the general scanner then decodes the header
# from the start, so both paths always agree (the differential tests hold them to it).

cdef inline bint _same(const void* a, const void* b, Py_ssize_t n) noexcept:
    """memcmp(a, b, n) == 0 for the short strings of a header, with word loads instead of a call."""
    cdef uint64_t x, y
    cdef uint32_t u, v
    cdef Py_ssize_t i = 0
    cdef const unsigned char* p = <const unsigned char*>a
    cdef const unsigned char* r = <const unsigned char*>b
    if n >= 8:
        while i + 8 < n:
            memcpy(&x, p + i, 8)
            memcpy(&y, r + i, 8)
            if x != y:
                return False
            i += 8
        memcpy(&x, p + n - 8, 8)
        memcpy(&y, r + n - 8, 8)
        return x == y
    if n >= 4:
        memcpy(&u, p, 4)
        memcpy(&v, r, 4)
        if u != v:
            return False
        memcpy(&u, p + n - 4, 4)
        memcpy(&v, r + n - 4, 4)
        return u == v
    for i in range(n):
        if p[i] != r[i]:
            return False
    return True


cdef inline bint _expect(const unsigned char** q, const unsigned char* end, const char* lit, Py_ssize_t n) noexcept:
    if end - q[0] >= n and _same(q[0], lit, n):
        q[0] += n
        return True
    return False


cdef inline bint _fast_int(const unsigned char** q, const unsigned char* end, int* out) noexcept:
    """A plain JSON integer within int32 (no leading zeros, no fraction or exponent)."""
    cdef const unsigned char* p = q[0]
    cdef bint neg = False
    cdef int64_t v = 0
    cdef int nd = 0
    if p < end and p[0] == 45:
        neg = True
        p += 1
    if p >= end or not (48 <= p[0] <= 57):
        return False
    if p[0] == 48 and p + 1 < end and 48 <= p[1] <= 57:
        return False
    while p < end and 48 <= p[0] <= 57:
        v = v * 10 + (p[0] - 48)
        nd += 1
        if nd > 10:
            return False
        p += 1
    if p < end and (p[0] == 46 or p[0] == 101 or p[0] == 69):
        return False
    if neg:
        v = -v
    if v < I32_MIN or v > I32_MAX:
        return False
    out[0] = <int>v
    q[0] = p
    return True


cdef object _fast_string(const unsigned char** q, const unsigned char* end):
    """A string (q is just past its opening quote) of printable ASCII with simple escapes and
    \\u00XX below 0x80; None for anything else."""
    cdef const unsigned char* p = q[0]
    cdef const unsigned char* start = p
    cdef unsigned char buf[512]
    cdef Py_ssize_t o = 0, run
    cdef unsigned char k, c
    cdef int cp
    cdef bint escaped = False
    while p < end:
        k = _SCLASS[p[0]]
        if k == 0:
            p += 1
            continue
        if k == 1:
            if not escaped:
                q[0] = p + 1
                return _ascii_str(start, p - start)
            run = p - start
            if o + run > 512:
                return None
            memcpy(buf + o, start, run)
            o += run
            q[0] = p + 1
            return _new_ascii(buf, o)
        if k != 2 or p + 1 >= end:
            return None
        run = p - start
        if o + run + 1 > 512:
            return None
        memcpy(buf + o, start, run)
        o += run
        escaped = True
        c = p[1]
        if c == 117:
            if p + 6 > end:
                return None
            cp = _hex4(p + 2)
            if cp < 0 or cp >= 0x80:
                return None
            buf[o] = <unsigned char>cp
            p += 6
        else:
            if c == 110:
                buf[o] = 10
            elif c == 116:
                buf[o] = 9
            elif c == 114:
                buf[o] = 13
            elif c == 98:
                buf[o] = 8
            elif c == 102:
                buf[o] = 12
            elif c == 34 or c == 92 or c == 47:
                buf[o] = c
            else:
                return None
            p += 2
        o += 1
        start = p
    return None


cdef object _decode_json_fast(const unsigned char* p, Py_ssize_t n, object body):
    cdef const unsigned char* q = p
    cdef const unsigned char* end = p + n
    cdef const unsigned char* vs
    cdef int code, flag, opaque, version, lang = -1, i
    cdef Py_ssize_t nkeys = 0
    cdef object ext = None
    cdef object remark = None
    cdef dict d
    cdef RemotingCommand cmd
    cdef unsigned char c
    if not _expect(&q, end, '{"code":', 8) or not _fast_int(&q, end, &code):
        return None
    if _expect(&q, end, ',"extFields":{', 14):
        d = _PyDict_NewPresized(16)
        if not _expect(&q, end, "}", 1):
            while True:
                if end - q >= 4 and q[0] == 34 and q[2] == 34 and q[3] == 58 and 97 <= q[1] <= 122:
                    key = <object>_LETTER_P[q[1] - 97]
                    q += 4
                else:
                    if q >= end or q[0] != 34:
                        return None
                    q += 1
                    key = _fast_string(&q, end)
                    if key is None or not _expect(&q, end, ":", 1):
                        return None
                if q >= end:
                    return None
                c = q[0]
                if c == 34:
                    q += 1
                    val = _fast_string(&q, end)
                    if val is None:
                        return None
                elif 48 <= c <= 57 or c == 45:
                    vs = q
                    if not _fast_int(&q, end, &i):
                        return None
                    if q - vs == 2 and vs[0] == 45:
                        return None  # -0 prints as 0: the general path knows that
                    val = _ascii_str(vs, q - vs)
                else:
                    return None
                PyDict_SetItem(d, key, val)
                nkeys += 1
                if PyDict_GET_SIZE(d) != nkeys:
                    return None  # a duplicate key: leave the last-one-wins rule to the general path
                if _expect(&q, end, ",", 1):
                    continue
                if _expect(&q, end, "}", 1):
                    break
                return None
        ext = d
    if not _expect(&q, end, ',"flag":', 8) or not _fast_int(&q, end, &flag):
        return None
    if not _expect(&q, end, ',"language":"', 13):
        return None
    for i in range(N_LANGS):
        if end - q > _LANG_LEN[i] and q[_LANG_LEN[i]] == 34 and _same(q, _LANG_C[i], _LANG_LEN[i]):
            lang = i
            q += _LANG_LEN[i] + 1
            break
    if lang < 0:
        return None
    if not _expect(&q, end, ',"opaque":', 10) or not _fast_int(&q, end, &opaque):
        return None
    if _expect(&q, end, ',"remark":"', 11):
        remark = _fast_string(&q, end)
        if remark is None:
            return None
    if not _expect(&q, end, ',"serializeTypeCurrentRPC":"JSON"', 33):
        _expect(&q, end, ',"serializeTypeCurrentRPC":"ROCKETMQ"', 37)
    if not _expect(&q, end, ',"version":', 11) or not _fast_int(&q, end, &version):
        return None
    if not _expect(&q, end, "}", 1):
        return None
    while q < end and (q[0] == 10 or q[0] == 32 or q[0] == 13 or q[0] == 9):
        q += 1
    if q != end:
        return None
    cmd = _new_cmd()
    cmd._code = code
    cmd._language = lang
    cmd._version = version
    cmd._opaque = opaque
    cmd._flag = flag
    cmd.remark = remark
    cmd.ext_fields = ext
    cmd._serialize_type = SER_JSON
    cmd.body = body
    return cmd


cdef RemotingCommand _decode_json(const unsigned char* p, Py_ssize_t n, object body):
    cdef Scan s
    cdef StrTok t
    cdef unsigned char keybuf[64]
    cdef Py_ssize_t kn
    cdef RemotingCommand cmd = _new_cmd()
    cdef object remark = None
    cdef object ext = None
    cdef StrTok rt
    cdef const unsigned char* vstart
    cdef int field
    cdef dict pending = None
    s.p = p
    s.end = p + n
    cmd._code = 0
    cmd._language = 0
    cmd._version = 0
    cmd._opaque = 0
    cmd._flag = 0
    cmd._serialize_type = SER_JSON
    cmd.body = body
    _ws(&s)
    if s.p >= s.end or s.p[0] != 123:
        if s.p < s.end and (s.p[0] == 91 or s.p[0] == 34 or s.p[0] == 45 or 48 <= s.p[0] <= 57
                            or s.p[0] in (116, 102, 110)):
            _skip_value(&s, p, 1)
            _ws(&s)
            if s.p == s.end:
                raise FrameError("header JSON must be an object")
        _err(&s, p, "expected '{'")
    s.p += 1
    _ws(&s)
    if s.p < s.end and s.p[0] == 125:
        s.p += 1
    else:
        while True:
            _ws(&s)
            if s.p >= s.end or s.p[0] != 34:
                _err(&s, p, "expected a key")
            _scan_string(&s, p, &t)
            _check_utf8(&t)  # the raw bytes: escapes are ASCII, so this is the key's UTF-8 check
            if t.escaped:
                # An escaped key ("co\u0064e") means the same as its plain spelling; a known key
                # is at most 23 bytes, so a longer escaped one is simply unknown.
                if t.n <= 64:
                    kn = _unescape(&t, keybuf, True)
                    t.start = keybuf
                    t.n = kn
                else:
                    t.n = 0
                t.escaped = False
            _ws(&s)
            if s.p >= s.end or s.p[0] != 58:
                _err(&s, p, "expected ':'")
            s.p += 1
            # json.loads reads the whole text before a field is looked at, and a repeated key
            # replaces the earlier value: a wrong-typed value fails the frame only once the
            # text has proved to be JSON, and only if no later value of the same key replaces it.
            vstart = s.p
            field = -1
            try:
                if _keyis(&t, "code", 4):
                    field = 0
                    cmd._code = _int_field(&s, p, "code", 0)
                elif _keyis(&t, "extFields", 9):
                    field = 1
                    ext = _ext_object(&s, p)
                elif _keyis(&t, "flag", 4):
                    field = 2
                    cmd._flag = _int_field(&s, p, "flag", 0)
                elif _keyis(&t, "language", 8):
                    field = 3
                    cmd._language = _language(&s, p)
                elif _keyis(&t, "opaque", 6):
                    field = 4
                    cmd._opaque = _int_field(&s, p, "opaque", 0)
                elif _keyis(&t, "remark", 6):
                    field = 5
                    _ws(&s)
                    if _lit(&s, "null", 4):
                        remark = None
                    elif s.p < s.end and s.p[0] == 34:
                        _scan_string(&s, p, &rt)
                        remark = _make_str(&rt)
                    else:
                        c = s.p[0] if s.p < s.end else 0
                        _skip_value(&s, p, 1)
                        kind = ("dict" if c == 123 else "list" if c == 91 else "bool" if c in (116, 102)
                                else "int")
                        raise FrameError(f"header field 'remark' must be a string, not {kind}")
                elif _keyis(&t, "version", 7):
                    field = 6
                    cmd._version = _int_field(&s, p, "version", 0)
                else:
                    _skip_value(&s, p, 0)
                if pending is not None:
                    pending.pop(field, None)
            except FrameError as exc:
                s.p = vstart
                _skip_value(&s, p, 0)  # raises if the value is not even JSON
                if pending is None:
                    pending = {}
                pending[field] = exc
            _ws(&s)
            if s.p < s.end and s.p[0] == 44:
                s.p += 1
                continue
            if s.p < s.end and s.p[0] == 125:
                s.p += 1
                break
            _err(&s, p, "expected ',' or '}'")
    _ws(&s)
    if s.p != s.end:
        _err(&s, p, "extra data")
    if pending:
        raise FrameError(str(next(iter(pending.values())))) from None
    cmd.remark = remark
    cmd.ext_fields = ext
    return cmd


# ====================================================================== binary header

cdef inline uint32_t _rd32(const unsigned char* p) noexcept:
    return (<uint32_t>p[0] << 24) | (<uint32_t>p[1] << 16) | (<uint32_t>p[2] << 8) | <uint32_t>p[3]


cdef object _bin_utf8(str name, const unsigned char* p, Py_ssize_t n):
    """A str field of the binary header; ASCII ones (nearly all) go through the string cache."""
    cdef Py_ssize_t i = 0
    cdef uint64_t x, acc = 0
    while i + 8 <= n:
        memcpy(&x, p + i, 8)
        acc |= x
        i += 8
    while i < n:
        acc |= p[i]
        i += 1
    if not (acc & 0x8080808080808080ULL):
        if n == 1 and 97 <= p[0] <= 122:
            return <object>_LETTER_P[p[0] - 97]
        return _ascii_str(p, n)
    try:
        return PyUnicode_DecodeUTF8(<const char*>p, n, "strict")
    except UnicodeDecodeError as exc:
        raise FrameError(f"{name} is not valid UTF-8: {exc.reason}") from None


cdef RemotingCommand _decode_binary(const unsigned char* h, Py_ssize_t n, object body):
    cdef RemotingCommand cmd
    cdef Py_ssize_t pos
    cdef int rlen, elen, vlen
    cdef short klen
    cdef dict ext
    if n < 13 + 8:
        raise FrameError(f"binary header of {n} bytes is shorter than its fixed part")
    cmd = _new_cmd()
    cmd._code = <short>((h[0] << 8) | h[1])
    cmd._language = <signed char>h[2]
    if <signed char>h[2] < 0:
        raise FrameError(f"binary header language {<signed char>h[2]} is negative")
    cmd._version = <short>((h[3] << 8) | h[4])
    cmd._opaque = <int>_rd32(h + 5)
    cmd._flag = <int>_rd32(h + 9)
    pos = 13
    rlen = <int>_rd32(h + pos)
    pos += 4
    if rlen < 0 or rlen > n - pos - 4:
        raise FrameError(f"binary header remark length {rlen} runs past the header")
    cmd.remark = _bin_utf8("remark", h + pos, rlen) if rlen else None
    pos += rlen
    elen = <int>_rd32(h + pos)
    pos += 4
    if elen < 0 or elen != n - pos:
        raise FrameError(f"binary header ext length {elen} does not match the {n - pos} bytes left")
    cmd.ext_fields = None
    if elen:
        ext = _PyDict_NewPresized(16)
        while pos < n:
            if n - pos < 2:
                raise FrameError("binary ext field truncated in its key length")
            klen = <short>((h[pos] << 8) | h[pos + 1])
            pos += 2
            if klen < 0 or klen > n - pos - 4:
                raise FrameError(f"binary ext key length {klen} runs past the header")
            key = _bin_utf8("ext key", h + pos, klen)
            pos += klen
            vlen = <int>_rd32(h + pos)
            pos += 4
            if vlen < 0 or vlen > n - pos:
                raise FrameError(f"binary ext value length {vlen} runs past the header")
            PyDict_SetItem(ext, key, _bin_utf8("ext value", h + pos, vlen))
            pos += vlen
        cmd.ext_fields = ext
    cmd._serialize_type = SER_ROCKETMQ
    cmd.body = body
    return cmd


# ====================================================================== frames

cdef RemotingCommand _decode_payload(const unsigned char* p, uint32_t total):
    """The frame whose mark word is at ``p``; ``total`` is its length field (already checked)."""
    cdef uint32_t mark = _rd32(p)
    cdef uint32_t st = mark >> 24
    cdef uint32_t hlen = mark & 0xFFFFFF
    cdef object body
    if hlen > total - 4:
        raise FrameError(f"header length {hlen} runs past the frame of {total} bytes")
    if total - 4 > hlen:
        body = PyBytes_FromStringAndSize(<const char*>p + 4 + hlen, total - 4 - hlen)
    else:
        body = None
    if st == SER_JSON:
        fast = _decode_json_fast(p + 4, hlen, body)
        if fast is not None:
            return <RemotingCommand>fast
        return _decode_json(p + 4, hlen, body)
    if st == SER_ROCKETMQ:
        return _decode_binary(p + 4, hlen, body)
    raise FrameError(f"unknown serialize type {st}")


cdef inline int _check_total(uint32_t total, Py_ssize_t max_frame_size) except -1:
    if total < 4:
        raise FrameError(f"frame length {total} is shorter than its header-length word")
    if total > max_frame_size:
        raise FrameError(f"frame length {total} exceeds the maximum of {max_frame_size}")
    return 0


def decode_frame(frame, Py_ssize_t max_frame_size=DEF_MAX_FRAME):
    """Decode one whole frame (length prefix included); it must be exactly one frame."""
    cdef Py_buffer view
    cdef uint32_t total
    cdef const unsigned char* data
    cdef Py_ssize_t n
    if type(frame) is bytes:  # the common case, without the buffer protocol's round trip
        data = <const unsigned char*>PyBytes_AS_STRING(frame)
        n = len(<bytes>frame)
        if n < 8:
            raise FrameError(f"frame of {n} bytes is truncated")
        total = _rd32(data)
        _check_total(total, max_frame_size)
        if total != n - 4:
            raise FrameError(f"frame length field says {total} but {n - 4} bytes follow it")
        return _decode_payload(data + 4, total)
    PyObject_GetBuffer(frame, &view, PyBUF_SIMPLE)
    try:
        if view.len < 8:
            raise FrameError(f"frame of {view.len} bytes is truncated")
        total = _rd32(<const unsigned char*>view.buf)
        _check_total(total, max_frame_size)
        if total != view.len - 4:
            raise FrameError(f"frame length field says {total} but {view.len - 4} bytes follow it")
        return _decode_payload(<const unsigned char*>view.buf + 4, total)
    finally:
        PyBuffer_Release(&view)


@cython.final
cdef class FrameDecoder:
    """Push decoder: ``feed`` socket chunks, get the whole commands they complete.

    Holds at most one partial frame in a C buffer; a chunk that starts on a frame boundary is
    decoded in place, without copying it first.
    """

    cdef public Py_ssize_t max_frame_size
    cdef unsigned char* _buf
    cdef Py_ssize_t _len
    cdef Py_ssize_t _cap
    cdef Py_ssize_t _need
    cdef object _error

    def __cinit__(self):
        self._buf = NULL
        self._len = 0
        self._cap = 0
        self._need = 0
        self._error = None

    def __init__(self, Py_ssize_t max_frame_size=DEF_MAX_FRAME):
        self.max_frame_size = max_frame_size

    def __dealloc__(self):
        free(self._buf)

    def buffered(self):
        """Bytes held for a frame not yet complete."""
        return self._len

    cdef int _append(self, const unsigned char* p, Py_ssize_t n) except -1:
        cdef Py_ssize_t cap
        cdef unsigned char* nb
        if self._len + n > self._cap:
            cap = self._cap * 2 if self._cap else 65536
            while cap < self._len + n:
                cap *= 2
            nb = <unsigned char*>realloc(self._buf, cap)
            if nb == NULL:
                raise MemoryError()
            self._buf = nb
            self._cap = cap
        memcpy(self._buf + self._len, p, n)
        self._len += n
        return 0

    cdef Py_ssize_t _parse(self, const unsigned char* p, Py_ssize_t n, list out) except -1:
        """Decode every whole frame at the start of p[0:n]; returns the bytes consumed."""
        cdef Py_ssize_t pos = 0
        cdef uint32_t total
        while n - pos >= 4:
            total = _rd32(p + pos)
            _check_total(total, self.max_frame_size)
            if <Py_ssize_t>total > n - pos - 4:
                break
            out.append(_decode_payload(p + pos + 4, total))
            pos += 4 + total
        return pos

    def feed(self, data):
        """Decode the frames ``data`` completes; raises FrameError (and stays failed) on bad input."""
        cdef Py_buffer view
        cdef list out = []
        cdef Py_ssize_t used
        if self._error is not None:
            raise self._error
        PyObject_GetBuffer(data, &view, PyBUF_SIMPLE)
        try:
            if self._len == 0:
                used = self._parse(<const unsigned char*>view.buf, view.len, out)
                if used < view.len:
                    self._append(<const unsigned char*>view.buf + used, view.len - used)
            else:
                self._append(<const unsigned char*>view.buf, view.len)
                if self._need and self._len < self._need:
                    return out
                used = self._parse(self._buf, self._len, out)
                if used:
                    memmove(self._buf, self._buf + used, self._len - used)
                    self._len -= used
            self._need = 4 + <Py_ssize_t>_rd32(self._buf) if self._len >= 4 else 0
            if self._cap > 1 << 20 and self._len < 65536:
                # give back the memory of a huge frame once it has been decoded
                self._buf = <unsigned char*>realloc(self._buf, 65536)
                self._cap = 65536
            return out
        except FrameError as exc:
            self._error = exc
            self._len = 0
            raise
        finally:
            PyBuffer_Release(&view)
