# cython: language_level=3, embedsignature=True
"""The broker's send stage, compiled twin of ``send_py`` (read that module for the contract).

One call per step for all the SEND frames of a socket read:

- :func:`encode_sends` decides which requests the fast path takes as they are and turns those
  into commit-log records (RocketMQ's store format, IPv4 hosts) in the staging buffer of a
  :class:`~fastmq._ext.send_batch.SendBatch`, plus an int64 row per record;
- :func:`encode_answers` writes every SUCCESS response frame once the store has placed them.

Placing and indexing the records is the store's stage (``record_writer_c``). A request the fast
path does not take as is (an unknown topic, a retry topic, a delay level, a transactional flag,
a malformed field, ...) is left out and listed in ``SendBatch.slow``; the Python send processor
answers it the long way, with RocketMQ's exact checks and remarks.

Record layout (declared in ``protocol/record_layout.py``, cimported through the generated
``wire_facts.pxd``; big-endian, ``pos`` relative to the record)::

    0 TOTALSIZE i32 | 4 MAGICCODE i32 | 8 BODYCRC i32 | 12 QUEUEID i32 | 16 FLAG i32
    20 QUEUEOFFSET i64 | 28 PHYSICALOFFSET i64 | 36 SYSFLAG i32 | 40 BORNTIMESTAMP i64
    48 BORNHOST 8 | 56 STORETIMESTAMP i64 | 64 STOREHOST 8 | 72 RECONSUMETIMES i32
    76 PREPARED_TRANSACTION_OFFSET i64 | 84 BODYLEN i32 | 88 BODY | TOPICLEN u8 | TOPIC
    | PROPERTIESLEN u16 | PROPERTIES
"""
cimport cython
from cpython.bytes cimport PyBytes_AS_STRING, PyBytes_GET_SIZE, PyBytes_FromStringAndSize
from cpython.dict cimport PyDict_GetItem
from cpython.object cimport PyObject
from libc.stdint cimport int32_t, int64_t, uint8_t, uint16_t, uint32_t, uint64_t
from libc.string cimport memcmp, memcpy

from fastmq.protocol.headers import send_wire_names
from fastmq._ext.send_py import SEND_FAST_ATTRS
from fastmq.protocol.message_const import NAME_VALUE_SEPARATOR as _NV_STR, PROPERTY_SEPARATOR as _PS_STR, MessageConst

from .bigendian cimport get32 as _get32, put32 as _put32, put64 as _put64
from .bytebuf cimport bytebuf_reserve
from .codec_c cimport RemotingCommand, command_code, command_flag, command_opaque, command_serialize_type
from .javahash cimport jhash
from .properties cimport name_is
from .send_batch_c cimport (C_FLAGS, C_KEY, C_PHYS, C_POS, C_QID, C_QOFF, C_REQ, C_SIZE, C_TAGS, F_INDEX, F_WAIT,
                            NCOLS, SendBatch)
from .wire_facts cimport *

include "property_pairs.pxi"

cdef extern from "Python.h":
    const char* PyUnicode_AsUTF8AndSize(object o, Py_ssize_t *size) except NULL

__all__ = ["encode_sends", "encode_answers", "crc32", "java_hash"]

cdef enum:
    # the wire facts below come from the generated wire_facts.pxd (protocol's declarations)
    FIXED = REC_MIN_LEN_V4  # a record without body, topic and properties (IPv4 hosts)
    CODE_SEND = REQUEST_SEND_MESSAGE
    CODE_SEND_V2 = REQUEST_SEND_MESSAGE_V2
    CODE_SEND_BATCH = REQUEST_SEND_BATCH_MESSAGE
    MAGIC = MESSAGE_MAGIC_CODE
    TX_MASK = SYSFLAG_TRANSACTION_PREPARED_TYPE | SYSFLAG_TRANSACTION_COMMIT_TYPE
    TX_PREPARED = SYSFLAG_TRANSACTION_PREPARED_TYPE
    TX_ROLLBACK = SYSFLAG_TRANSACTION_ROLLBACK_TYPE
    HOST_V6_BITS = SYSFLAG_HOST_V6_BITS
    MAX_TOPIC = REC_MAX_TOPIC_LEN
    MAX_PROPS = REC_MAX_PROPERTIES_LEN
    NV_SEP = NAME_VALUE_SEPARATOR
    PROP_SEP = PROPERTY_SEPARATOR

# ----------------------------------------------------------------------------- CRC-32 (zlib's)
cdef uint32_t _CRC[8][256]


cdef void _crc_init() noexcept:
    cdef uint32_t c, i, k
    for i in range(256):
        c = i
        for k in range(8):
            c = (c >> 1) ^ ((<uint32_t>0xEDB88320) if c & 1 else 0)
        _CRC[0][i] = c
    for i in range(256):
        for k in range(1, 8):
            _CRC[k][i] = (_CRC[k - 1][i] >> 8) ^ _CRC[0][_CRC[k - 1][i] & 0xFF]


_crc_init()


@cython.boundscheck(False)
@cython.wraparound(False)
cdef uint32_t _crc32(const uint8_t* p, Py_ssize_t n) noexcept nogil:
    # slice-by-8: eight table lookups per 8 bytes, ~3x a byte-wise loop
    cdef uint32_t c = ~(<uint32_t>0)
    cdef uint32_t lo, hi
    while n >= 8:
        lo = c ^ (<uint32_t>p[0] | (<uint32_t>p[1] << 8) | (<uint32_t>p[2] << 16) | (<uint32_t>p[3] << 24))
        hi = <uint32_t>p[4] | (<uint32_t>p[5] << 8) | (<uint32_t>p[6] << 16) | (<uint32_t>p[7] << 24)
        c = (_CRC[7][lo & 0xFF] ^ _CRC[6][(lo >> 8) & 0xFF] ^ _CRC[5][(lo >> 16) & 0xFF] ^ _CRC[4][lo >> 24]
             ^ _CRC[3][hi & 0xFF] ^ _CRC[2][(hi >> 8) & 0xFF] ^ _CRC[1][(hi >> 16) & 0xFF] ^ _CRC[0][hi >> 24])
        p += 8
        n -= 8
    while n > 0:
        c = (c >> 8) ^ _CRC[0][(c ^ p[0]) & 0xFF]
        p += 1
        n -= 1
    return ~c


def crc32(data: bytes) -> int:
    """zlib's CRC-32 of ``data`` (exposed for the differential tests)."""
    return _crc32(<const uint8_t*>PyBytes_AS_STRING(data), PyBytes_GET_SIZE(data))


# ----------------------------------------------------------------------------- Java String.hashCode
def java_hash(data: bytes) -> int:
    """Java's String.hashCode() of the UTF-8 text ``data`` (signed int32)."""
    return <int32_t>jhash(<const uint8_t*>PyBytes_AS_STRING(data), PyBytes_GET_SIZE(data), 0)


@cython.boundscheck(False)
cdef bint _valid_utf8(const uint8_t* p, Py_ssize_t n) noexcept nogil:
    """Strict UTF-8 (no surrogates, no overlongs), as Python's decoder accepts it."""
    cdef Py_ssize_t i = 0
    cdef uint8_t c, c1
    while i < n:
        c = p[i]
        if c < 0x80:
            i += 1
            continue
        if c < 0xC2:
            return False
        if c < 0xE0:
            if i + 1 >= n or (p[i + 1] & 0xC0) != 0x80:
                return False
            i += 2
        elif c < 0xF0:
            if i + 2 >= n or (p[i + 1] & 0xC0) != 0x80 or (p[i + 2] & 0xC0) != 0x80:
                return False
            c1 = p[i + 1]
            if (c == 0xE0 and c1 < 0xA0) or (c == 0xED and c1 >= 0xA0):
                return False
            i += 3
        elif c < 0xF5:
            if (i + 3 >= n or (p[i + 1] & 0xC0) != 0x80 or (p[i + 2] & 0xC0) != 0x80
                    or (p[i + 3] & 0xC0) != 0x80):
                return False
            c1 = p[i + 1]
            if (c == 0xF0 and c1 < 0x90) or (c == 0xF4 and c1 >= 0x90):
                return False
            i += 4
        else:
            return False
    return True


# ----------------------------------------------------------------------------- properties scan
cdef struct Props:
    int ok              # well formed: k\x01v pairs separated by \x02, non-empty keys
    int open_end        # no \x02 after the last pair (the Java client's form): the record adds one
    int wait            # WAIT is not "false"
    int index           # KEYS or UNIQ_KEY present and not empty
    int delay           # DELAY, TIMER_*, or a TRAN_MSG other than one "true": the processor judges the request
    int half            # TRAN_MSG is "true": a half (taken when encode_sends has a half topic)
    int cluster         # CLUSTER present
    int has_tags
    uint32_t tags_hash


@cython.boundscheck(False)
cdef Props _scan_props(const uint8_t* p, Py_ssize_t n) noexcept nogil:
    cdef Props r
    r.ok = 1
    r.open_end = 0
    r.wait = 1
    r.index = 0
    r.delay = 0
    r.half = 0
    r.cluster = 0
    r.has_tags = 0
    r.tags_hash = 0
    cdef Py_ssize_t i = 0, ks, kn = 0, vs = 0, vn = 0
    if n == 0:
        return r
    # 4.9's messageProperties2String drops the separator after the last pair: the Java client
    # sends its properties so; the end of the string then closes the last value
    r.open_end = p[n - 1] != PROP_SEP
    while i < n:
        ks = i
        i = next_pair(p, n, i, &kn, &vs, &vn)
        if i < 0:
            r.ok = 0
            return r
        if name_is(p + ks, kn, PROP_TAGS, PROP_TAGS_LEN):
            r.has_tags = vn > 0
            r.tags_hash = jhash(p + vs, vn, 0)
        elif name_is(p + ks, kn, PROP_WAIT_STORE_MSG_OK, PROP_WAIT_STORE_MSG_OK_LEN):
            r.wait = not name_is(p + vs, vn, "false", 5)
        elif (name_is(p + ks, kn, PROP_KEYS, PROP_KEYS_LEN)
              or name_is(p + ks, kn, PROP_UNIQ_CLIENT_MESSAGE_ID_KEYIDX, PROP_UNIQ_CLIENT_MESSAGE_ID_KEYIDX_LEN)):
            if vn > 0:
                r.index = 1
        elif name_is(p + ks, kn, PROP_DELAY_TIME_LEVEL, PROP_DELAY_TIME_LEVEL_LEN):
            r.delay = 1
        elif name_is(p + ks, kn, PROP_TRANSACTION_PREPARED, PROP_TRANSACTION_PREPARED_LEN):
            if name_is(p + vs, vn, "true", 4) and not r.half:
                r.half = 1
            else:
                r.delay = 1
        elif name_is(p + ks, kn, PROP_CLUSTER, PROP_CLUSTER_LEN):
            r.cluster = 1
        elif kn > PROP_TIMER_PREFIX_LEN and memcmp(p + ks, PROP_TIMER_PREFIX, PROP_TIMER_PREFIX_LEN) == 0:
            r.delay = 1  # a timer message: the processor decides whether it is held
    return r


# ----------------------------------------------------------------------------- integer fields
cdef int _parse_i64(object v, int64_t* out) except -1:
    """A decimal header value; 0 when it is not a plain ``-?[0-9]+`` str within int64."""
    cdef Py_ssize_t n = 0, i = 0
    cdef const char* s
    cdef uint64_t acc = 0
    cdef bint neg = False
    if type(v) is not str:
        return 0
    s = PyUnicode_AsUTF8AndSize(v, &n)
    if n == 0:
        return 0
    if s[0] == 45:  # '-'
        neg = True
        i = 1
        if n == 1:
            return 0
    if n - i > 18:
        return 0
    while i < n:
        if s[i] < 48 or s[i] > 57:
            return 0
        acc = acc * 10 + <uint64_t>(s[i] - 48)
        i += 1
    out[0] = -<int64_t>acc if neg else <int64_t>acc
    return 1


cdef inline bint _i32(int64_t v) noexcept:
    return -2147483648 <= v <= 2147483647


cdef struct RecIn:
    int32_t queue_id
    int32_t flag
    int32_t sys_flag
    int64_t born_ts
    int32_t reconsume
    const uint8_t* body
    Py_ssize_t body_len
    const uint8_t* topic
    Py_ssize_t topic_len
    const uint8_t* props
    Py_ssize_t props_len
    Py_ssize_t props_sep  # 1: a \x02 goes between the message's properties and CLUSTER


@cython.boundscheck(False)
@cython.wraparound(False)
cdef int _write_record(SendBatch b, RecIn* r, const uint8_t* born_host, const uint8_t* store_host,
                       const uint8_t* cluster, Py_ssize_t cluster_len) except -1:
    """Append one record to the staging buffer (offsets and store timestamp left 0)."""
    cdef Py_ssize_t plen = r.props_len + r.props_sep + cluster_len
    cdef Py_ssize_t size = FIXED + r.body_len + r.topic_len + plen
    bytebuf_reserve(&b.staging, size, 65536)
    cdef uint8_t* p = b.staging.p + b.staging.n
    _put32(p + REC_TOTALSIZE_POS, <uint32_t>size)
    _put32(p + REC_MAGICCODE_POS, <uint32_t>MAGIC)
    _put32(p + REC_BODYCRC_POS, _crc32(r.body, r.body_len) & 0x7FFFFFFF)
    _put32(p + REC_QUEUEID_POS, <uint32_t>r.queue_id)
    _put32(p + REC_FLAG_POS, <uint32_t>r.flag)
    _put64(p + REC_QUEUEOFFSET_POS, 0)
    _put64(p + REC_PHYSICALOFFSET_POS, 0)
    _put32(p + REC_SYSFLAG_POS, <uint32_t>r.sys_flag)
    _put64(p + REC_BORNTIMESTAMP_POS, <uint64_t>r.born_ts)
    memcpy(p + REC_BORNHOST_POS, born_host, REC_IPV4_HOST_LEN)
    _put64(p + REC_STORETIMESTAMP_POS, 0)
    memcpy(p + REC_STOREHOST_POS, store_host, REC_IPV4_HOST_LEN)
    _put32(p + REC_RECONSUMETIMES_POS, <uint32_t>r.reconsume)
    _put64(p + REC_PREPARED_TRANSACTION_OFFSET_POS, 0)
    _put32(p + REC_BODYLEN_POS, <uint32_t>r.body_len)
    p += REC_BODY_POS
    memcpy(p, r.body, r.body_len)
    p += r.body_len
    p[0] = <uint8_t>r.topic_len
    memcpy(p + 1, r.topic, r.topic_len)
    p += 1 + r.topic_len
    p[0] = <uint8_t>(plen >> 8)
    p[1] = <uint8_t>plen
    memcpy(p + 2, r.props, r.props_len)
    if r.props_sep:
        p[2 + r.props_len] = PROP_SEP
    memcpy(p + 2 + r.props_len + r.props_sep, cluster, cluster_len)
    b.staging.n += size
    return <int>size


# the send header's wire names, from the declaration (protocol/headers.py), by send_py's positions
cdef tuple _V1
cdef tuple _V2
_V1, _V2 = send_wire_names(SEND_FAST_ATTRS)


cdef struct Ctx:
    const uint8_t* born_host
    const uint8_t* store_host
    const uint8_t* cluster
    Py_ssize_t cluster_len
    int64_t max_size
    bint binary  # requests in the binary header (serialize type 1) are taken too
    PyObject* half_topic  # the half topic (a str) when halves are taken, else NULL


@cython.boundscheck(False)
@cython.wraparound(False)
def encode_sends(list requests, dict topics, bytes born_host, bytes store_host, bytes cluster_prop,
                 long long max_size, long long rr=0, *, set groups=None, list born_hosts=None,
                 bint binary=False, str half_topic=None) -> SendBatch:
    """Encode every request the fast path takes; list the others in ``slow``.

    ``topics`` maps a topic that passed the processor's checks to ``(queue id bound, write queue
    nums, sys flag bits to add)``; ``born_host`` and ``store_host`` are packed IPv4 hosts;
    ``cluster_prop`` is ``b"CLUSTER\\x01<name>\\x02"``; ``max_size`` the largest record accepted;
    ``groups``, when given, the producer groups that passed those checks (others go the long way);
    ``born_hosts``, when given, request ``i``'s own born host (the requests of several
    connections in one batch) in place of ``born_host``; ``binary``: take requests in RocketMQ's
    binary header too (their answers then need encode_answers' ``binary_template``);
    ``half_topic``: take halves too (send_py's ``_half``).
    """
    cdef SendBatch b = SendBatch.__new__(SendBatch)
    cdef Py_ssize_t nreq = len(requests), i, mark, first_row, nkeys
    cdef long long rr0
    cdef object host
    if len(born_host) != REC_IPV4_HOST_LEN or len(store_host) != REC_IPV4_HOST_LEN:
        raise ValueError("the fast path takes packed IPv4 hosts (8 bytes)")
    if born_hosts is not None:
        if len(born_hosts) != nreq:
            raise ValueError("born_hosts must give one host per request")
        for host in born_hosts:
            if type(host) is not bytes or PyBytes_GET_SIZE(host) != REC_IPV4_HOST_LEN:
                raise ValueError("the fast path takes packed IPv4 hosts (8 bytes)")
    b.start(nreq, rr)
    cdef Ctx ctx
    ctx.born_host = <const uint8_t*>PyBytes_AS_STRING(born_host)
    ctx.store_host = <const uint8_t*>PyBytes_AS_STRING(store_host)
    ctx.cluster = <const uint8_t*>PyBytes_AS_STRING(cluster_prop)
    ctx.cluster_len = PyBytes_GET_SIZE(cluster_prop)
    ctx.max_size = max_size
    ctx.binary = binary
    ctx.half_topic = <PyObject*>half_topic if half_topic is not None else NULL
    for i in range(nreq):
        mark, first_row, nkeys, rr0 = b.staging.n, b.n, len(b.keys), b.rr
        if born_hosts is not None:
            ctx.born_host = <const uint8_t*>PyBytes_AS_STRING(<bytes>born_hosts[i])
        if _encode_one(b, <RemotingCommand?>requests[i], i, topics, groups, &ctx):
            b.fast.append(i)
            continue
        # a batch may have written some entries (and taken a queue key) before one failed: it
        # goes the long way whole, and the batch is left as if it had never been seen
        b.staging.n, b.n, b.rr = mark, first_row, rr0
        b.forget_keys(nkeys)
        b.slow.append(i)
    b.finish()
    return b


@cython.boundscheck(False)
@cython.wraparound(False)
cdef bint _encode_one(SendBatch b, RemotingCommand req, Py_ssize_t i, dict topics, set groups,
                      Ctx* ctx) except -1:
    """Encode the records of one request; False when it needs the slow path."""
    cdef object f, names, topic, v, body, props, info
    cdef int64_t x = 0, qid = 0, bound, wqn, sys_or, kidx
    cdef Py_ssize_t size, pos, end, bl, el, epl
    cdef RecIn r
    cdef Props pr
    cdef bint batch, held
    cdef const uint8_t* bp
    if ((command_serialize_type(req) != 0 and not (ctx.binary and command_serialize_type(req) == 1))
            or (command_code(req) != CODE_SEND_V2 and command_code(req) != CODE_SEND
                and command_code(req) != CODE_SEND_BATCH)):
        return False
    f = req.ext_fields
    if type(f) is not dict:
        return False
    names = _V1 if command_code(req) == CODE_SEND else _V2
    # required: producerGroup, topic, defaultTopic, defaultTopicQueueNums (the slow path names
    # whichever is missing)
    if (PyDict_GetItem(f, names[0]) == NULL or PyDict_GetItem(f, names[2]) == NULL
            or not _parse_i64(_get(f, names[3]), &x) or not _i32(x)):
        return False
    if groups is not None and _get(f, names[0]) not in groups:
        return False
    topic = _get(f, names[1])
    if type(topic) is not str:
        return False
    info = _get(topics, topic)
    if info is None:
        return False
    bound, wqn, sys_or = (<tuple>info)[0], (<tuple>info)[1], (<tuple>info)[2]
    if not _parse_i64(_get(f, names[4]), &qid) or qid >= bound or not _i32(qid):
        return False
    if not _parse_i64(_get(f, names[5]), &x) or not _i32(x):
        return False
    r.sys_flag = <int32_t>x
    held = (r.sys_flag & TX_MASK) == TX_PREPARED or (r.sys_flag & TX_MASK) == TX_ROLLBACK
    if held and ctx.half_topic == NULL:
        return False
    r.sys_flag = (r.sys_flag & ~HOST_V6_BITS) | <int32_t>sys_or
    if not _parse_i64(_get(f, names[6]), &r.born_ts):
        return False
    if not _parse_i64(_get(f, names[7]), &x) or not _i32(x):
        return False
    r.flag = <int32_t>x
    v = _get(f, names[9])
    r.reconsume = 0
    if v is not None:
        if not _parse_i64(v, &x) or not _i32(x):
            return False
        r.reconsume = <int32_t>x
    # maxReconsumeTimes: not used here, but a bad one is refused (by the slow path)
    v = _get(f, names[11])
    if v is not None and (not _parse_i64(v, &x) or not _i32(x)):
        return False
    v = _get(f, names[10])
    batch = command_code(req) == CODE_SEND_BATCH
    if v is not None:
        # Java's parseBoolean, plus the C++ client's "1" on SEND_MESSAGE (see fast_send_header);
        # other spellings (" TRUE ", "yes") go the long way
        if v == "true" or (v == "1" and command_code(req) == CODE_SEND):
            batch = True
        elif v != "false" and v != "0" and v != "1":
            return False
    try:
        r.topic = <const uint8_t*>PyUnicode_AsUTF8AndSize(topic, &r.topic_len)
    except UnicodeEncodeError:
        return False
    body = req.body
    if body is None:
        body = b""
    elif type(body) is not bytes:
        return False
    if r.topic_len > MAX_TOPIC:
        return False
    if not batch:
        props = _get(f, names[8])
        if props is None:
            r.props, r.props_len = <const uint8_t*>b"", 0
        elif type(props) is not str:
            return False
        else:
            try:
                r.props = <const uint8_t*>PyUnicode_AsUTF8AndSize(props, &r.props_len)
            except UnicodeEncodeError:  # lone surrogates
                return False
        pr = _scan_props(r.props, r.props_len)
        r.props_sep = pr.open_end
        r.body = <const uint8_t*>PyBytes_AS_STRING(body)
        r.body_len = PyBytes_GET_SIZE(body)
        size = FIXED + r.body_len + r.topic_len + r.props_len + r.props_sep + ctx.cluster_len
        if (not pr.ok or pr.delay or pr.cluster or r.props_len + r.props_sep + ctx.cluster_len > MAX_PROPS
                or size > ctx.max_size):
            return False
        if pr.half or held:
            return _encode_half(b, &r, &pr, ctx, i, qid)
    elif held or PyBytes_GET_SIZE(body) == 0:
        return False
    if qid < 0:  # the broker picks (RocketMQ: at random); round robin keeps the twins comparable
        qid = b.rr % wqn if wqn > 0 else 0
        b.rr += 1
    r.queue_id = <int32_t>qid
    kidx = b.key(topic, qid)
    if not batch:
        _add_record(b, &r, &pr, ctx, i, kidx, qid)
        return True
    # a batch: every entry of the body becomes a record, or the whole request goes the long way
    bp = <const uint8_t*>PyBytes_AS_STRING(body)
    bl = PyBytes_GET_SIZE(body)
    pos = 0
    while pos < bl:
        if pos + BATCH_MIN_LEN > bl:
            return False
        el = <int32_t>_get32(bp + pos + BATCH_BODYLEN_POS)
        if el < 0 or pos + BATCH_MIN_LEN + el > bl:
            return False
        epl = (<Py_ssize_t>bp[pos + BATCH_BODY_POS + el] << 8) | bp[pos + BATCH_BODY_POS + 1 + el]
        end = pos + BATCH_MIN_LEN + el + epl
        if end > bl or <int32_t>_get32(bp + pos + BATCH_TOTALSIZE_POS) != end - pos:
            return False
        r.flag = <int32_t>_get32(bp + pos + BATCH_FLAG_POS)
        r.body = bp + pos + BATCH_BODY_POS
        r.body_len = el
        r.props = bp + pos + BATCH_MIN_LEN + el
        r.props_len = epl
        if not _valid_utf8(r.props, epl):
            return False
        pr = _scan_props(r.props, epl)
        r.props_sep = pr.open_end
        size = FIXED + el + r.topic_len + epl + r.props_sep + ctx.cluster_len
        if (not pr.ok or pr.delay or pr.half or pr.cluster or epl + r.props_sep + ctx.cluster_len > MAX_PROPS
                or size > ctx.max_size):
            return False
        _add_record(b, &r, &pr, ctx, i, kidx, qid)
        pos = end
    return True


cdef bytes _REAL_TOPIC_NV = (MessageConst.REAL_TOPIC + _NV_STR).encode()
cdef bytes _REAL_QID_NV = (MessageConst.REAL_QUEUE_ID + _NV_STR).encode()
cdef bytes _PS = _PS_STR.encode()


@cython.boundscheck(False)
cdef bint _has_name(const uint8_t* p, Py_ssize_t n, bytes name_nv) noexcept:
    """Whether a well-formed property string has a pair named ``name_nv`` (name and \x01)."""
    cdef const uint8_t* nm = <const uint8_t*>PyBytes_AS_STRING(name_nv)
    cdef Py_ssize_t nl = PyBytes_GET_SIZE(name_nv), i = 0
    while i + nl <= n:
        if memcmp(p + i, nm, nl) == 0:
            return True
        while i < n and p[i] != PROP_SEP:  # on to the next pair
            i += 1
        i += 1
    return False


cdef bint _encode_half(SendBatch b, RecIn* r, Props* pr, Ctx* ctx, Py_ssize_t i, int64_t qid) except -1:
    """A half, as send_py's ``_half`` takes it: the record in the half topic queue 0, its
    transaction bits reset, CLUSTER then REAL_TOPIC and REAL_QID after the message's
    properties; its row keeps the requested queue for the answer."""
    cdef object half_topic
    cdef bytes suffix, qid_s
    cdef Py_ssize_t size, pos
    cdef int64_t kidx
    if not pr.half or ctx.half_topic == NULL or qid < 0:
        return False
    if _has_name(r.props, r.props_len, _REAL_TOPIC_NV) or _has_name(r.props, r.props_len, _REAL_QID_NV):
        return False
    half_topic = <object>ctx.half_topic
    qid_s = b"%d" % qid
    suffix = b"".join((PyBytes_FromStringAndSize(<const char*>ctx.cluster, ctx.cluster_len), _REAL_TOPIC_NV,
                       PyBytes_FromStringAndSize(<const char*>r.topic, r.topic_len), _PS, _REAL_QID_NV, qid_s, _PS))
    r.topic = <const uint8_t*>PyUnicode_AsUTF8AndSize(half_topic, &r.topic_len)
    size = FIXED + r.body_len + r.topic_len + r.props_len + r.props_sep + PyBytes_GET_SIZE(suffix)
    if (r.props_len + r.props_sep + PyBytes_GET_SIZE(suffix) > MAX_PROPS or size > ctx.max_size
            or r.topic_len > MAX_TOPIC):
        return False
    r.queue_id = 0
    r.sys_flag = r.sys_flag & ~TX_MASK
    kidx = b.key(half_topic, 0)
    pos = b.staging.n
    b.reserve_row()
    size = _write_record(b, r, ctx.born_host, ctx.store_host, <const uint8_t*>PyBytes_AS_STRING(suffix),
                         PyBytes_GET_SIZE(suffix))
    _set_row(b, i, pos, size, kidx, pr.tags_hash if pr.has_tags else 0,
             (F_WAIT if pr.wait else 0) | (F_INDEX if pr.index else 0), qid)
    return True


cdef int _add_record(SendBatch b, RecIn* r, Props* pr, Ctx* ctx, Py_ssize_t req, int64_t kidx,
                     int64_t qid) except -1:
    cdef Py_ssize_t pos = b.staging.n
    b.reserve_row()
    cdef Py_ssize_t size = _write_record(b, r, ctx.born_host, ctx.store_host, ctx.cluster, ctx.cluster_len)
    _set_row(b, req, pos, size, kidx, pr.tags_hash if pr.has_tags else 0,
             (F_WAIT if pr.wait else 0) | (F_INDEX if pr.index else 0), qid)
    return 0


cdef inline object _get(dict d, object k):
    cdef PyObject* p = PyDict_GetItem(d, k)
    return <object>p if p != NULL else None


@cython.boundscheck(False)
@cython.wraparound(False)
cdef inline void _set_row(SendBatch b, Py_ssize_t req, Py_ssize_t pos, Py_ssize_t size, int64_t key,
                          uint32_t tags_hash, int32_t flags, int64_t qid) noexcept:
    cdef int64_t* c = b.r + b.n * NCOLS
    c[C_REQ] = req
    c[C_POS] = pos
    c[C_SIZE] = size
    c[C_KEY] = key
    c[C_TAGS] = <int32_t>tags_hash  # signed int32 widened to int64, as Java's long tagsCode
    c[C_FLAGS] = flags
    c[C_QOFF] = 0
    c[C_PHYS] = 0
    c[C_QID] = qid
    b.n += 1


# ----------------------------------------------------------------------------- answers
cdef const char* _HEX = "0123456789ABCDEF"


@cython.boundscheck(False)
@cython.wraparound(False)
def encode_answers(SendBatch b, list requests, bytes msg_id_prefix, tuple template, *, Py_ssize_t lo=0,
                   Py_ssize_t hi=-1, tuple binary_template=None) -> bytes:
    """The SUCCESS response frames of every fast request that is not oneway, each in its
    request's header form.

    ``template`` is the five pieces of the JSON response header around msgId, queueId,
    queueOffset and opaque (see ``send_py.answer_template``), ``binary_template`` the six of
    RocketMQ's binary one (``send_py.binary_answer_template``): the same bytes the codec writes.
    ``lo`` and ``hi`` (when ``hi`` >= 0) keep the answers of requests ``lo <= i < hi`` only: one
    connection's share of a batch gathered from several.

    Raises:
        ValueError: a binary request and no ``binary_template``.
    """
    cdef bytes t0 = template[0], t1 = template[1], t2 = template[2], t3 = template[3], t4 = template[4]
    cdef Py_ssize_t l0 = len(t0), l1 = len(t1), l2 = len(t2), l3 = len(t3), l4 = len(t4)
    cdef bytes b0 = b"", b1 = b"", b2 = b"", b3 = b"", b4 = b"", b5 = b""
    if binary_template is not None:
        b0, b1, b2, b3, b4, b5 = binary_template
    cdef Py_ssize_t m0 = len(b0), m1 = len(b1), m2 = len(b2), m3 = len(b3), m4 = len(b4), m5 = len(b5)
    cdef Py_ssize_t per_req = max(l0 + l1 + l2 + l3 + l4, m0 + m1 + m2 + m3 + m4 + m5 + 16)
    cdef char* ext
    cdef char* vlen
    cdef Py_ssize_t plen = len(msg_id_prefix)
    cdef int64_t* c = b.r
    cdef Py_ssize_t i = 0, j, cap, hlen
    cdef RemotingCommand req
    cdef char* out
    cdef char* p
    cdef char* frame
    cdef bytes res
    # worst case per record: prefix + 16 hex + comma; per request: pieces + numbers + frame head
    if hi < 0:
        hi = len(requests)
    cap = 0
    for i in range(b.n):
        if lo <= c[i * NCOLS + C_REQ] < hi:
            cap += plen + 17
            if i == 0 or c[(i - 1) * NCOLS + C_REQ] != c[i * NCOLS + C_REQ]:
                cap += per_req + 3 * 21 + 8
    res = PyBytes_FromStringAndSize(NULL, cap)
    out = PyBytes_AS_STRING(res)
    p = out
    i = 0
    while i < b.n:
        req = <RemotingCommand>requests[c[i * NCOLS + C_REQ]]
        j = i
        while j < b.n and c[j * NCOLS + C_REQ] == c[i * NCOLS + C_REQ]:
            j += 1
        if command_flag(req) & 2 or not (lo <= c[i * NCOLS + C_REQ] < hi):  # oneway: no answer; or not asked for
            i = j
            continue
        if command_serialize_type(req) == 1:
            if binary_template is None:
                raise ValueError("a request in the binary header needs binary_template for its answer")
            frame = p
            p += 8
            memcpy(p, PyBytes_AS_STRING(b0), m0)
            p += m0
            _put32(<uint8_t*>p, <uint32_t>command_opaque(req))
            p += 4
            memcpy(p, PyBytes_AS_STRING(b1), m1)
            p += m1
            ext = p
            p += 4
            memcpy(p, PyBytes_AS_STRING(b2), m2)
            p += m2
            vlen = p
            p += 4
            p = _msg_ids(p, c, i, j, PyBytes_AS_STRING(msg_id_prefix), plen)
            _put32(<uint8_t*>vlen, <uint32_t>(p - vlen - 4))
            memcpy(p, PyBytes_AS_STRING(b3), m3)
            p += m3
            p = _binary_int(p, c[i * NCOLS + C_QID])
            memcpy(p, PyBytes_AS_STRING(b4), m4)
            p += m4
            p = _binary_int(p, c[i * NCOLS + C_QOFF])
            memcpy(p, PyBytes_AS_STRING(b5), m5)
            p += m5
            _put32(<uint8_t*>ext, <uint32_t>(p - ext - 4))
            hlen = p - frame - 8
            _put32(<uint8_t*>frame, <uint32_t>(hlen + 4))
            _put32(<uint8_t*>frame + 4, <uint32_t>((1 << 24) | hlen))
            i = j
            continue
        frame = p
        p += 8
        memcpy(p, PyBytes_AS_STRING(t0), l0)
        p += l0
        p = _msg_ids(p, c, i, j, PyBytes_AS_STRING(msg_id_prefix), plen)
        memcpy(p, PyBytes_AS_STRING(t1), l1)
        p += l1
        p += _itoa(c[i * NCOLS + C_QID], p)
        memcpy(p, PyBytes_AS_STRING(t2), l2)
        p += l2
        p += _itoa(c[i * NCOLS + C_QOFF], p)
        memcpy(p, PyBytes_AS_STRING(t3), l3)
        p += l3
        p += _itoa(command_opaque(req), p)
        memcpy(p, PyBytes_AS_STRING(t4), l4)
        p += l4
        hlen = p - frame - 8
        _put32(<uint8_t*>frame, <uint32_t>(hlen + 4))
        _put32(<uint8_t*>frame + 4, <uint32_t>hlen)
        i = j
    return res[:p - out]


@cython.boundscheck(False)
@cython.wraparound(False)
cdef inline char* _msg_ids(char* p, const int64_t* c, Py_ssize_t i, Py_ssize_t j, const char* prefix,
                           Py_ssize_t plen) noexcept:
    """The offset msgIds of records ``i..j-1``, comma-separated, at ``p``; returns the end."""
    cdef Py_ssize_t k, d
    cdef uint64_t phys
    for k in range(i, j):
        if k > i:
            p[0] = 44  # ','
            p += 1
        memcpy(p, prefix, plen)
        p += plen
        phys = <uint64_t>c[k * NCOLS + C_PHYS]
        for d in range(16):
            p[d] = _HEX[(phys >> (60 - 4 * d)) & 0xF]
        p += 16
    return p


cdef inline char* _binary_int(char* p, int64_t v) noexcept:
    """``v`` in decimal as a binary header's value: its 4-byte length, then its digits; the end."""
    cdef Py_ssize_t n = _itoa(v, p + 4)
    _put32(<uint8_t*>p, <uint32_t>n)
    return p + 4 + n


cdef inline Py_ssize_t _itoa(int64_t v, char* out) noexcept:
    cdef char tmp[24]
    cdef Py_ssize_t n = 0, k
    cdef uint64_t u
    cdef bint neg = v < 0
    u = <uint64_t>(-v) if neg else <uint64_t>v
    while True:
        tmp[n] = <char>(48 + u % 10)
        n += 1
        u //= 10
        if u == 0:
            break
    k = 0
    if neg:
        out[0] = 45
        k = 1
    while n > 0:
        n -= 1
        out[k] = tmp[n]
        k += 1
    return k


def wire_facts() -> dict:
    """The wire-fact constants this module was compiled with (tests/test_wire_facts.py holds them
    to protocol's declarations, so a build from a stale ``wire_facts.pxd`` is caught)."""
    return compiled_wire_facts()
