# Included by codec_json.pxi: the fast path for the compact header layout Java and fastmq write.

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
    cdef uint64_t x = 0, y = 0
    cdef uint32_t u = 0, v = 0
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
    \\u00XX below 0x80; None for anything else.

    Plain runs are found eight bytes at a time and copied whole. An escaped string longer than
    the stack buffer is unescaped into one taken from the heap (:func:`_fast_long_string`) rather
    than sent to the general path, which would parse the whole header again (a trace message's
    KEYS run to kilobytes; every message's properties are escaped, their separators being
    control characters)."""
    cdef unsigned char buf[512]
    cdef const unsigned char* p = q[0]
    cdef unsigned char c
    if end - p >= 2 and p[1] == 34:  # one character (SEND_MESSAGE_V2's keys, many numbers)
        c = p[0]
        if _SCLASS[c] == 0:
            q[0] = p + 2
            return <object>_LETTER_P[c - 97] if 97 <= c <= 122 else _ascii_str(p, 1)
    return _fast_unescape(q, end, buf, 512, True)


cdef object _fast_long_string(const unsigned char** q, const unsigned char* end):
    """:func:`_fast_string` of a string whose unescaped text passes 512 bytes."""
    # the unescaped text is never longer than the raw text, which ends before ``end``
    cdef unsigned char* buf = <unsigned char*>malloc(end - q[0])
    if buf == NULL:
        raise MemoryError()
    try:
        return _fast_unescape(q, end, buf, end - q[0], False)
    finally:
        free(buf)


cdef inline object _fast_unescape(const unsigned char** q, const unsigned char* end, unsigned char* buf,
                                  Py_ssize_t cap, bint may_grow):
    cdef const unsigned char* p = q[0]
    cdef const unsigned char* start = p
    cdef Py_ssize_t o = 0, run
    cdef unsigned char k, c
    cdef int cp
    cdef bint escaped = False
    while p < end:
        p = fastmq_json_special(p, end, _SCLASS)
        if p >= end:
            return None
        k = _SCLASS[p[0]]
        if k == 1:
            if not escaped:
                q[0] = p + 1
                return _ascii_str(start, p - start)
        elif k != 2 or p + 1 >= end:
            return None
        run = p - start
        if o + run + 1 > cap:
            return _fast_long_string(q, end) if may_grow else None
        memcpy(buf + o, start, run)
        o += run
        if k == 1:
            q[0] = p + 1
            return _new_ascii(buf, o)
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
    cdef int code = 0, flag = 0, opaque = 0, version = 0, lang = -1, i = 0
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
