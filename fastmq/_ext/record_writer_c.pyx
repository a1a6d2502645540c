# cython: language_level=3, embedsignature=True
"""The store's record writer, compiled twin of ``record_writer_py`` (read that module for the contract).

One call per mapped file for all the records of a :class:`~fastmq._ext.send_batch.SendBatch`:

- :func:`place_records` copies them into the commit log's mapped file and patches queue offset,
  physical offset and store timestamp;
- :func:`index_records` adds their KEYS and UNIQ_KEY to an index file.

The batch's rows and staging buffer are read as C fields (``send_batch_c.pxd``); the record
layout comes from protocol's declarations through the generated ``wire_facts.pxd``.
"""
cimport cython
from cpython.buffer cimport PyBUF_WRITABLE, PyObject_GetBuffer, PyBuffer_Release
from libc.stdint cimport int32_t, int64_t, uint8_t, uint32_t, uint64_t
from libc.string cimport memchr, memcpy

from .bigendian cimport get32 as _get32, put32 as _put32, put64 as _put64
from .javahash cimport jhash
from .properties cimport name_is
from .send_batch_c cimport C_FLAGS, C_KEY, C_PHYS, C_POS, C_QOFF, C_SIZE, C_TAGS, F_INDEX, NCOLS, SendBatch
from .wire_facts cimport *

__all__ = ["place_records", "place_one", "index_records"]

cdef enum:
    CQ_UNIT = 20  # a consume-queue entry: commit-log offset (8), size (4), tag code (8)
    NV_SEP = NAME_VALUE_SEPARATOR
    PROP_SEP = PROPERTY_SEPARATOR


# ----------------------------------------------------------------------------- placing
@cython.boundscheck(False)
@cython.wraparound(False)
def place_records(SendBatch b, object mapping, Py_ssize_t pos, Py_ssize_t file_size, long long file_from,
                  Py_ssize_t start, int64_t[::1] next_offsets, long long store_ts):
    """Copy records ``start..`` into ``mapping`` (a writable mapped file) from ``pos`` while each
    leaves the 8-byte end-of-file marker room; returns ``(next record, next pos)``.

    ``next_offsets[key]`` is the next queue offset of each of ``b.keys``; it is advanced.
    """
    cdef Py_buffer view
    cdef Py_ssize_t i = start, size
    cdef int64_t* c = b.r
    cdef uint8_t* dst
    cdef int64_t k
    if pos < 0 or start < 0 or next_offsets.shape[0] < len(b.keys):
        raise ValueError("a negative position, or fewer next offsets than the batch has queue keys")
    PyObject_GetBuffer(mapping, &view, PyBUF_WRITABLE)
    try:
        if file_size > view.len:
            raise ValueError("file_size is larger than the mapping")
        while i < b.n:
            size = c[i * NCOLS + C_SIZE]
            if pos + size + 8 > file_size:
                break
            dst = <uint8_t*>view.buf + pos
            memcpy(dst, b.staging.p + c[i * NCOLS + C_POS], size)
            k = c[i * NCOLS + C_KEY]
            c[i * NCOLS + C_QOFF] = next_offsets[k]
            next_offsets[k] += 1
            c[i * NCOLS + C_PHYS] = file_from + pos
            _put64(dst + REC_QUEUEOFFSET_POS, <uint64_t>c[i * NCOLS + C_QOFF])
            _put64(dst + REC_PHYSICALOFFSET_POS, <uint64_t>c[i * NCOLS + C_PHYS])
            _put64(dst + REC_STORETIMESTAMP_POS, <uint64_t>store_ts)
            pos += size
            i += 1
    finally:
        PyBuffer_Release(&view)
    return i, pos


@cython.boundscheck(False)
@cython.wraparound(False)
cpdef object place_one(SendBatch b, object mapping, Py_ssize_t pos, Py_ssize_t file_size, long long file_from,
                       long long queue_offset, long long store_ts, object cq_mapping=None, Py_ssize_t cq_pos=-1,
                       Py_ssize_t row=-1):
    """:func:`place_records` of a batch of one record (one send in flight) with its queue offset
    given: ``(next pos, the record's tag code)``, or None when it leaves no room for the 8-byte
    end-of-file marker (nothing written). With ``cq_mapping``, the record's 20-byte consume-queue
    entry (commit-log offset, size, tag code) is written there at ``cq_pos`` too. ``row``: the
    record of a larger batch to place instead (a put of records to queues of their own)."""
    cdef Py_buffer view
    cdef Py_buffer cq_view
    cdef Py_ssize_t size
    cdef uint8_t* dst
    cdef uint8_t* entry
    cdef int64_t* c
    cdef bint has_cq = cq_mapping is not None
    if row < 0:
        if b.n != 1 or pos < 0:
            raise ValueError("place_one takes a batch of one record and a non-negative position")
        c = b.r
    elif row >= b.n or pos < 0:
        raise ValueError("place_one takes a row of the batch and a non-negative position")
    else:
        c = b.r + row * NCOLS
    size = c[C_SIZE]
    if has_cq:
        PyObject_GetBuffer(cq_mapping, &cq_view, PyBUF_WRITABLE)
    try:
        if has_cq and (cq_pos < 0 or cq_pos + CQ_UNIT > cq_view.len):
            raise ValueError("the consume-queue entry's position is outside its mapping")
        PyObject_GetBuffer(mapping, &view, PyBUF_WRITABLE)
        try:
            if file_size > view.len:
                raise ValueError("file_size is larger than the mapping")
            if pos + size + 8 > file_size:
                return None
            dst = <uint8_t*>view.buf + pos
            memcpy(dst, b.staging.p + c[C_POS], size)
            c[C_QOFF] = queue_offset
            c[C_PHYS] = file_from + pos
            _put64(dst + REC_QUEUEOFFSET_POS, <uint64_t>queue_offset)
            _put64(dst + REC_PHYSICALOFFSET_POS, <uint64_t>(file_from + pos))
            _put64(dst + REC_STORETIMESTAMP_POS, <uint64_t>store_ts)
        finally:
            PyBuffer_Release(&view)
        if has_cq:
            entry = <uint8_t*>cq_view.buf + cq_pos
            _put64(entry, <uint64_t>(file_from + pos))
            _put32(entry + 8, <uint32_t>size)
            _put64(entry + 12, <uint64_t>c[C_TAGS])
    finally:
        if has_cq:
            PyBuffer_Release(&cq_view)
    return pos + size, c[C_TAGS]


# ----------------------------------------------------------------------------- index
# A record's keys as index_records finds them: as many as its properties can hold (a 2-byte
# length, a key and its separator at least 2 bytes), so that a trace message, whose keys are
# every traced message id of its batch, is indexed under all of them as RocketMQ indexes it.
# Module-level: index_records holds the GIL, so one call uses them at a time.
DEF MAX_RECORD_KEYS = 32768
cdef const uint8_t* key_ptrs[MAX_RECORD_KEYS + 1]
cdef Py_ssize_t key_lens[MAX_RECORD_KEYS + 1]

cdef inline Py_ssize_t _find(const uint8_t* p, Py_ssize_t i, Py_ssize_t end, uint8_t c) noexcept nogil:
    """The first ``c`` in ``p[i:end]``, or ``end``: four bytes one at a time, then memchr (a trace
    message's KEYS is one value of hundreds of ids, each of some 32 bytes)."""
    cdef Py_ssize_t short_end = i + 4
    cdef const uint8_t* at
    if short_end > end:
        short_end = end
    while i < short_end:
        if p[i] == c:
            return i
        i += 1
    if i >= end:
        return end
    at = <const uint8_t*>memchr(p + i, c, end - i)
    return end if at == NULL else at - p


@cython.boundscheck(False)
@cython.wraparound(False)
cpdef Py_ssize_t index_records(SendBatch b, Py_ssize_t start, object mapping, Py_ssize_t slots, Py_ssize_t entries,
                               list state, long long store_ts) except -1:
    """Add the KEYS (space-separated) and UNIQ_KEY of records ``start..`` to one index file.

    ``state`` is the file's ``[begin_ts, end_ts, begin_phy, end_phy, slot_count, count]``, updated
    in place and written to the 40-byte header once at the end. Returns the first record not
    (completely) indexed because the file filled up, or ``b.n``.
    """
    cdef Py_buffer view
    cdef int64_t begin_ts = state[0], end_ts = state[1], begin_phy = state[2], end_phy = state[3]
    cdef int64_t slot_count = state[4], count = state[5]
    cdef int64_t* c = b.r
    cdef Py_ssize_t i = start, p, n, tl, kn, ks, j, vs, vn, nkeys, q
    cdef const uint8_t* rec
    cdef const uint8_t* topic
    cdef const uint8_t* props
    cdef uint32_t th, h
    cdef int64_t phy, diff, prev, slot_pos, entry_pos
    cdef uint8_t* mm
    cdef const uint8_t* uniq
    cdef Py_ssize_t ul
    if slots <= 0 or entries <= 0:
        raise ValueError("an index file needs slots and entries")
    PyObject_GetBuffer(mapping, &view, PyBUF_WRITABLE)
    mm = <uint8_t*>view.buf
    try:
        if view.len < 40 + slots * 4 + entries * 20:
            raise ValueError("the mapping is smaller than the index file layout")
        while i < b.n:
            if not (c[i * NCOLS + C_FLAGS] & F_INDEX):
                i += 1
                continue
            rec = b.staging.p + c[i * NCOLS + C_POS]
            p = REC_BODY_POS + <int32_t>_get32(rec + REC_BODYLEN_POS)
            tl = rec[p]
            topic = rec + p + 1
            p += 1 + tl
            n = (<Py_ssize_t>rec[p] << 8) | rec[p + 1]
            props = rec + p + 2
            # KEYS (space-separated) first, then UNIQ_KEY, as the Python indexer orders them; a
            # record is indexed completely or not at all in one file
            nkeys = 0
            uniq = NULL
            ul = 0
            j = 0
            while j < n:
                ks = j
                while props[j] != NV_SEP:
                    j += 1
                kn = j - ks
                j += 1
                vs = j
                j = _find(props, j, n, PROP_SEP)
                vn = j - vs
                j += 1
                if name_is(props + ks, kn, PROP_UNIQ_CLIENT_MESSAGE_ID_KEYIDX, PROP_UNIQ_CLIENT_MESSAGE_ID_KEYIDX_LEN):
                    uniq, ul = props + vs, vn
                elif name_is(props + ks, kn, PROP_KEYS, PROP_KEYS_LEN):
                    nkeys = 0  # a repeated KEYS replaces the earlier one, as in a dict
                    q = vs
                    while q < vs + vn and nkeys < MAX_RECORD_KEYS:
                        while q < vs + vn and props[q] == <uint8_t>PROP_KEY_SEPARATOR[0]:
                            q += 1
                        ks = q
                        q = _find(props, q, vs + vn, <uint8_t>PROP_KEY_SEPARATOR[0])
                        if q > ks:
                            key_ptrs[nkeys] = props + ks
                            key_lens[nkeys] = q - ks
                            nkeys += 1
            if ul > 0:
                key_ptrs[nkeys] = uniq
                key_lens[nkeys] = ul
                nkeys += 1
            if count + nkeys > entries:
                break
            th = jhash(topic, tl, 0)
            th = th * 31 + 35  # '#'
            phy = c[i * NCOLS + C_PHYS]
            for j in range(nkeys):
                h = jhash(key_ptrs[j], key_lens[j], th)
                if <int32_t>h == -2147483648:
                    h = 0
                elif <int32_t>h < 0:
                    h = <uint32_t>(-<int32_t>h)
                slot_pos = 40 + (<int64_t>h % slots) * 4
                prev = <int32_t>_get32(mm + slot_pos)
                if prev <= 0 or prev >= count:
                    prev = 0
                if begin_ts == 0:
                    begin_ts = store_ts
                    begin_phy = phy
                diff = (store_ts - begin_ts) // 1000
                if diff < 0:
                    diff = 0
                entry_pos = 40 + slots * 4 + count * 20
                _put32(mm + entry_pos, h)
                _put64(mm + entry_pos + 4, <uint64_t>phy)
                _put32(mm + entry_pos + 12, <uint32_t>diff)
                _put32(mm + entry_pos + 16, <uint32_t>prev)
                _put32(mm + slot_pos, <uint32_t>count)
                count += 1
                if prev == 0:
                    slot_count += 1
                end_ts = store_ts
                end_phy = phy
            i += 1
        _put64(mm, <uint64_t>begin_ts)
        _put64(mm + 8, <uint64_t>end_ts)
        _put64(mm + 16, <uint64_t>begin_phy)
        _put64(mm + 24, <uint64_t>end_phy)
        _put32(mm + 32, <uint32_t>slot_count)
        _put32(mm + 36, <uint32_t>count)
    finally:
        PyBuffer_Release(&view)
    state[0], state[1], state[2], state[3], state[4], state[5] = begin_ts, end_ts, begin_phy, end_phy, \
        slot_count, count
    return i


def wire_facts() -> dict:
    """The wire-fact constants this module was compiled with (tests/test_wire_facts.py holds them
    to protocol's declarations, so a build from a stale ``wire_facts.pxd`` is caught)."""
    return compiled_wire_facts()
