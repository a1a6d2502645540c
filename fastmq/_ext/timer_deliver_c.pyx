# cython: language_level=3, embedsignature=True
"""Delivered timer messages built from their stored records, compiled twin of ``timer_deliver_py``
(read that module for the contract): the held records in, their deliveries out, in a
:class:`~fastmq._ext.send_batch.SendBatch` the store's record writer places in one append."""
cimport cython
from cpython.bytes cimport PyBytes_AS_STRING, PyBytes_GET_SIZE
from libc.stdint cimport int32_t, int64_t, uint8_t, uint32_t, uint64_t
from libc.stdio cimport snprintf
from libc.string cimport memcmp, memcpy

import numpy as np

from fastmq.protocol.message_const import MessageConst

from .bigendian cimport get32 as _get32, get64 as _get64, put32 as _put32, put64 as _put64
from .bytebuf cimport bytebuf_reserve
from .javahash cimport jhash
from .properties cimport name_is, topic_char
from .send_batch_c cimport (C_FLAGS, C_KEY, C_PHYS, C_POS, C_QID, C_QOFF, C_REQ, C_SIZE, C_TAGS, F_INDEX, NCOLS,
                            SendBatch)
from .wire_facts cimport *

include "property_pairs.pxi"

__all__ = ["delivered_records", "real_topic_ids"]

cdef enum:
    FIXED = REC_MIN_LEN_V4
    MAGIC = MESSAGE_MAGIC_CODE
    HOST_V6_BITS = SYSFLAG_HOST_V6_BITS
    MAX_TOPIC = REC_MAX_TOPIC_LEN
    MAX_PROPS = REC_MAX_PROPERTIES_LEN
    NV_SEP = NAME_VALUE_SEPARATOR
    PROP_SEP = PROPERTY_SEPARATOR
    EXTRA = 96  # what the three appended pairs take at most

cdef bytes _REAL_TOPIC = MessageConst.REAL_TOPIC.encode()
cdef bytes _REAL_QID = MessageConst.REAL_QUEUE_ID.encode()
cdef bytes _ENQ = MessageConst.TIMER_ENQUEUE_MS.encode()
cdef bytes _DEQ = MessageConst.TIMER_DEQUEUE_MS.encode()


cdef struct Span:
    const uint8_t* p
    Py_ssize_t n
    int count


cdef struct HeldProps:
    int ok
    int index        # KEYS or UNIQ_KEY with a value
    Py_ssize_t kept  # bytes of the pairs that stay
    Span tags        # the last TAGS
    Span real_topic
    Span real_qid


cdef inline bint _is(const uint8_t* p, Py_ssize_t n, bytes name) noexcept:
    return n == PyBytes_GET_SIZE(name) and name_is(p, n, PyBytes_AS_STRING(name), n)


cdef inline int _dropped(const uint8_t* k, Py_ssize_t kn) noexcept:
    """1 REAL_TOPIC, 2 REAL_QID, 3 another name the delivery drops (WAIT, TIMER_ENQUEUE_MS,
    TIMER_DEQUEUE_MS), 0 a name it keeps."""
    if _is(k, kn, _REAL_TOPIC):
        return 1
    if _is(k, kn, _REAL_QID):
        return 2
    if (name_is(k, kn, PROP_WAIT_STORE_MSG_OK, PROP_WAIT_STORE_MSG_OK_LEN) or _is(k, kn, _ENQ)
            or _is(k, kn, _DEQ)):
        return 3
    return 0


@cython.boundscheck(False)
cdef HeldProps _scan(const uint8_t* p, Py_ssize_t n) noexcept:
    cdef HeldProps r
    cdef Py_ssize_t i = 0, ks = 0, kn = 0, vs = 0, vn = 0
    cdef int d
    r.ok = 1
    r.index = 0
    r.kept = 0
    r.tags.n = r.tags.count = 0
    r.real_topic.n = r.real_topic.count = 0
    r.real_qid.n = r.real_qid.count = 0
    r.tags.p = r.real_topic.p = r.real_qid.p = p
    if n == 0 or p[n - 1] != PROP_SEP:
        r.ok = 0
        return r
    while i < n:  # (the last pair ends in a separator: checked above)
        ks = i
        i = next_pair(p, n, i, &kn, &vs, &vn)
        if i < 0:
            r.ok = 0
            return r
        d = _dropped(p + ks, kn)
        if d == 1:
            r.real_topic.p, r.real_topic.n = p + vs, vn
            r.real_topic.count += 1
        elif d == 2:
            r.real_qid.p, r.real_qid.n = p + vs, vn
            r.real_qid.count += 1
        elif d == 0:
            r.kept += i - ks
            if name_is(p + ks, kn, PROP_TAGS, PROP_TAGS_LEN):
                r.tags.p, r.tags.n = p + vs, vn
                r.tags.count += 1
            elif (name_is(p + ks, kn, PROP_KEYS, PROP_KEYS_LEN) or name_is(
                    p + ks, kn, PROP_UNIQ_CLIENT_MESSAGE_ID_KEYIDX, PROP_UNIQ_CLIENT_MESSAGE_ID_KEYIDX_LEN)):
                if vn > 0:
                    r.index = 1
    return r


@cython.boundscheck(False)
cdef Py_ssize_t _copy_kept(uint8_t* d, const uint8_t* p, Py_ssize_t n) noexcept:
    """The pairs that stay, in order, at ``d``; returns the bytes written."""
    cdef Py_ssize_t i = 0, ks, kn, w = 0
    while i < n:
        ks = i
        while p[i] != NV_SEP:
            i += 1
        kn = i - ks
        while p[i] != PROP_SEP:
            i += 1
        i += 1
        if _dropped(p + ks, kn) == 0:
            memcpy(d + w, p + ks, i - ks)
            w += i - ks
    return w


@cython.boundscheck(False)
@cython.wraparound(False)
cdef Py_ssize_t _one(SendBatch b, Py_ssize_t idx, const uint8_t* rec, Py_ssize_t n, bytes timer_topic,
                     long long now, const uint8_t* sh, long long max_size) except -2:
    """Write the delivery of ``rec`` at the end of the staging buffer and its row; -1 when it
    is the caller's."""
    cdef int32_t sys_flag
    cdef int64_t body_len, real_qid = 0, tags_code = 0, key
    cdef Py_ssize_t p, tl, pl, props_at, i, extra, props_n, out_size, w
    cdef HeldProps pr
    cdef uint8_t* d
    cdef char num[64]
    cdef int64_t* c
    cdef bytes rt
    if n < FIXED:
        return -1
    sys_flag = <int32_t>_get32(rec + REC_SYSFLAG_POS)
    body_len = <int32_t>_get32(rec + REC_BODYLEN_POS)
    if (<int32_t>_get32(rec + REC_TOTALSIZE_POS) != n or _get32(rec + REC_MAGICCODE_POS) != <uint32_t>MAGIC
            or sys_flag & HOST_V6_BITS or body_len < 0 or FIXED + body_len > n):
        return -1
    p = REC_BODY_POS + body_len
    tl = rec[p]
    if p + 3 + tl > n or tl != PyBytes_GET_SIZE(timer_topic) or not name_is(
            rec + p + 1, tl, PyBytes_AS_STRING(timer_topic), tl):
        return -1
    pl = (<Py_ssize_t>rec[p + 1 + tl] << 8) | rec[p + 2 + tl]
    props_at = p + 3 + tl
    if props_at + pl != n:
        return -1
    pr = _scan(rec + props_at, pl)
    if (not pr.ok or pr.real_topic.count != 1 or pr.real_qid.count != 1 or pr.real_topic.n == 0
            or pr.real_topic.n > MAX_TOPIC or pr.real_qid.n == 0 or pr.real_qid.n > 10):
        return -1
    for i in range(pr.real_topic.n):
        if not topic_char(pr.real_topic.p[i]):
            return -1
    for i in range(pr.real_qid.n):
        if not (48 <= pr.real_qid.p[i] <= 57):
            return -1
        real_qid = real_qid * 10 + (pr.real_qid.p[i] - 48)
    if real_qid > 0x7FFFFFFF:
        return -1
    extra = snprintf(num, sizeof(num), "%lld", <long long>_get64(rec + REC_STORETIMESTAMP_POS))
    props_n = (pr.kept + PyBytes_GET_SIZE(_ENQ) + 2 + extra)
    extra = snprintf(num, sizeof(num), "%lld", now)
    props_n += PyBytes_GET_SIZE(_DEQ) + 2 + extra + PROP_WAIT_STORE_MSG_OK_LEN + 7
    if props_n > MAX_PROPS:
        return -1
    out_size = FIXED + body_len + pr.real_topic.n + props_n
    if out_size > max_size:
        return -1
    if pr.tags.count and pr.tags.n:
        tags_code = <int32_t>jhash(pr.tags.p, pr.tags.n, 0)
    bytebuf_reserve(&b.staging, out_size + EXTRA, 65536)
    d = b.staging.p + b.staging.n
    memcpy(d, rec, p)  # the fixed fields and the body, then patched
    _put32(d + REC_TOTALSIZE_POS, <uint32_t>out_size)
    _put32(d + REC_QUEUEID_POS, <uint32_t>real_qid)
    _put64(d + REC_QUEUEOFFSET_POS, 0)
    _put64(d + REC_PHYSICALOFFSET_POS, 0)
    _put64(d + REC_STORETIMESTAMP_POS, 0)
    memcpy(d + REC_STOREHOST_POS, sh, REC_IPV4_HOST_LEN)
    _put64(d + REC_PREPARED_TRANSACTION_OFFSET_POS, 0)
    d[p] = <uint8_t>pr.real_topic.n
    memcpy(d + p + 1, pr.real_topic.p, pr.real_topic.n)
    i = p + 1 + pr.real_topic.n
    d[i] = <uint8_t>(props_n >> 8)
    d[i + 1] = <uint8_t>props_n
    i += 2
    w = _copy_kept(d + i, rec + props_at, pl)
    i += w
    memcpy(d + i, PyBytes_AS_STRING(_ENQ), PyBytes_GET_SIZE(_ENQ))
    i += PyBytes_GET_SIZE(_ENQ)
    d[i] = NV_SEP
    i += 1 + snprintf(<char*>(d + i + 1), 32, "%lld", <long long>_get64(rec + REC_STORETIMESTAMP_POS))
    d[i] = PROP_SEP
    i += 1
    memcpy(d + i, PyBytes_AS_STRING(_DEQ), PyBytes_GET_SIZE(_DEQ))
    i += PyBytes_GET_SIZE(_DEQ)
    d[i] = NV_SEP
    i += 1 + snprintf(<char*>(d + i + 1), 32, "%lld", now)
    d[i] = PROP_SEP
    i += 1
    memcpy(d + i, PROP_WAIT_STORE_MSG_OK, PROP_WAIT_STORE_MSG_OK_LEN)
    i += PROP_WAIT_STORE_MSG_OK_LEN
    d[i] = NV_SEP
    memcpy(d + i + 1, b"false", 5)
    d[i + 6] = PROP_SEP
    i += 7
    if i != out_size:  # (a guard: the sizes above and the bytes written must agree)
        return -1
    rt = (<const char*>pr.real_topic.p)[:pr.real_topic.n]
    key = b.key(rt.decode("ascii"), real_qid)
    b.reserve_row()
    c = b.r + b.n * NCOLS
    c[C_REQ] = idx
    c[C_POS] = b.staging.n
    c[C_SIZE] = out_size
    c[C_KEY] = key
    c[C_TAGS] = tags_code
    c[C_FLAGS] = F_INDEX if pr.index else 0
    c[C_QOFF] = 0
    c[C_PHYS] = 0
    c[C_QID] = real_qid
    b.n += 1
    b.staging.n += out_size
    return out_size


def delivered_records(records, bytes timer_topic, long long now, bytes store_host, long long max_size):
    """The deliveries of ``records`` and the indexes left to the caller (timer_deliver_py's contract)."""
    cdef SendBatch b = SendBatch.__new__(SendBatch)
    cdef list left = []
    cdef Py_ssize_t i = 0, n
    cdef const uint8_t[::1] view
    cdef const uint8_t* sh
    b.start(max(1, len(records)), 0)
    if PyBytes_GET_SIZE(store_host) != REC_IPV4_HOST_LEN:
        b.finish()
        return b, list(range(len(records)))
    sh = <const uint8_t*>PyBytes_AS_STRING(store_host)
    for r in records:
        n = len(r)
        if n == 0:
            left.append(i)
        else:
            view = r
            if _one(b, i, &view[0], n, timer_topic, now, sh, max_size) < 0:
                left.append(i)
        i += 1
    b.finish()
    return b, left


@cython.boundscheck(False)
@cython.wraparound(False)
cdef Py_ssize_t _real_topic(const uint8_t* rec, Py_ssize_t n, const uint8_t** out) noexcept:
    """The length of the held record's REAL_TOPIC (its bytes at ``out``); -1 when it has no usable one."""
    cdef int32_t sys_flag
    cdef int64_t body_len
    cdef Py_ssize_t p, tl, pl, props_at, i
    cdef HeldProps pr
    if n < FIXED:
        return -1
    sys_flag = <int32_t>_get32(rec + REC_SYSFLAG_POS)
    body_len = <int32_t>_get32(rec + REC_BODYLEN_POS)
    if (<int32_t>_get32(rec + REC_TOTALSIZE_POS) != n or _get32(rec + REC_MAGICCODE_POS) != <uint32_t>MAGIC
            or sys_flag & HOST_V6_BITS or body_len < 0 or FIXED + body_len > n):
        return -1
    p = REC_BODY_POS + body_len
    tl = rec[p]
    if p + 3 + tl > n:
        return -1
    pl = (<Py_ssize_t>rec[p + 1 + tl] << 8) | rec[p + 2 + tl]
    props_at = p + 3 + tl
    if props_at + pl != n:
        return -1
    pr = _scan(rec + props_at, pl)
    if not pr.ok or pr.real_topic.count != 1 or pr.real_topic.n == 0 or pr.real_topic.n > MAX_TOPIC:
        return -1
    for i in range(pr.real_topic.n):
        if not topic_char(pr.real_topic.p[i]):
            return -1
    out[0] = pr.real_topic.p
    return pr.real_topic.n


@cython.boundscheck(False)
@cython.wraparound(False)
def real_topic_ids(buf, const int64_t[::1] starts, const int32_t[::1] sizes, dict ids):
    """The id in ``ids`` of each held record's REAL_TOPIC (timer_deliver_py's contract)."""
    cdef Py_ssize_t n = starts.shape[0], i, tn, last_n = -1, blen
    cdef const uint8_t[::1] view = buf
    cdef const uint8_t* t = NULL
    cdef const uint8_t* last_t = NULL
    cdef int32_t last_id = -1
    cdef int64_t s
    cdef str name
    out = np.full(n, -1, np.int32)
    cdef int32_t[::1] o = out
    blen = view.shape[0]
    if sizes.shape[0] != n:
        raise ValueError("starts and sizes differ in length")
    for i in range(n):
        s = starts[i]
        if s < 0 or sizes[i] <= 0 or s + sizes[i] > blen:
            continue
        tn = _real_topic(&view[0] + s, sizes[i], &t)
        if tn < 0:
            continue
        if tn == last_n and memcmp(t, last_t, tn) == 0:  # (a batch is mostly one topic)
            o[i] = last_id
            continue
        name = (<const char*>t)[:tn].decode("ascii")
        got = ids.get(name)
        if got is None:
            got = ids[name] = len(ids)
        last_t, last_n, last_id = t, tn, <int32_t>got
        o[i] = last_id
    return out
