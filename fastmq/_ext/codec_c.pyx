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
from cpython.dict cimport PyDict_DelItem, PyDict_GetItem, PyDict_SetItem
from cpython.unicode cimport PyUnicode_DecodeUTF8, PyUnicode_AsUTF8String
from libc.stdlib cimport malloc, realloc, free
from libc.string cimport memchr, memcpy, memmove, memcmp
from libc.stdint cimport uint8_t, uint32_t, int64_t, uint64_t

from fastmq.errors import FrameError, RemotingCommandError
from fastmq.protocol.codes import LANGUAGE_NAMES, LanguageCode

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

__all__ = ["RemotingCommand", "FrameDecoder", "encode_frame", "encode_frames", "decode_frame", "settle_responses",
           "LANGUAGE_NAMES", "MAX_HEADER_LENGTH"]

MAX_HEADER_LENGTH = 0xFFFFFF
DEF_MAX_FRAME = 16 * 1024 * 1024

cdef enum:
    SER_JSON = 0
    SER_ROCKETMQ = 1
    MAX_LANGS = 64

cdef int64_t I32_MIN = -2147483648
cdef int64_t I32_MAX = 2147483647

# The language table is protocol/codes.py's, read once here into C arrays.
cdef int64_t LANG_OTHER = LanguageCode.OTHER
cdef Py_ssize_t N_LANGS = len(LANGUAGE_NAMES)
if N_LANGS > MAX_LANGS:
    raise ImportError(f"codec_c holds {MAX_LANGS} language names, LanguageCode has {N_LANGS}")
cdef tuple _LANG_BYTES = tuple(n.encode("ascii") for n in LANGUAGE_NAMES)
cdef const char* _LANG_C[MAX_LANGS]
cdef Py_ssize_t _LANG_LEN[MAX_LANGS]
for _i in range(N_LANGS):
    _LANG_C[_i] = PyBytes_AS_STRING(<bytes>_LANG_BYTES[_i])  # the tuple keeps the bytes alive
    _LANG_LEN[_i] = len(<bytes>_LANG_BYTES[_i])
# The one-letter keys of SEND_MESSAGE_V2 come from this table instead of being allocated per frame.
cdef list _LETTERS = [chr(ord("a") + i) for i in range(26)]
cdef PyObject* _LETTER_P[26]
for _i in range(26):
    _LETTER_P[_i] = <PyObject*>_LETTERS[_i]  # the list keeps them alive


cdef extern from "Python.h":
    long long PyLong_AsLongLongAndOverflow(object v, int* overflow) except? -1


cdef int _as_i32(str name, object v) except? -1:
    """An int field's value: a Python int (IntEnum too, bool not) within int32."""
    if type(v) is not int and (not isinstance(v, int) or isinstance(v, bool)):
        raise RemotingCommandError(f"{name} must be an int, not {type(v).__name__}")
    # compared as a C integer: the range test on the object made two Python ints and two rich
    # comparisons per field, a dozen per command made
    cdef int overflow = 0
    cdef long long x = PyLong_AsLongLongAndOverflow(v, &overflow)
    if overflow or x < I32_MIN or x > I32_MAX:
        raise RemotingCommandError(f"{name} {v} out of range [{I32_MIN}, {I32_MAX}]")
    return <int>x


@cython.final
@cython.freelist(256)
cdef class RemotingCommand:
    """One RocketMQ request or response (see ``_protocols.RemotingCommandProto``).

    The int fields live as C ints, so decoding a header allocates no int objects; setting one
    to a non-int or to a value outside int32 raises RemotingCommandError at once (the reference
    twin raises the same error when the command is encoded).
    """

    # the fields are declared in codec_c.pxd, so other compiled modules read them directly

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


include "codec_encode.pxi"


include "codec_json.pxi"


# ====================================================================== binary header

cdef inline uint32_t _rd32(const unsigned char* p) noexcept:
    return (<uint32_t>p[0] << 24) | (<uint32_t>p[1] << 16) | (<uint32_t>p[2] << 8) | <uint32_t>p[3]


cdef object _bin_utf8(str name, const unsigned char* p, Py_ssize_t n):
    """A str field of the binary header; ASCII ones (nearly all) go through the string cache."""
    cdef Py_ssize_t i = 0
    cdef uint64_t x = 0, acc = 0
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
            if self._len == 0 and self._cap:
                # nothing partial left: a connection between frames holds no buffer (thousands of
                # idle connections, each of which once carried a large message, would keep them all)
                free(self._buf)
                self._buf = NULL
                self._cap = 0
            elif self._cap > 1 << 20 and self._len < 65536:
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


def settle_responses(list cmds, dict pending):
    """Hand each response of ``cmds`` to its pending entry (see ``codec_py.settle_responses``):
    one call per socket read instead of a Python round per response."""
    cdef list requests = None
    cdef list unmatched = None
    cdef RemotingCommand cmd
    cdef PyObject* p
    for obj in cmds:
        cmd = <RemotingCommand?>obj
        if cmd._flag & 1:
            key = cmd._opaque
            p = PyDict_GetItem(pending, key)
            if p == NULL:
                if unmatched is None:
                    unmatched = []
                unmatched.append(key)
                continue
            entry = <object>p
            PyDict_DelItem(pending, key)
            if not entry.answered():
                entry.on_response(cmd)
        elif requests is None:
            requests = [cmd]
        else:
            requests.append(cmd)
    return requests, unmatched

