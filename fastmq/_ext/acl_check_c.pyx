# cython: language_level=3
"""The per-request part of the broker's plain ACL, compiled (pure twin: ``acl_check_py``).

RocketMQ 4.9.8 signs a request with HMAC-SHA1 under the account's secret key over the values of
its header fields in key order (``Signature`` left out; the broker also leaves out
``_UNIQUE_KEY_QUERY``), UTF-8, then the raw body; the ``Signature`` field is that MAC in base64.
In Python the check cost more than the rest of a send's handling on the broker: a dict copy, a
sort, a join, the body copied behind the header bytes and three calls into ``hmac``. Here:

* :class:`HmacKey` keeps SHA-1's state after the key's inner and outer pads, so a request costs
  one struct copy and OpenSSL's SHA-1 over the content (no key set-up); the header values, a
  small body and the padding are gathered and hashed in one call of SHA-1's block function, the
  outer hash in one more; the state after a first block of content seen before is kept in the
  key (a producer's requests begin with the same access key, group and topic), so that block
  costs a compare and a copy (see ``_blocks``); compiled callers (the producer's frame writer)
  sign through :meth:`HmacKey.mac_into` (``acl_check_c.pxd``) with no Python object between;
* the sorted order of the last few field sets is kept, so a request whose fields are the same
  keys in the same order (every send of one producer) costs one pass over its dict, no sort; the
  places of the fields the check reads (AccessKey, Signature, the topic) are kept with it, so
  they are taken from that pass, not looked up;
* :func:`fast_pass` takes a connection's requests of one read and passes the leading ones that
  are plainly allowed (signed sends, batch sends and pulls by an account that may), in 4.9.8's
  order of checks; it stops at the first it cannot pass, for the general check
  (``fastmq.broker.acl``) to decide and word. An allowed (account, topic, group, code) is
  remembered by identity with the accounts table (see ``_grants``), so a producer's next send
  skips the account and permission lookups; its signature is still checked;
* :class:`Gate` reads its manager's rules from the C slots of :class:`Rules`.
"""
cimport cython
from cpython.buffer cimport PyBUF_SIMPLE, PyBuffer_Release, PyObject_GetBuffer
from cpython.bytes cimport PyBytes_AS_STRING, PyBytes_GET_SIZE
from cpython.dict cimport PyDict_GetItemWithError, PyDict_Next
from cpython.list cimport PyList_Append, PyList_GET_ITEM, PyList_GET_SIZE
from cpython.sequence cimport PySequence_DelItem
from cpython.tuple cimport PyTuple_GET_ITEM, PyTuple_GET_SIZE
from cpython.object cimport PyObject
from libc.stdint cimport uint64_t
from libc.string cimport memcmp, memcpy, memmove, memset

from .codec_c cimport RemotingCommand, command_code

__all__ = ["HmacKey", "signed", "fast_pass", "Rules", "Gate"]

cdef extern from *:
    int SHA1_Init(SHA_CTX *c) nogil
    int SHA1_Update(SHA_CTX *c, const void *data, size_t length) nogil
    int SHA1_Final(unsigned char *md, SHA_CTX *c) nogil
    void SHA1_Transform(SHA_CTX *c, const unsigned char *data) nogil

cdef extern from "Python.h":
    const char *PyUnicode_AsUTF8AndSize(object s, Py_ssize_t *size) except NULL
    bint PyUnicode_IS_ASCII(object s)
    bint PyUnicode_CheckExact(PyObject *o)
    void *PyUnicode_DATA(object s)
    Py_ssize_t PyUnicode_GET_LENGTH(object s)
    int PyUnicode_KIND(object s)
    Py_ssize_t PyDict_GET_SIZE(object d)

DEF KEY_CACHE = 8
DEF IP_CACHE = 4096
DEF GRANTS = 16

cdef int SEND_MESSAGE_V2 = 310
cdef int SEND_BATCH_MESSAGE = 320
cdef int PULL_MESSAGE = 11
cdef int PERM_DENY = 1
cdef int PERM_PUB = 4
cdef int PERM_SUB = 8
cdef str SIGNATURE = "Signature"
cdef str UNIQUE_MSG_QUERY_FLAG = "_UNIQUE_KEY_QUERY"
cdef str ACCESS_KEY = "AccessKey"
cdef str RETRY_PREFIX = "%RETRY%"
cdef str TRACE_TOPIC = "RMQ_SYS_TRACE_TOPIC"
cdef const char *B64 = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/"

# the last field sets seen, newest last: (broker side, keys in the dict's order, the positions of
# the values to hash in that order as bytes, the positions of the fields the check reads as bytes,
# 255 for an absent one, or None when a key is not an exact str)
cdef list _orders = []
# the fields the check reads, in the order of their positions in an _orders entry
cdef enum:
    AT_ACCESS_KEY = 0
    AT_SIGNATURE = 1
    AT_B = 2
    AT_TOPIC = 3
    AT_GROUP = 4
    ABSENT = 255


@cython.final
cdef class HmacKey:
    """HMAC-SHA1 keyed with one secret, ready for many messages.

    Args:
        secret: the secret key's bytes (UTF-8 of the account's ``secretKey``).
    """
    def __init__(self, bytes secret):
        cdef unsigned char key[BLOCK]
        cdef unsigned char pad[BLOCK]
        cdef SHA_CTX c
        cdef Py_ssize_t n = PyBytes_GET_SIZE(secret)
        cdef int i
        memset(key, 0, BLOCK)
        if n > BLOCK:  # RFC 2104: a long key is hashed first
            SHA1_Init(&c)
            SHA1_Update(&c, PyBytes_AS_STRING(secret), <size_t>n)
            SHA1_Final(key, &c)
        else:
            memcpy(key, PyBytes_AS_STRING(secret), <size_t>n)
        for i in range(BLOCK):
            pad[i] = key[i] ^ 0x36
        SHA1_Init(&self.inner)
        SHA1_Update(&self.inner, pad, BLOCK)
        for i in range(BLOCK):
            pad[i] = key[i] ^ 0x5c
        SHA1_Init(&self.outer)
        SHA1_Update(&self.outer, pad, BLOCK)
        memset(key, 0, BLOCK)
        memset(pad, 0, BLOCK)
        memset(self.firsts, 0, sizeof(self.firsts))

    def sign(self, dict fields, body, bint broker_side=False):
        """The base64 signature of ``fields`` (``Signature`` left out; with ``broker_side`` also
        ``_UNIQUE_KEY_QUERY``, as the broker leaves it out) and ``body``.

        Raises TypeError for a field value that is not a str, UnicodeEncodeError for one that
        cannot be UTF-8 (a lone surrogate)."""
        cdef char out[B64_LEN]
        self._mac_b64(fields, body, broker_side, out)
        return out[:B64_LEN].decode("ascii")

    def sign_content(self, bytes content, body):
        """The base64 signature of ``content`` (the signed header values already joined, UTF-8:
        the producer's frame writer gathers them as it writes the frame) and ``body``."""
        cdef char out[B64_LEN]
        self.mac_into(PyBytes_AS_STRING(content), <size_t>PyBytes_GET_SIZE(content), body, out)
        return out[:B64_LEN].decode("ascii")

    cdef int mac_into(self, const char *content, size_t n, object body, char *out) except -1:
        """:meth:`sign_content` of the ``n`` bytes at ``content``, its 28 base64 characters
        written to ``out`` (for compiled callers: no bytes object, call or str)."""
        cdef SHA_CTX c
        cdef Feed f
        f.c = &c
        self._start(&f)
        _feed(&f, content, n)
        return self._finish(&f, body, out)

    cdef void _start(self, Feed *f) noexcept:
        """``f`` empty, its context (``f.c``) at the inner pad's state."""
        memcpy(f.c, &self.inner, sizeof(SHA_CTX))
        f.firsts = self.firsts
        f.used = f.hashed = 0

    cdef int _mac_b64(self, dict fields, object body, bint broker_side, char *out) except -1:
        cdef Walk w
        return self._mac_walked(fields, &w if _walk(&w, fields) else NULL, NULL, body, broker_side, out)

    cdef int _mac_walked(self, dict fields, Walk *w, PyObject *entry, object body, bint broker_side,
                         char *out) except -1:
        """:meth:`_mac_b64` of fields already walked (``w``, NULL when there are too many to
        remember), with their remembered entry when known (``entry``, else NULL)."""
        cdef SHA_CTX c
        cdef Feed f
        f.c = &c
        self._start(&f)
        if w == NULL:  # hundreds of fields: not worth remembering, sorted each time
            for key in _signed_keys(fields, broker_side):
                _update_str(&f, fields[key])
        else:
            if entry == NULL:
                entry = _recall(w, broker_side)
            if entry == NULL:
                entry = _remember(w, fields, broker_side)
            _gather(&f, w, entry)
        return self._finish(&f, body, out)

    cdef int _finish(self, Feed *f, object body, char *out) except -1:
        """Hash ``body`` after what ``f`` holds, close the MAC and write it in base64 to ``out``."""
        cdef SHA_CTX c
        cdef unsigned char d[DIGEST]
        cdef unsigned char blk[BLOCK]
        cdef Py_buffer view
        if body is not None:
            if type(body) is bytes:
                _feed(f, PyBytes_AS_STRING(body), <size_t>PyBytes_GET_SIZE(body))
            else:
                PyObject_GetBuffer(body, &view, PyBUF_SIMPLE)
                try:
                    _feed(f, view.buf, <size_t>view.len)
                finally:
                    PyBuffer_Release(&view)
        # the outer hash is one block: the inner digest, its padding and the length of pad + digest
        # in bits, run on a copy of the outer pad's state (SHA1_Update and SHA1_Final would copy
        # it through the context's buffer and wipe that buffer after)
        _close(f, blk)
        blk[DIGEST] = 0x80
        memset(&blk[DIGEST + 1], 0, BLOCK - DIGEST - 1 - 2)
        blk[BLOCK - 2] = ((BLOCK + DIGEST) * 8) >> 8
        blk[BLOCK - 1] = ((BLOCK + DIGEST) * 8) & 0xff
        memcpy(&c, &self.outer, sizeof(SHA_CTX))
        SHA1_Transform(&c, blk)
        _put_digest(&c, d)
        _b64_digest(d, out)
        return 0

    cdef bint _matches(self, dict fields, object body) except -1:
        cdef Walk w
        cdef Walk *wp = &w if _walk(&w, fields) else NULL
        return self._matches_walked(fields, wp, _recall(wp, True) if wp != NULL else NULL, body)

    cdef bint _matches_walked(self, dict fields, Walk *w, PyObject *entry, object body) except -1:
        cdef PyObject *g = _spot(fields, w, entry, AT_SIGNATURE, SIGNATURE)
        cdef char mine[B64_LEN]
        cdef const unsigned char *theirs
        cdef unsigned char diff = 0
        cdef int i
        if g == NULL or type(<object>g) is not str:
            return False
        self._mac_walked(fields, w, entry, body, True, mine)
        # a signature that is not 28 ASCII characters cannot be base64 of 20 bytes
        if not PyUnicode_IS_ASCII(<object>g) or PyUnicode_GET_LENGTH(<object>g) != B64_LEN:
            return False
        theirs = <const unsigned char *>PyUnicode_DATA(<object>g)
        for i in range(B64_LEN):  # constant time: no early exit on the first difference
            diff |= (<unsigned char>mine[i]) ^ theirs[i]
        return diff == 0


cdef inline void _put32(unsigned char *p, SHA_LONG v) noexcept:
    p[0] = (v >> 24) & 0xff
    p[1] = (v >> 16) & 0xff
    p[2] = (v >> 8) & 0xff
    p[3] = v & 0xff


cdef inline void _put_digest(const SHA_CTX *c, unsigned char *d) noexcept:
    _put32(d, c.h0)
    _put32(d + 4, c.h1)
    _put32(d + 8, c.h2)
    _put32(d + 12, c.h3)
    _put32(d + 16, c.h4)


cdef void _close(Feed *f, unsigned char *d) noexcept:
    """SHA1_Final of the inner hash, the digest written to ``d``: the padding (0x80, zeros, the
    length in bits of the key pad and the content, big-endian) goes behind what ``f`` holds and
    the blocks go to SHA-1 in one call (a call costs about a sixth of a block's work; the
    content, a small body and the padding are gathered so that the inner hash takes one)."""
    cdef uint64_t bits = (<uint64_t>BLOCK + f.hashed + f.used) * 8
    cdef size_t n
    if f.used + BLOCK + 8 > FEED_BUF:
        _flush(f)
    n = f.used
    f.buf[n] = 0x80
    n += 1
    if (n & (BLOCK - 1)) > BLOCK - 8:
        memset(&f.buf[n], 0, BLOCK - (n & (BLOCK - 1)))
        n += BLOCK - (n & (BLOCK - 1))
    if (n & (BLOCK - 1)) != BLOCK - 8:
        memset(&f.buf[n], 0, BLOCK - 8 - (n & (BLOCK - 1)))
        n += BLOCK - 8 - (n & (BLOCK - 1))
    _put32(&f.buf[n], <SHA_LONG>(bits >> 32))
    _put32(&f.buf[n + 4], <SHA_LONG>bits)
    n += 8
    # whole blocks and nothing pending in the context: SHA-1's block function runs on f.buf as it
    # is (the context's length count is not read after this)
    _blocks(f, f.buf, n)
    f.used = 0
    _put_digest(f.c, d)


cdef void _b64_digest(const unsigned char *d, char *out) noexcept:
    cdef int i = 0, o = 0
    cdef unsigned int v
    while i < 18:
        v = (d[i] << 16) | (d[i + 1] << 8) | d[i + 2]
        out[o] = B64[(v >> 18) & 63]
        out[o + 1] = B64[(v >> 12) & 63]
        out[o + 2] = B64[(v >> 6) & 63]
        out[o + 3] = B64[v & 63]
        i += 3
        o += 4
    v = (d[18] << 16) | (d[19] << 8)
    out[24] = B64[(v >> 18) & 63]
    out[25] = B64[(v >> 12) & 63]
    out[26] = B64[(v >> 6) & 63]
    out[27] = b"="


cdef inline unsigned int _first_slot(const unsigned char *p) noexcept:
    """A slot for the block at ``p`` among FIRSTS: its eight words summed, mixed by a multiply."""
    cdef uint64_t x = 0, w = 0
    cdef int i
    for i in range(0, BLOCK, 8):
        memcpy(&w, p + i, 8)
        x += w
    return <unsigned int>((x * <uint64_t>0x9E3779B97F4A7C15ULL) >> 60) & (FIRSTS - 1)


cdef void _blocks(Feed *f, const unsigned char *p, size_t k) noexcept:
    """SHA-1 over the ``k`` bytes (whole blocks) at ``p``, the content's next. The state after
    the content's first block is a function of that block alone (the key is the HmacKey's): a
    first block seen twice lately is remembered in the key with that state, by a hash of the
    block, and from its third time on costs a copy and a compare instead of SHA-1's work (one
    block in five or six of a send's MAC). Once seen it only costs the compare and a copy of
    the block: the hash is not split in two calls for a block that may never come back."""
    cdef First *e
    if f.hashed == 0 and k >= BLOCK:
        e = &f.firsts[_first_slot(p)]
        if e.seen and memcmp(e.block, p, BLOCK) == 0:
            if e.ready:
                memcpy(f.c, &e.state, sizeof(SHA_CTX))
            else:
                SHA1_Update(f.c, p, BLOCK)
                memcpy(&e.state, f.c, sizeof(SHA_CTX))
                e.ready = True
            p += BLOCK
            k -= BLOCK
        else:
            memcpy(e.block, p, BLOCK)
            e.seen = True
            e.ready = False
    if k:
        SHA1_Update(f.c, p, k)


cdef inline void _feed(Feed *f, const void *p, size_t n) noexcept:
    if f.used + n <= FEED_BUF:
        memcpy(&f.buf[f.used], p, n)
        f.used += n
    else:
        _feed_long(f, <const unsigned char *>p, n)


cdef void _flush(Feed *f) noexcept:
    """Hash buf's whole blocks; the rest (under a block) moves to its start."""
    cdef size_t k = f.used & ~(<size_t>BLOCK - 1)
    if k:
        _blocks(f, f.buf, k)
        f.hashed += k
        f.used -= k
        memmove(f.buf, &f.buf[k], f.used)


cdef void _feed_long(Feed *f, const unsigned char *p, size_t n) noexcept:
    """_feed of more than buf has room for: buf's last block completed from ``p`` and hashed with
    the others, then ``p``'s whole blocks from where they are, its tail kept in buf."""
    cdef size_t k = (BLOCK - (f.used & (BLOCK - 1))) & (BLOCK - 1)
    if k > n:
        k = n
    memcpy(&f.buf[f.used], p, k)
    f.used += k
    p += k
    n -= k
    _flush(f)
    k = n & ~(<size_t>BLOCK - 1)
    if k:
        _blocks(f, p, k)
        f.hashed += k
        p += k
        n -= k
    memcpy(&f.buf[f.used], p, n)
    f.used += n


cdef inline int _update_str(Feed *f, object value) except -1:
    cdef Py_ssize_t n = 0
    cdef const char *p
    if type(value) is not str:
        raise TypeError(f"a header field value must be a str, not {type(value).__name__}")
    if PyUnicode_IS_ASCII(value):
        n = PyUnicode_GET_LENGTH(value)
        if n:
            _feed(f, PyUnicode_DATA(value), <size_t>n)
    else:
        p = PyUnicode_AsUTF8AndSize(value, &n)
        _feed(f, p, <size_t>n)
    return 0


cdef list _signed_keys(dict fields, bint broker_side):
    """The keys whose values are signed, sorted."""
    keys = [key for key in fields if key != SIGNATURE and not (broker_side and key == UNIQUE_MSG_QUERY_FLAG)]
    keys.sort()
    return keys


cdef bint _walk(Walk *w, dict fields) noexcept:
    """``fields``' keys and values in its order into ``w``; False when there are more than
    MAX_FIELDS (then they are not remembered: sorted each time, looked up in the dict)."""
    cdef Py_ssize_t pos = 0, i = 0
    cdef PyObject *pk = NULL
    cdef PyObject *pv = NULL
    if PyDict_GET_SIZE(fields) > MAX_FIELDS:
        return False
    w.plain = True
    while PyDict_Next(fields, &pos, &pk, &pv):
        w.keys[i] = pk
        w.values[i] = pv
        if not PyUnicode_CheckExact(pk):
            w.plain = False
        i += 1
    w.n = i
    return True


@cython.boundscheck(False)
@cython.wraparound(False)
cdef PyObject *_recall(Walk *w, bint broker_side) noexcept:
    """The remembered entry (borrowed) of a field set seen before, its keys in the same order
    (every send of one producer), else NULL. The entries are read in place."""
    cdef PyObject *entry
    cdef PyObject *known
    cdef PyObject *k
    cdef PyObject **keys = w.keys
    cdef Py_ssize_t i, j, m = PyList_GET_SIZE(_orders), n = w.n
    cdef bint same
    for j in range(m - 1, -1, -1):
        entry = PyList_GET_ITEM(_orders, j)
        known = PyTuple_GET_ITEM(<object>entry, 1)
        if <bint>(<object>PyTuple_GET_ITEM(<object>entry, 0)) != broker_side \
                or PyTuple_GET_SIZE(<object>known) != n:
            continue
        same = True
        for i in range(n):
            k = PyTuple_GET_ITEM(<object>known, i)
            # keys are the codec's cached strings: identity nearly always decides
            if k != keys[i] and not (PyUnicode_CheckExact(keys[i]) and PyUnicode_CheckExact(k)
                                     and _same_str(keys[i], k)):
                same = False
                break
        if same:
            if j != m - 1:  # the newest first next time (several producers' field sets alternate)
                PyList_Append(_orders, <object>entry)  # (the list holds it twice for a moment)
                PySequence_DelItem(_orders, j)
            return PyList_GET_ITEM(_orders, PyList_GET_SIZE(_orders) - 1)
    return NULL


cdef inline bint _same_str(PyObject *a, PyObject *b) noexcept:
    """Two exact str equal as str.__eq__ finds them (same length, kind and code points)."""
    cdef Py_ssize_t n = PyUnicode_GET_LENGTH(<object>a)
    cdef int kind = PyUnicode_KIND(<object>a)
    return (n == PyUnicode_GET_LENGTH(<object>b) and kind == PyUnicode_KIND(<object>b)
            and memcmp(PyUnicode_DATA(<object>a), PyUnicode_DATA(<object>b), <size_t>(n * kind)) == 0)


cdef PyObject *_remember(Walk *w, dict fields, bint broker_side) except NULL:
    """Remember a new field set (the oldest of KEY_CACHE goes): its entry, borrowed."""
    cdef Py_ssize_t n = w.n
    keys = [<object>w.keys[i] for i in range(n)]
    where = {keys[i]: i for i in range(n)}
    perm = bytes([where[key] for key in _signed_keys(fields, broker_side)])
    spots = None
    if w.plain:
        spots = bytes([where.get(name, ABSENT) for name in (ACCESS_KEY, SIGNATURE, "b", "topic", "consumerGroup")])
    if PyList_GET_SIZE(_orders) >= KEY_CACHE:
        del _orders[0]
    _orders.append((broker_side, tuple(keys), perm, spots))
    return PyList_GET_ITEM(_orders, PyList_GET_SIZE(_orders) - 1)


@cython.boundscheck(False)
@cython.wraparound(False)
cdef int _gather(Feed *c, Walk *w, PyObject *entry) except -1:
    """Feed the walked values in the remembered entry's order."""
    cdef object perm = <object>PyTuple_GET_ITEM(<object>entry, 2)
    cdef const unsigned char *order = <const unsigned char *>PyBytes_AS_STRING(perm)
    cdef Py_ssize_t i
    for i in range(PyBytes_GET_SIZE(perm)):
        _update_str(c, <object>w.values[order[i]])
    return 0


cdef PyObject *_spot(dict fields, Walk *w, PyObject *entry, int at, str name) except? NULL:
    """The value of the field ``name`` (``at`` its place among an entry's positions), NULL when
    absent: from the walk where the entry knows where it is (a lookup in the decoder's dict, made
    for any keys, compares our key with its own by a rich comparison), else from the dict."""
    cdef object spots
    cdef unsigned char k
    if entry != NULL:
        spots = <object>PyTuple_GET_ITEM(<object>entry, 3)
        if spots is not None:
            k = (<const unsigned char *>PyBytes_AS_STRING(spots))[at]
            return NULL if k == ABSENT else w.values[k]
    return PyDict_GetItemWithError(fields, name)


def signed(HmacKey key, dict fields, body):
    """True when ``fields``' ``Signature`` is the broker-side signature of ``fields`` and ``body``
    under ``key`` (compared in constant time). Raises as :meth:`HmacKey.sign` does."""
    return key._matches(fields, body)


cdef inline int _perm_of(object perms, object resource, int default) except? -2:
    cdef PyObject *p
    if perms is None:
        return default
    p = PyDict_GetItemWithError(<dict>perms, resource)
    return default if p == NULL else <int>(<object>p)


cdef inline object _plain_topic(dict ext, Walk *w, PyObject *entry, int at, str key):
    """The topic in ``key``, or None when absent, not a str or a retry topic (a group's)."""
    cdef PyObject *p = _spot(ext, w, entry, at, key)
    if p == NULL or type(<object>p) is not str or (<str>(<object>p)).startswith(RETRY_PREFIX):
        return None
    return <object>p


cdef bint _allowed(tuple acc, int code, object topic, object group) except -1:
    """The account's permissions allow ``code`` on ``topic`` (a pull: and on ``group``, the
    consumer group's retry topic)."""
    cdef object perms
    cdef int mine
    if code == SEND_BATCH_MESSAGE:  # 4.9.8 names no resource for it: signed is enough
        return True
    # (key, white, admin, default topic perm, default group perm, perms)
    perms = acc[5]
    if perms is None and acc[2]:  # an admin with no resource permissions may do anything
        return True
    if code == SEND_MESSAGE_V2:
        mine = _perm_of(perms, topic, acc[3])
        return (not (mine & PERM_DENY) and (mine & PERM_PUB) != 0) or topic == TRACE_TOPIC
    mine = _perm_of(perms, topic, acc[3])
    if mine & PERM_DENY or not (mine & PERM_SUB):
        return False
    mine = _perm_of(perms, RETRY_PREFIX + <str>group, acc[4])
    return not (mine & PERM_DENY) and (mine & PERM_SUB) != 0


# the last requests' accounts and permission answers, newest last, by the identity of the accounts
# table (a reload replaces it, never changes it in place), of the access key, topic and group
# strings (the decoder hands out the same str objects for recurring values) and the code: an
# entry is (accounts, access key, code, topic or None, group or None, the account's tuple), made
# only for allowed requests. The objects are held, so an address is never another string's.
cdef list _grants = []


@cython.boundscheck(False)
@cython.wraparound(False)
cdef PyObject *_granted(dict accounts, PyObject *ak, int code, PyObject *topic, PyObject *group) noexcept:
    """The account tuple (borrowed) of a grant remembered for these objects, else NULL."""
    cdef PyObject *g
    cdef Py_ssize_t j
    for j in range(PyList_GET_SIZE(_grants) - 1, -1, -1):
        g = PyList_GET_ITEM(_grants, j)
        if (PyTuple_GET_ITEM(<object>g, 0) == <PyObject *>accounts and PyTuple_GET_ITEM(<object>g, 1) == ak
                and PyTuple_GET_ITEM(<object>g, 3) == topic and PyTuple_GET_ITEM(<object>g, 4) == group
                and <int>(<object>PyTuple_GET_ITEM(<object>g, 2)) == code):
            return PyTuple_GET_ITEM(<object>g, 5)
    return NULL


cdef int _grant(dict accounts, object ak, int code, object topic, object group, tuple acc) except -1:
    if PyList_GET_SIZE(_grants) >= GRANTS:
        del _grants[0]
    _grants.append((accounts, ak, code, topic, group, acc))
    return 0


cdef bint _passes(RemotingCommand req, int code, object ip, dict accounts) except -1:
    cdef object ext = req.ext_fields
    cdef PyObject *p
    cdef PyObject *ak
    cdef PyObject *t = <PyObject *>None
    cdef PyObject *g = <PyObject *>None
    cdef tuple acc
    cdef object white
    cdef Walk walk
    cdef Walk *w
    cdef PyObject *e
    if type(ext) is not dict:
        return False
    # the fields are walked once: a field set seen before says where the fields the check reads
    # are, and in which order the MAC hashes them
    w = &walk if _walk(&walk, <dict>ext) else NULL
    e = _recall(w, True) if w != NULL else NULL
    ak = _spot(<dict>ext, w, e, AT_ACCESS_KEY, ACCESS_KEY)
    if ak == NULL or type(<object>ak) is not str:
        return False
    if code == SEND_MESSAGE_V2:
        t = _spot(<dict>ext, w, e, AT_B, "b")
        if t == NULL:
            return False
    elif code == PULL_MESSAGE:
        t = _spot(<dict>ext, w, e, AT_TOPIC, "topic")
        g = _spot(<dict>ext, w, e, AT_GROUP, "consumerGroup")
        if t == NULL or g == NULL or type(<object>g) is not str:
            return False
    # the same account, resources and code as a request allowed lately: its answer stands (the
    # signature is still checked, each request's own)
    p = _granted(accounts, ak, code, t, g)
    if p != NULL:  # (granted only to accounts without white addresses: nothing else to ask)
        return (<HmacKey>(<tuple>p)[0])._matches_walked(<dict>ext, w, e, req.body)
    p = PyDict_GetItemWithError(accounts, <object>ak)
    if p == NULL:
        return False
    acc = <tuple>p
    # (key, white, admin, default topic perm, default group perm, perms)
    white = acc[1]
    if white is None:
        return _passes_slow(req, code, <dict>ext, w, e, acc, accounts, <object>ak)
    if white(ip):
        return False  # allowed unsigned: the general check says so
    # the matcher is Python code: nothing borrowed before it is trusted after it
    w = &walk if _walk(&walk, <dict>ext) else NULL
    e = _recall(w, True) if w != NULL else NULL
    return _passes_slow(req, code, <dict>ext, w, e, acc, None, None)


cdef bint _passes_slow(RemotingCommand req, int code, dict ext, Walk *w, PyObject *e, tuple acc,
                       dict accounts, object ak) except -1:
    """_passes without a remembered answer: the resources read, the signature checked, the
    permissions asked; an allowed answer is remembered under ``accounts`` and ``ak`` when given."""
    cdef object topic = None, group = None
    cdef PyObject *p
    if code == SEND_MESSAGE_V2:
        topic = _plain_topic(ext, w, e, AT_B, "b")
        if topic is None:
            return False
    elif code == PULL_MESSAGE:
        topic = _plain_topic(ext, w, e, AT_TOPIC, "topic")
        p = _spot(ext, w, e, AT_GROUP, "consumerGroup")
        if topic is None or p == NULL or type(<object>p) is not str:
            return False
        group = <object>p
    if not (<HmacKey>acc[0])._matches_walked(ext, w, e, req.body):
        return False
    if not _allowed(acc, code, topic, group):
        return False
    if accounts is not None:
        _grant(accounts, ak, code, topic, group, acc)
    return True


def fast_pass(list requests, Py_ssize_t start, str ip, dict accounts):
    """The index of the first of ``requests[start:]`` that is not plainly allowed (``len(requests)``
    when all are).

    Plainly allowed: a SEND_MESSAGE_V2, SEND_BATCH_MESSAGE or PULL_MESSAGE whose account (by
    ``AccessKey`` in ``accounts``: access key -> ``(HmacKey, white matcher or None, admin,
    defaultTopicPerm, defaultGroupPerm, resource perms or None)``) is not white-listed for
    ``ip``, whose signature is right and whose permissions allow it. Every other request, and one
    whose fields cannot be hashed, stops the pass. The caller has checked the global white
    addresses."""
    return _run(requests, start, ip, accounts)


cdef Py_ssize_t _run(list requests, Py_ssize_t start, object ip, dict accounts) except -1:
    cdef Py_ssize_t i = start
    cdef object r
    cdef int code
    # the size is read each time: a white-address matcher is Python code and could change the list
    while i < PyList_GET_SIZE(requests):
        r = <object>PyList_GET_ITEM(requests, i)
        if type(r) is not RemotingCommand:
            return i
        code = command_code(<RemotingCommand>r)
        if code != SEND_MESSAGE_V2 and code != PULL_MESSAGE and code != SEND_BATCH_MESSAGE:
            return i
        try:
            if not _passes(<RemotingCommand>r, code, ip, accounts):
                return i
        except (TypeError, ValueError):  # a field that cannot be hashed: the general check words it
            return i
        i += 1
    return max(start, PyList_GET_SIZE(requests))


@cython.auto_pickle(False)  # a server's rules, never sent anywhere
cdef class Rules:
    """What a gate reads of its manager at each read, in slots it reads without a lookup (two
    attribute lookups cost a tenth of the check): ``global_white``, the global white-address
    matchers, and ``fast``, the accounts as :func:`fast_pass` reads them. The manager (a
    subclass) replaces them on a reload, so a gate sees new rules from its next read; ``fast`` is
    replaced, never changed in place (the fast pass remembers answers by its identity)."""
    cdef public list global_white
    cdef public dict fast

    def __cinit__(self):
        self.global_white = []
        self.fast = {}

    def white_listed(self, ip):
        """True when ``ip`` matches a global white address (the subclass says how)."""
        raise NotImplementedError("the subclass matches the global white addresses")


@cython.auto_pickle(False)  # a server's gate, never sent anywhere
cdef class Gate:
    """The per-read part of a server's ACL gate (the check in front of its dispatcher): one C call
    per read, where a Python method cost as much as the signature check it leads to.

    ``manager`` (a :class:`Rules`) gives ``global_white`` (white-address matchers) with
    ``white_listed(ip)`` (a peer that matches one is let through unchecked: called only when there
    are any) and ``fast`` (the accounts as :func:`fast_pass` reads them), read at each call (a
    reload replaces them). A read whose requests are all plainly allowed goes to
    ``handler(conn, requests)`` as it is; else :meth:`general` gets it with the index of the first
    request :func:`fast_pass` could not pass. A subclass gives :meth:`general` and
    :meth:`peer_ip` (a connection's ``remote_addr`` -> its IP, remembered per address)."""
    cdef readonly Rules manager
    cdef readonly object handler
    cdef dict _ips

    def __init__(self, Rules manager not None, handler):
        self.manager = manager
        self.handler = handler
        self._ips = {}

    def __call__(self, conn, list requests not None):
        self._take(conn, requests)

    def take(self, conn, list requests not None):
        """The gate called (what a server hands its connections: a bound method is called
        without the argument tuple a call of the gate itself makes)."""
        self._take(conn, requests)

    cdef int _take(self, conn, list requests) except -1:
        cdef object addr = conn.remote_addr
        cdef PyObject *p = PyDict_GetItemWithError(self._ips, addr)
        cdef object ip
        cdef Rules manager
        cdef Py_ssize_t i
        if p != NULL:
            ip = <object>p
        else:
            if len(self._ips) >= IP_CACHE:  # bounded: connections come and go
                self._ips.clear()
            ip = self.peer_ip(addr)
            self._ips[addr] = ip
        manager = self.manager
        # 4.9.8's first check: a globally white peer is not checked at all (no call when none)
        if manager.global_white and manager.white_listed(ip):
            self.handler(conn, requests)
            return 0
        if manager.fast is None:
            raise TypeError("the manager's fast accounts must be a dict")
        i = _run(requests, 0, ip, manager.fast)
        if i >= PyList_GET_SIZE(requests):
            self.handler(conn, requests)
        else:
            self.general(conn, requests, i, ip)
        return 0

    def peer_ip(self, remote_addr):
        """``remote_addr`` (``ip:port``) -> the peer's IP as the white addresses are matched against."""
        raise NotImplementedError("the subclass normalises a peer's address")

    def general(self, conn, list requests, Py_ssize_t start, ip):
        """Decide ``requests[start:]`` (the first of them not plainly allowed) and pass on what is
        allowed, with ``requests[:start]``."""
        raise NotImplementedError("the subclass decides what the fast pass did not")
