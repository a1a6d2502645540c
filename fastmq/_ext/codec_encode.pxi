# Included by codec_c.pyx: the encoders (JSON and ROCKETMQ binary headers, whole frames).
# Kept in the same extension module, so these cdef functions stay direct C calls.

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
