# Included by codec_c.pyx: the JSON header scanner (general path and compact-layout fast path).
# Kept in the same extension module, so these cdef functions stay direct C calls.

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


cdef extern from *:
    """
    /* The first byte at or after p (before end) that is a quote, a backslash, a control byte or
       non-ASCII; end if none. Eight bytes at a time: where a word holds one, the lowest flagged
       byte of the mask is exactly the first such byte (a borrow can only flag bytes above a true
       one), so on a little-endian machine its index is the mask's trailing zero bits / 8. */
    static inline const unsigned char *fastmq_json_special(const unsigned char *p, const unsigned char *end,
                                                           const unsigned char *cls) {
        const uint64_t ones = 0x0101010101010101ULL, high = 0x8080808080808080ULL;
        while (end - p >= 8) {
            uint64_t x, q, b, m;
            memcpy(&x, p, 8);
            q = x ^ 0x2222222222222222ULL;
            b = x ^ 0x5C5C5C5C5C5C5C5CULL;
            m = (x | ((q - ones) & ~q) | ((b - ones) & ~b) | ((x - 0x2020202020202020ULL) & ~x)) & high;
            if (m) {
    #if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__ && defined(__GNUC__)
                return p + (__builtin_ctzll(m) >> 3);
    #else
                break;
    #endif
            }
            p += 8;
        }
        while (p < end && cls[*p] == 0)
            p++;
        return p;
    }
    """
    const unsigned char* fastmq_json_special(const unsigned char* p, const unsigned char* end,
                                             const unsigned char* cls) noexcept nogil


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
    t.start = p
    t.escaped = False
    t.non_ascii = False
    while p < end:
        p = fastmq_json_special(p, end, _SCLASS)
        if p >= end:
            break
        k = _SCLASS[p[0]]
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


cdef Py_ssize_t _unescape(StrTok* t, unsigned char* out, bint allow_lone, bint* wide=NULL) except -1:
    """Write the UTF-8 of an escaped string to ``out`` (never longer than the raw text).

    A lone surrogate escape is an error unless ``allow_lone`` (then it is written as its
    3-byte form, which can never equal an ASCII name). ``wide``, when given, is set if an
    escape wrote a non-ASCII character (the raw bytes' own are in ``t.non_ascii``).
    """
    cdef const unsigned char* p = t.start
    cdef const unsigned char* end = t.start + t.n
    cdef const unsigned char* bs
    cdef Py_ssize_t o = 0
    cdef int cp, lo
    cdef unsigned char c
    while p < end:
        # the run up to the next backslash in one copy (escapes are sparse: a message's
        # properties have two control-character separators per property)
        bs = <const unsigned char*>memchr(p, 92, end - p)
        if bs == NULL:
            bs = end
        if bs != p:
            memcpy(out + o, p, bs - p)
            o += bs - p
            p = bs
            if p >= end:
                break
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
            if cp >= 0x80 and wide != NULL:
                wide[0] = True
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
    cdef Py_ssize_t n
    cdef bint wide = False
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
        n = _unescape(t, tmp, lone != NULL, &wide)
        if not t.non_ascii and not wide:
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
    cdef bint is_int = False
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
    cdef bint is_int = False, ok = False
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
    cdef bint is_int = False, ok = False
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
                if _LANG_LEN[i] == n and memcmp(_LANG_C[i], name, n) == 0:
                    return i
            return LANG_OTHER
        tmp = <unsigned char*>malloc(t.n + 1)
        if tmp == NULL:
            raise MemoryError()
        try:
            n = _unescape(&t, tmp, True)
            for i in range(N_LANGS):
                if _LANG_LEN[i] == n and memcmp(_LANG_C[i], tmp, n) == 0:
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
    cdef bint is_int = False
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
    cdef bint drop = False
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



include "codec_json_fast.pxi"


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
