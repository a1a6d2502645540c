"""The store's record writer, pure-Python reference of ``record_writer_c``.

The contract both twins keep (tests/test_send_pipeline.py holds them to the same bytes):

- :func:`place_records` copies the records of a :class:`~fastmq._ext.send_batch.SendBatch` into
  the commit log's mapped file and patches their queue offset, physical offset and store
  timestamp (the rows' ``queue_offset`` and ``commit_log_offset`` columns get them too);
- :func:`index_records` adds their KEYS and UNIQ_KEY to an index file (layout in
  ``fastmq/store/index.py``), a record all or nothing per file.
"""
from __future__ import annotations

import struct
from typing import Any

import numpy as np

from ..protocol.message_const import NAME_VALUE_SEPARATOR, PROPERTY_SEPARATOR, MessageConst
from ..protocol.record_layout import PHYS_OFFSET_POS, POS_V4, QUEUE_OFFSET_POS
from .javahash import jhash
from .send_batch_py import C_FLAGS, C_KEY, C_PHYS, C_POS, C_QOFF, C_SIZE, C_TAGS, F_INDEX, SendBatch

__all__ = ["place_records", "place_one", "index_records"]

_STORE_TS_POS, _BODY_LEN_POS, _BODY_POS = POS_V4["STORETIMESTAMP"], POS_V4["BODYLEN"], POS_V4["BODY"]
_NAME_SEP, _PROP_SEP = NAME_VALUE_SEPARATOR.encode(), PROPERTY_SEPARATOR.encode()
_KEYS, _UNIQ_KEY, _KEY_SEP = (n.encode() for n in (
    MessageConst.KEYS, MessageConst.UNIQ_CLIENT_MESSAGE_ID_KEYIDX, MessageConst.KEY_SEPARATOR))
_I32 = struct.Struct(">i")
_I64 = struct.Struct(">q")
_CQ_ENTRY = struct.Struct(">qiq")  # a consume-queue entry: commit-log offset, size, tag code


def place_records(b: SendBatch, mapping: Any, pos: int, file_size: int, file_from: int, start: int,
                  next_offsets: np.ndarray, store_ts: int) -> tuple[int, int]:
    """Copy records ``start..`` into ``mapping`` from ``pos`` while each leaves the 8-byte
    end-of-file marker room; returns ``(next record, next pos)``. Advances ``next_offsets``."""
    if pos < 0 or start < 0 or len(next_offsets) < len(b.keys):
        raise ValueError("a negative position, or fewer next offsets than the batch has queue keys")
    mv = memoryview(mapping)
    if file_size > len(mv):
        raise ValueError("file_size is larger than the mapping")
    c = b.cols
    i = start
    while i < b.n:
        size = int(c[i, C_SIZE])
        if pos + size + 8 > file_size:
            break
        src = int(c[i, C_POS])
        mv[pos:pos + size] = b.staging[src:src + size]
        k = int(c[i, C_KEY])
        c[i, C_QOFF] = next_offsets[k]
        next_offsets[k] += 1
        c[i, C_PHYS] = file_from + pos
        _I64.pack_into(mv, pos + QUEUE_OFFSET_POS, int(c[i, C_QOFF]))
        _I64.pack_into(mv, pos + PHYS_OFFSET_POS, int(c[i, C_PHYS]))
        _I64.pack_into(mv, pos + _STORE_TS_POS, store_ts)
        pos += size
        i += 1
    return i, pos


def place_one(b: SendBatch, mapping: Any, pos: int, file_size: int, file_from: int, queue_offset: int,
              store_ts: int, cq_mapping: Any = None, cq_pos: int = -1, row: int = -1) -> tuple[int, int] | None:
    """:func:`place_records` of a batch of one record (one send in flight) with its queue offset
    given: ``(next pos, the record's tag code)``, or None when it leaves no room for the 8-byte
    end-of-file marker (nothing written). With ``cq_mapping``, the record's 20-byte consume-queue
    entry (commit-log offset, size, tag code) is written there at ``cq_pos`` too. ``row``: the
    record of a larger batch to place instead (a put of records to queues of their own)."""
    if row < 0:
        if b.n != 1 or pos < 0:
            raise ValueError("place_one takes a batch of one record and a non-negative position")
        row = 0
    elif row >= b.n or pos < 0:
        raise ValueError("place_one takes a row of the batch and a non-negative position")
    c = b.cols[row]
    size = int(c[C_SIZE])
    cq = memoryview(cq_mapping) if cq_mapping is not None else None
    if cq is not None and (cq_pos < 0 or cq_pos + _CQ_ENTRY.size > len(cq)):
        raise ValueError("the consume-queue entry's position is outside its mapping")
    mv = memoryview(mapping)
    if file_size > len(mv):
        raise ValueError("file_size is larger than the mapping")
    if pos + size + 8 > file_size:
        return None
    src = int(c[C_POS])
    mv[pos:pos + size] = b.staging[src:src + size]
    c[C_QOFF] = queue_offset
    c[C_PHYS] = file_from + pos
    _I64.pack_into(mv, pos + QUEUE_OFFSET_POS, queue_offset)
    _I64.pack_into(mv, pos + PHYS_OFFSET_POS, file_from + pos)
    _I64.pack_into(mv, pos + _STORE_TS_POS, store_ts)
    if cq is not None:
        _CQ_ENTRY.pack_into(cq, cq_pos, file_from + pos, size, int(c[C_TAGS]))
    return pos + size, int(c[C_TAGS])


def _record_keys(rec: bytes | bytearray) -> tuple[bytes, list[bytes]]:
    p = _BODY_POS + _I32.unpack_from(rec, _BODY_LEN_POS)[0]
    tl = rec[p]
    topic = bytes(rec[p + 1:p + 1 + tl])
    p += 1 + tl
    n = struct.unpack_from(">H", rec, p)[0]
    props = bytes(rec[p + 2:p + 2 + n])
    keys: list[bytes] = []
    uniq = b""
    for item in props[:-1].split(_PROP_SEP) if props else []:
        k, _, v = item.partition(_NAME_SEP)
        if k == _UNIQ_KEY:
            uniq = v
        elif k == _KEYS:
            keys = [x for x in v.split(_KEY_SEP) if x]
    if uniq:
        keys.append(uniq)
    return topic, keys


def index_records(b: SendBatch, start: int, mapping: Any, slots: int, entries: int, state: list[int],
                  store_ts: int) -> int:
    """Add KEYS and UNIQ_KEY of records ``start..`` to one index file; ``state`` is
    ``[begin_ts, end_ts, begin_phy, end_phy, slot_count, count]`` (updated in place). Returns the
    first record not indexed because the file filled up, or ``b.n``."""
    if slots <= 0 or entries <= 0:
        raise ValueError("an index file needs slots and entries")
    mv = memoryview(mapping)
    if len(mv) < 40 + slots * 4 + entries * 20:
        raise ValueError("the mapping is smaller than the index file layout")
    begin_ts, end_ts, begin_phy, end_phy, slot_count, count = state
    c = b.cols
    i = start
    while i < b.n:
        if not c[i, C_FLAGS] & F_INDEX:
            i += 1
            continue
        pos = int(c[i, C_POS])
        rec = b.staging[pos:pos + int(c[i, C_SIZE])]
        topic, keys = _record_keys(rec)
        if count + len(keys) > entries:
            break
        phy = int(c[i, C_PHYS])
        for key in keys:
            h = jhash(topic + b"#" + key)
            h = 0 if h == -(1 << 31) else abs(h)
            slot_pos = 40 + (h % slots) * 4
            prev = _I32.unpack_from(mv, slot_pos)[0]
            if prev <= 0 or prev >= count:
                prev = 0
            if begin_ts == 0:
                begin_ts, begin_phy = store_ts, phy
            diff = max(0, (store_ts - begin_ts) // 1000)
            struct.pack_into(">iqii", mv, 40 + slots * 4 + count * 20, h, phy, diff, prev)
            _I32.pack_into(mv, slot_pos, count)
            count += 1
            slot_count += prev == 0
            end_ts, end_phy = store_ts, phy
        i += 1
    struct.pack_into(">qqqqii", mv, 0, begin_ts, end_ts, begin_phy, end_phy, slot_count, count)
    state[:] = [begin_ts, end_ts, begin_phy, end_phy, slot_count, count]
    return i
