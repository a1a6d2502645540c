# cython: language_level=3, embedsignature=True
"""The records of an END_TRANSACTION, compiled twin of ``end_transaction_py`` (read that module
for the contract): the stored half in, the real message and the op message (or the op message
alone) out, in a :class:`~fastmq._ext.send_batch.SendBatch` the store's record writer places in
one append."""
cimport cython
from cpython.bytes cimport PyBytes_AS_STRING, PyBytes_GET_SIZE
from cpython.dict cimport PyDict_GetItem, PyDict_Next
from cpython.object cimport PyObject
from libc.stdint cimport int32_t, int64_t, uint8_t, uint32_t, uint64_t
from libc.string cimport memcpy

from zlib import crc32 as _crc32

from fastmq.protocol.message_const import NAME_VALUE_SEPARATOR as _NV_STR, PROPERTY_SEPARATOR as _PS_STR, MessageConst

from .bigendian cimport get32 as _get32, put32 as _put32, put64 as _put64
from .bytebuf cimport bytebuf_reserve
from .javahash cimport jhash
from .properties cimport name_is, topic_char
from .send_batch_c cimport (C_FLAGS, C_KEY, C_PHYS, C_POS, C_QID, C_QOFF, C_REQ, C_SIZE, C_TAGS, F_INDEX, F_WAIT,
                            NCOLS, SendBatch)
from .wire_facts cimport *

include "property_pairs.pxi"

__all__ = ["end_fields", "end_records"]

cdef enum:
    FIXED = REC_MIN_LEN_V4
    MAGIC = MESSAGE_MAGIC_CODE
    TX_MASK = SYSFLAG_TRANSACTION_ROLLBACK_TYPE
    TX_COMMIT = SYSFLAG_TRANSACTION_COMMIT_TYPE
    HOST_V6_BITS = SYSFLAG_HOST_V6_BITS
    MAX_TOPIC = REC_MAX_TOPIC_LEN
    NV_SEP = NAME_VALUE_SEPARATOR
    PROP_SEP = PROPERTY_SEPARATOR

cdef extern from "Python.h":
    const char* PyUnicode_AsUTF8AndSize(object o, Py_ssize_t *size) except NULL

from .end_transaction_py import END_FIELDS as _END_FIELDS_PY

cdef frozenset _END_FIELDS = _END_FIELDS_PY
cdef str _F_GROUP = "producerGroup", _F_QOFF = "tranStateTableOffset", _F_CLO = "commitLogOffset"
cdef str _F_COR = "commitOrRollback", _F_CHECK = "fromTransactionCheck", _F_MSGID = "msgId"

cdef bytes _REAL_TOPIC = MessageConst.REAL_TOPIC.encode()
cdef bytes _REAL_QID = MessageConst.REAL_QUEUE_ID.encode()
cdef bytes _PGROUP = MessageConst.PRODUCER_GROUP.encode()
cdef bytes _TAGS_NV = (MessageConst.TAGS + _NV_STR).encode()
cdef bytes _PS = _PS_STR.encode()


cdef struct Span:
    const uint8_t* p
    Py_ssize_t n
    int count      # how many pairs had this name


cdef struct HalfProps:
    int ok
    int delay
    int index_keys   # KEYS: the last one's value is not empty
    int index_uniq   # UNIQ_KEY: likewise
    int wait         # the last WAIT is not "false"
    Span tags        # the last TAGS
    Span real_topic
    Span real_qid
    Span pgroup


cdef inline bint _is(const uint8_t* p, Py_ssize_t n, bytes name) noexcept:
    return n == PyBytes_GET_SIZE(name) and name_is(p, n, PyBytes_AS_STRING(name), n)


@cython.boundscheck(False)
cdef HalfProps _scan(const uint8_t* p, Py_ssize_t n) noexcept:
    """The names the end of a transaction reads, from a stored properties string (every pair
    ``k\\x01v\\x02``; anything else is not ok)."""
    cdef HalfProps r
    cdef Py_ssize_t i = 0, ks, kn = 0, vs = 0, vn = 0
    r.ok = 1
    r.delay = r.index_keys = r.index_uniq = 0
    r.wait = 1
    r.tags.n = r.tags.count = 0
    r.real_topic.n = r.real_topic.count = 0
    r.real_qid.n = r.real_qid.count = 0
    r.pgroup.n = r.pgroup.count = 0
    r.tags.p = r.real_topic.p = r.real_qid.p = r.pgroup.p = p
    if n and p[n - 1] != PROP_SEP:
        r.ok = 0
        return r
    while i < n:
        ks = i
        i = next_pair(p, n, i, &kn, &vs, &vn)
        if i < 0:
            r.ok = 0
            return r
        if name_is(p + ks, kn, PROP_TAGS, PROP_TAGS_LEN):
            r.tags.p, r.tags.n = p + vs, vn
            r.tags.count += 1
        elif name_is(p + ks, kn, PROP_WAIT_STORE_MSG_OK, PROP_WAIT_STORE_MSG_OK_LEN):
            r.wait = not name_is(p + vs, vn, "false", 5)
        elif name_is(p + ks, kn, PROP_KEYS, PROP_KEYS_LEN):
            r.index_keys = vn > 0
        elif name_is(p + ks, kn, PROP_UNIQ_CLIENT_MESSAGE_ID_KEYIDX, PROP_UNIQ_CLIENT_MESSAGE_ID_KEYIDX_LEN):
            r.index_uniq = vn > 0
        elif name_is(p + ks, kn, PROP_DELAY_TIME_LEVEL, PROP_DELAY_TIME_LEVEL_LEN):
            r.delay = 1
        elif _is(p + ks, kn, _REAL_TOPIC):
            r.real_topic.p, r.real_topic.n = p + vs, vn
            r.real_topic.count += 1
        elif _is(p + ks, kn, _REAL_QID):
            r.real_qid.p, r.real_qid.n = p + vs, vn
            r.real_qid.count += 1
        elif _is(p + ks, kn, _PGROUP):
            r.pgroup.p, r.pgroup.n = p + vs, vn
            r.pgroup.count += 1
    return r


cdef long long _offset(PyObject* v) except -2:
    """A plain non-negative decimal (1 to 18 ASCII digits), else -1."""
    cdef Py_ssize_t n = 0, i
    cdef const char* s
    cdef long long acc = 0
    if v == NULL or type(<object>v) is not str:
        return -1
    s = PyUnicode_AsUTF8AndSize(<object>v, &n)
    if n == 0 or n > 18:
        return -1
    for i in range(n):
        if s[i] < 48 or s[i] > 57:
            return -1
        acc = acc * 10 + (s[i] - 48)
    return acc


def end_fields(object fields, object legal_groups):
    """(producerGroup as UTF-8, tranStateTableOffset, commitLogOffset, commit) of an
    END_TRANSACTION header the batch path takes as it is; None for the long way
    (end_transaction_py's contract)."""
    cdef Py_ssize_t pos = 0
    cdef PyObject* kp = NULL
    cdef PyObject* vp = NULL
    cdef PyObject* cor
    cdef PyObject* check
    cdef object group
    cdef long long qoff, clo
    cdef bint commit
    if type(fields) is not dict or len(<dict>fields) > len(_END_FIELDS):
        return None
    while PyDict_Next(fields, &pos, &kp, &vp):
        if type(<object>vp) is not str or <object>kp not in _END_FIELDS:
            return None
    vp = PyDict_GetItem(fields, _F_GROUP)
    if vp == NULL:
        return None
    group = <object>vp
    if not group or group not in legal_groups or PyDict_GetItem(fields, _F_MSGID) == NULL:
        return None
    check = PyDict_GetItem(fields, _F_CHECK)
    if check != NULL and <object>check != "false":
        return None
    cor = PyDict_GetItem(fields, _F_COR)
    if cor == NULL:
        return None
    if <object>cor == "8":
        commit = True
    elif <object>cor == "12":
        commit = False
    else:
        return None
    qoff = _offset(PyDict_GetItem(fields, _F_QOFF))
    clo = _offset(PyDict_GetItem(fields, _F_CLO))
    if qoff < 0 or clo < 0:
        return None
    try:
        return (<str>group).encode("utf-8"), qoff, clo, commit
    except UnicodeEncodeError:  # (a lone surrogate: the long way refuses it)
        return None


cdef int64_t _add(SendBatch b, Py_ssize_t size, int64_t key, int64_t tags, int64_t flags, int64_t qid) except -1:
    """A row for the record just written at the end of the staging buffer."""
    cdef int64_t* c
    b.reserve_row()
    c = b.r + b.n * NCOLS
    c[C_REQ] = 0
    c[C_POS] = b.staging.n
    c[C_SIZE] = size
    c[C_KEY] = key
    c[C_TAGS] = tags
    c[C_FLAGS] = flags
    c[C_QOFF] = 0
    c[C_PHYS] = 0
    c[C_QID] = qid
    b.n += 1
    b.staging.n += size
    return 0


cdef inline uint64_t _get64(const uint8_t* p) noexcept:
    return (<uint64_t>_get32(p) << 32) | _get32(p + 4)


@cython.boundscheck(False)
@cython.wraparound(False)
def end_records(const uint8_t[::1] half, long long half_offset, bytes half_topic, bytes group,
                long long queue_offset, bint commit, bytes op_topic, bytes op_tag, long long now, bytes store_host,
                long long max_size):
    """The records ending the half ``half`` stored at ``half_offset`` (end_transaction_py's
    contract); None for the long way."""
    cdef Py_ssize_t n = half.shape[0], p, tl, pl, props_at, rsize, op_size, i, ol
    cdef const uint8_t* rec
    cdef int32_t sys_flag, qid
    cdef int64_t body_len, real_qid = 0, tags_code = 0, kreal
    cdef HalfProps pr
    cdef uint8_t* d
    cdef SendBatch b
    cdef bytes op_body, rt, op_props
    cdef const uint8_t* sh
    if n < FIXED or PyBytes_GET_SIZE(store_host) != REC_IPV4_HOST_LEN:
        return None
    rec = &half[0]
    sh = <const uint8_t*>PyBytes_AS_STRING(store_host)
    sys_flag = <int32_t>_get32(rec + REC_SYSFLAG_POS)
    body_len = <int32_t>_get32(rec + REC_BODYLEN_POS)
    if (<int32_t>_get32(rec + REC_TOTALSIZE_POS) != n or _get32(rec + REC_MAGICCODE_POS) != <uint32_t>MAGIC
            or sys_flag & HOST_V6_BITS or <int64_t>_get64(rec + REC_PHYSICALOFFSET_POS) != half_offset
            or <int64_t>_get64(rec + REC_QUEUEOFFSET_POS) != queue_offset or body_len < 0
            or FIXED + body_len > n):
        return None
    qid = <int32_t>_get32(rec + REC_QUEUEID_POS)
    p = REC_BODY_POS + body_len
    tl = rec[p]
    if p + 3 + tl > n or tl != PyBytes_GET_SIZE(half_topic) or not name_is(
            rec + p + 1, tl, PyBytes_AS_STRING(half_topic), tl):
        return None
    pl = (<Py_ssize_t>rec[p + 1 + tl] << 8) | rec[p + 2 + tl]
    props_at = p + 3 + tl
    if props_at + pl != n:
        return None
    pr = _scan(rec + props_at, pl)
    if (not pr.ok or pr.delay or pr.pgroup.count != 1 or pr.pgroup.n != PyBytes_GET_SIZE(group)
            or not name_is(pr.pgroup.p, pr.pgroup.n, PyBytes_AS_STRING(group), pr.pgroup.n)):
        return None
    b = SendBatch.__new__(SendBatch)
    b.start(2 if commit else 1, 0)
    if commit:
        if (pr.real_topic.count != 1 or pr.real_qid.count != 1 or pr.real_topic.n == 0
                or pr.real_topic.n > MAX_TOPIC or pr.real_qid.n == 0 or pr.real_qid.n > 10):
            return None
        for i in range(pr.real_topic.n):
            if not topic_char(pr.real_topic.p[i]):
                return None
        for i in range(pr.real_qid.n):
            if not (48 <= pr.real_qid.p[i] <= 57):
                return None
            real_qid = real_qid * 10 + (pr.real_qid.p[i] - 48)
        if real_qid > 0x7FFFFFFF:
            return None
        rt = (<const char*>pr.real_topic.p)[:pr.real_topic.n]
        if rt == op_topic and real_qid == qid:  # (one queue key for both would give them one offset)
            return None
        rsize = n - tl + pr.real_topic.n
        if rsize > max_size:
            return None
        if pr.tags.count and pr.tags.n:
            tags_code = <int32_t>jhash(pr.tags.p, pr.tags.n, 0)
        bytebuf_reserve(&b.staging, rsize, 65536)
        d = b.staging.p + b.staging.n
        memcpy(d, rec, p)  # the fixed fields and the body, then patched
        _put32(d + REC_TOTALSIZE_POS, <uint32_t>rsize)
        _put32(d + REC_QUEUEID_POS, <uint32_t>real_qid)
        _put64(d + REC_QUEUEOFFSET_POS, 0)
        _put64(d + REC_PHYSICALOFFSET_POS, 0)
        _put32(d + REC_SYSFLAG_POS, <uint32_t>((sys_flag & ~TX_MASK) | TX_COMMIT))
        _put64(d + REC_STORETIMESTAMP_POS, 0)
        memcpy(d + REC_STOREHOST_POS, sh, REC_IPV4_HOST_LEN)
        _put64(d + REC_PREPARED_TRANSACTION_OFFSET_POS, <uint64_t>half_offset)
        d[p] = <uint8_t>pr.real_topic.n
        memcpy(d + p + 1, pr.real_topic.p, pr.real_topic.n)
        memcpy(d + p + 1 + pr.real_topic.n, rec + p + 1 + tl, n - (p + 1 + tl))
        kreal = b.key(rt.decode("ascii"), real_qid)
        _add(b, rsize, kreal, tags_code, (F_WAIT if pr.wait else 0)
             | (F_INDEX if pr.index_keys or pr.index_uniq else 0), real_qid)
    op_body = b"%d" % queue_offset
    op_props = _TAGS_NV + op_tag + _PS
    ol = PyBytes_GET_SIZE(op_body)
    op_size = FIXED + ol + PyBytes_GET_SIZE(op_topic) + PyBytes_GET_SIZE(op_props)
    bytebuf_reserve(&b.staging, op_size, 65536)
    d = b.staging.p + b.staging.n
    _put32(d + REC_TOTALSIZE_POS, <uint32_t>op_size)
    _put32(d + REC_MAGICCODE_POS, <uint32_t>MAGIC)
    _put32(d + REC_BODYCRC_POS, <uint32_t>(_crc32(op_body) & 0x7FFFFFFF))
    _put32(d + REC_QUEUEID_POS, <uint32_t>qid)
    _put32(d + REC_FLAG_POS, 0)
    _put64(d + REC_QUEUEOFFSET_POS, 0)
    _put64(d + REC_PHYSICALOFFSET_POS, 0)
    _put32(d + REC_SYSFLAG_POS, 0)
    _put64(d + REC_BORNTIMESTAMP_POS, <uint64_t>now)
    memcpy(d + REC_BORNHOST_POS, sh, REC_IPV4_HOST_LEN)
    _put64(d + REC_STORETIMESTAMP_POS, 0)
    memcpy(d + REC_STOREHOST_POS, sh, REC_IPV4_HOST_LEN)
    _put32(d + REC_RECONSUMETIMES_POS, 0)
    _put64(d + REC_PREPARED_TRANSACTION_OFFSET_POS, 0)
    _put32(d + REC_BODYLEN_POS, <uint32_t>ol)
    i = REC_BODY_POS
    memcpy(d + i, PyBytes_AS_STRING(op_body), ol)
    i += ol
    d[i] = <uint8_t>PyBytes_GET_SIZE(op_topic)
    memcpy(d + i + 1, PyBytes_AS_STRING(op_topic), PyBytes_GET_SIZE(op_topic))
    i += 1 + PyBytes_GET_SIZE(op_topic)
    d[i] = <uint8_t>(PyBytes_GET_SIZE(op_props) >> 8)
    d[i + 1] = <uint8_t>PyBytes_GET_SIZE(op_props)
    memcpy(d + i + 2, PyBytes_AS_STRING(op_props), PyBytes_GET_SIZE(op_props))
    _add(b, op_size, b.key(op_topic.decode("ascii"), qid),
         <int32_t>jhash(<const uint8_t*>PyBytes_AS_STRING(op_tag), PyBytes_GET_SIZE(op_tag), 0), F_WAIT, qid)
    b.fast.append(0)
    b.finish()
    return b
