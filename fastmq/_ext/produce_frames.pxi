# Included by produce_c.pyx: the SEND_MESSAGE_V2 / SEND_BATCH_MESSAGE request frames written from
# the producer's fixed header pieces (produce_py.SendRequestWriter and encode_batch are its twin).
# Kept in the same extension module, so its cdef functions stay direct C calls.

cdef inline int _put(ByteBuf* b, const char* s, Py_ssize_t n) except -1:
    bytebuf_reserve(b, n, 1024)
    memcpy(b.p + b.n, s, n)
    b.n += n
    return 0


cdef int _put_int(ByteBuf* b, int64_t v) except -1:
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


cdef inline bint _plain8(const unsigned char* p) noexcept:
    """None of the 8 bytes at ``p`` is below 0x20, a quote or a backslash (the bytes JSON escapes):
    each test sets a byte's top bit where a byte matches, and never misses one (a borrow can
    only mark a byte after a match)."""
    cdef uint64_t x = 0, q, s
    memcpy(&x, p, 8)
    q = x ^ 0x2222222222222222ULL
    s = x ^ 0x5c5c5c5c5c5c5c5cULL
    return ((((x - 0x2020202020202020ULL) & ~x) | ((q - 0x0101010101010101ULL) & ~q)
             | ((s - 0x0101010101010101ULL) & ~s)) & 0x8080808080808080ULL) == 0


cdef int _put_escaped(ByteBuf* b, const unsigned char* p, Py_ssize_t n) except -1:
    """UTF-8 text inside a JSON string literal, with json.dumps(ensure_ascii=False)'s escapes.
    Plain text is passed over 8 bytes at a time (a trace message's KEYS run to kilobytes)."""
    cdef Py_ssize_t i = 0, start = 0
    cdef unsigned char c
    cdef char esc[6]
    while i < n:
        if i + 8 <= n and _plain8(p + i):
            i += 8
            continue
        c = p[i]
        i += 1
        if c >= 0x20 and c != 34 and c != 92:
            continue
        if i - 1 > start:
            _put(b, <const char*>p + start, i - 1 - start)
        start = i
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
            memcpy(esc, b"\\u00", 4)
            esc[4] = _LHEX[c >> 4]
            esc[5] = _LHEX[c & 15]
            _put(b, esc, 6)
    if n > start:
        _put(b, <const char*>p + start, n - start)
    return 0


cdef int _put_json_str(ByteBuf* b, object s) except -1:
    cdef Py_ssize_t n = 0
    cdef const char* p = PyUnicode_AsUTF8AndSize(s, &n)
    _put(b, b'"', 1)
    _put_escaped(b, <const unsigned char*>p, n)
    _put(b, b'"', 1)
    return 0


cdef int _put_property(ByteBuf* b, const char* ks, Py_ssize_t kn, const char* vs, Py_ssize_t vn) except -1:
    """``k\\u0001v\\u0002``, escaped for the JSON string it sits in."""
    _put_escaped(b, <const unsigned char*>ks, kn)
    _put(b, b"\\u0001", 6)
    _put_escaped(b, <const unsigned char*>vs, vn)
    _put(b, b"\\u0002", 6)
    return 0


cdef int _put_property_raw(ByteBuf* b, const char* ks, Py_ssize_t kn, const char* vs, Py_ssize_t vn) except -1:
    """``k\\x01v\\x02`` as the header field's value holds it (what a signature covers)."""
    bytebuf_reserve(b, kn + vn + 2, 1024)
    memcpy(b.p + b.n, ks, kn)
    b.p[b.n + kn] = NAME_VALUE_SEPARATOR
    memcpy(b.p + b.n + kn + 1, vs, vn)
    b.p[b.n + kn + 1 + vn] = PROPERTY_SEPARATOR
    b.n += kn + vn + 2
    return 0


cdef inline int _put_utf8(ByteBuf* b, str s) except -1:
    cdef Py_ssize_t n = 0
    cdef const char* p = PyUnicode_AsUTF8AndSize(s, &n)
    return _put(b, p, n)


cdef inline int _put_bytes(ByteBuf* b, bytes s) except -1:
    return _put(b, PyBytes_AS_STRING(s), PyBytes_GET_SIZE(s))


cdef inline int64_t _int32(str name, object v) except? -1:
    if not -2147483648 <= v <= 2147483647:
        raise ValueError(f"{name} {v} is outside int32")
    return v


@cython.final
cdef class SendRequestWriter:
    """SEND_MESSAGE_V2 / SEND_BATCH_MESSAGE request frames of one producer group."""

    cdef readonly str group
    cdef readonly str default_topic
    cdef readonly int default_topic_queue_nums
    cdef readonly int language
    cdef readonly int version
    cdef bytes _head_v2        # {"code":310,"extFields":{"a":group,"b":
    cdef bytes _head_batch     # the same with 320
    cdef bytes _mid            # ,"c":defaultTopic,"d":"n","e":"
    cdef bytes _tail           # ,"flag":0,"language":"PYTHON","opaque":
    cdef bytes _version        # ,"serializeTypeCurrentRPC":"JSON","version":V}
    cdef ByteBuf _buf
    # with a signer (see produce_py.SendRequestWriter): its key, the fields it adds as JSON up
    # to the signature's value, and the constant parts of the content signed, UTF-8
    cdef readonly object signer
    cdef object _key
    cdef HmacKey _hkey         # _key when it is the compiled HmacKey (signed in place), else None
    cdef bytes _signed_fields  # ,"AccessKey":"ak"[,"SecurityToken":"t"],"Signature":"
    cdef bytes _sig_head       # access key [security token] group
    cdef bytes _sig_mid        # defaultTopic defaultTopicQueueNums
    cdef ByteBuf _sig

    def __init__(self, str group, str default_topic, int default_topic_queue_nums, int language, int version,
                 *, signer=None):
        cdef ByteBuf b
        self.group = group
        self.default_topic = default_topic
        self.default_topic_queue_nums = default_topic_queue_nums
        self.language = language
        self.version = version
        b.p = NULL
        b.n = 0
        b.cap = 0
        try:
            _put_json_str(&b, group)
            quoted_group = PyBytes_FromStringAndSize(<char*>b.p, b.n)
            b.n = 0
            _put_json_str(&b, default_topic)
            quoted_default = PyBytes_FromStringAndSize(<char*>b.p, b.n)
        finally:
            bytebuf_free(&b)
        group_key = _letter_key(b'"', "producerGroup")[:-1]  # "a": then the quoted group
        topic_key = _letter_key(b',"', "topic")[:-1]
        self._head_v2 = b'{"code":%d,"extFields":{' % _SEND_V2 + group_key + quoted_group + topic_key
        self._head_batch = b'{"code":%d,"extFields":{' % _SEND_BATCH + group_key + quoted_group + topic_key
        self._mid = (_letter_key(b',"', "defaultTopic")[:-1] + quoted_default
                     + _letter_key(b',"', "defaultTopicQueueNums") + str(default_topic_queue_nums).encode()
                     + _letter_key(b'","', "queueId"))
        lang = LANGUAGE_NAMES[language] if 0 <= language < len(LANGUAGE_NAMES) else "OTHER"
        self._tail = b',"flag":0,"language":"' + lang.encode() + b'","opaque":'
        self._version = b',"serializeTypeCurrentRPC":"JSON","version":' + str(version).encode() + b'}'
        self._buf.p = NULL
        self._buf.n = 0
        self._buf.cap = 0
        self._sig.p = NULL
        self._sig.n = 0
        self._sig.cap = 0
        self.signer = signer
        if signer is not None:
            fields = [(_ACCESS_KEY, signer.access_key)]
            if signer.security_token is not None:
                fields.append((_SECURITY_TOKEN, signer.security_token))
            self._key = signer.key
            if type(signer.key) is HmacKey:
                self._hkey = <HmacKey>signer.key
            b.p = NULL
            b.n = 0
            b.cap = 0
            try:
                for name, value in fields:
                    _put(&b, b',"', 2)
                    _put_utf8(&b, name)
                    _put(&b, b'":', 2)
                    _put_json_str(&b, value)
                _put(&b, b',"', 2)
                _put_utf8(&b, _SIGNATURE)
                _put(&b, b'":"', 3)
                self._signed_fields = PyBytes_FromStringAndSize(<char*>b.p, b.n)
            finally:
                bytebuf_free(&b)
            # every key the signer adds sorts before the letters: their values are signed first
            self._sig_head = "".join([v for _, v in fields] + [group]).encode("utf-8")
            self._sig_mid = (default_topic + str(default_topic_queue_nums)).encode("utf-8")

    def __dealloc__(self):
        bytebuf_free(&self._buf)
        bytebuf_free(&self._sig)

    cpdef bytes frame(self, opaque, str topic, queue_id, sys_flag, int64_t born_ms, flag, properties, body,
                      bint batch):
        """One whole request frame (``batch``: SEND_BATCH_MESSAGE, else SEND_MESSAGE_V2)."""
        cdef ByteBuf* b = &self._buf
        cdef bytes head = self._head_batch if batch else self._head_v2
        cdef Py_buffer view
        cdef Py_ssize_t hlen
        cdef bytes out
        cdef char* o
        cdef int64_t v_opaque = _int32("opaque", opaque)
        cdef int64_t v_qid = _int32("queue_id", queue_id)
        cdef int64_t v_sys = _int32("sys_flag", sys_flag)
        cdef int64_t v_flag = _int32("flag", flag)
        cdef Py_ssize_t at[5]  # where queueId's digits start, then where each number's end
        b.n = 0
        _put_bytes(b, head)
        _put_json_str(b, topic)
        _put_bytes(b, self._mid)
        at[0] = b.n
        _put_int(b, v_qid)
        at[1] = b.n
        _put_bytes(b, _F)
        _put_int(b, v_sys)
        at[2] = b.n
        _put_bytes(b, _G)
        _put_int(b, born_ms)
        at[3] = b.n
        _put_bytes(b, _H)
        _put_int(b, v_flag)
        at[4] = b.n
        _put_bytes(b, _I)
        write_properties(b, properties, _put_property)
        _put_bytes(b, _JKL if topic.startswith("%RETRY%") else _JK)
        if self._key is None:
            _put_bytes(b, _BATCH if batch else _SINGLE)
        else:
            self._put_signed(topic, at, properties, body, batch)
        _put_bytes(b, self._tail)
        _put_int(b, v_opaque)
        _put_bytes(b, self._version)
        hlen = b.n
        if hlen > MAX_HEADER_LENGTH:  # it shares a word with the serialize type
            raise ValueError(f"the request header is {hlen} bytes, a frame allows {MAX_HEADER_LENGTH}")
        PyObject_GetBuffer(body, &view, PyBUF_SIMPLE)
        try:
            if 4 + hlen + view.len > 0x7FFFFFFF:
                raise ValueError(f"a {view.len}-byte body does not fit in a frame")
            out = PyBytes_FromStringAndSize(NULL, 8 + hlen + view.len)
            o = PyBytes_AS_STRING(out)
            _put32(<uint8_t*>o, <uint32_t>(4 + hlen + view.len))
            _put32(<uint8_t*>o + 4, <uint32_t>hlen)
            memcpy(o + 8, b.p, hlen)
            memcpy(o + 8 + hlen, view.buf, view.len)
        finally:
            PyBuffer_Release(&view)
        return out


    cdef int _put_signed(self, str topic, const Py_ssize_t* at, properties, body, bint batch) except -1:
        """The end of the header's fields, then the signer's: AccessKey (SecurityToken) and the
        Signature of them all and the body (kept out of ``frame``, which unsigned sends take).
        ``at``: where the frame holds the numbers' digits (see :meth:`_content`)."""
        cdef ByteBuf* b = &self._buf
        cdef ByteBuf* s
        cdef char sig[B64_LEN]
        _put_bytes(b, _BATCH_SIGNED if batch else _SINGLE_SIGNED)
        _put_bytes(b, self._signed_fields)
        if self._hkey is None:  # a pure-Python key: its sign_content
            _put_utf8(b, self._key.sign_content(self._content(topic, at, properties, batch), body))
        else:
            self._content(topic, at, properties, batch)
            s = &self._sig
            self._hkey.mac_into(<const char*>s.p, <size_t>s.n, body, sig)
            _put(b, sig, B64_LEN)
        _put(b, b'"}', 2)
        return 0

    cdef bytes _content(self, str topic, const Py_ssize_t* at, properties, bint batch):
        """What the signature covers before the body, in ``_sig``: the frame's field values in key
        order (the signer's fields first, then the letters), as the general path's RequestSigner
        signs them; as bytes only for a pure-Python key (else None). The numbers are copied from
        the frame, not written again: ``at[0]`` is where queueId's digits start, ``at[1:5]``
        where queueId's, sysFlag's, bornTimestamp's and flag's end, the fixed pieces ``_F``,
        ``_G``, ``_H`` between them."""
        cdef ByteBuf* s = &self._sig
        cdef const char* p = <const char*>self._buf.p
        s.n = 0
        _put_bytes(s, self._sig_head)
        _put_utf8(s, topic)
        _put_bytes(s, self._sig_mid)
        _put(s, p + at[0], at[1] - at[0])
        _put(s, p + at[1] + PyBytes_GET_SIZE(_F), at[2] - at[1] - PyBytes_GET_SIZE(_F))
        _put(s, p + at[2] + PyBytes_GET_SIZE(_G), at[3] - at[2] - PyBytes_GET_SIZE(_G))
        _put(s, p + at[3] + PyBytes_GET_SIZE(_H), at[4] - at[3] - PyBytes_GET_SIZE(_H))
        write_properties(s, properties, _put_property_raw)
        _put(s, b"0false", 6)  # reconsumeTimes, unitMode
        if topic.startswith("%RETRY%"):
            _put(s, b"16", 2)  # maxReconsumeTimes
        if batch:
            _put(s, b"true", 4)
        else:
            _put(s, b"false", 5)
        if self._hkey is not None:
            return None
        return PyBytes_FromStringAndSize(<char*>s.p, s.n)


def encode_batch(messages, str topic, Py_ssize_t max_body, UniqIds ids):
    """The SEND_BATCH_MESSAGE body of ``messages`` and their UNIQ_KEYs joined by commas, or None."""
    cdef Py_ssize_t need = 0, n, i = 0
    cdef object body, props
    cdef list fresh
    cdef list keys
    for m in messages:
        body = m.body
        props = m.properties
        if type(body) is not bytes or type(props) is not dict:
            return None
        n = PyBytes_GET_SIZE(body)
        if n == 0 or n > max_body:
            return None
        t = m.topic
        if t is not topic and t != topic:
            return None
        pd = PyDict_GetItem(props, _DELAY)
        if pd != NULL and <object>pd != _ZERO:
            return None
        if PyDict_GetItem(props, _UNIQ_KEY) == NULL:
            need += 1
    fresh = ids.take(need) if need else []
    keys = []
    for m in messages:
        props = m.properties
        pu = PyDict_GetItem(props, _UNIQ_KEY)
        if pu == NULL:
            key = fresh[i]
            i += 1
            PyDict_SetItem(props, _UNIQ_KEY, key)
        else:
            key = <object>pu
        keys.append(key)
    return encode_batch_body(messages), ",".join(keys)
