"""Delivered timer messages built from their stored records, pure-Python reference of ``timer_deliver_c``.

The contract both twins keep (the differential tests hold them to the same bytes and rows):

:func:`delivered_records` takes the stored records of due timer messages (each the bytes at its
commit-log offset) and returns a :class:`~fastmq._ext.send_batch.SendBatch` of what RocketMQ 5's
``TimerMessageStore.convert`` / ``convertMessage`` stores for each, in order, plus the indexes of
the records it left to the caller's general path. A delivered record is the held one with:

- topic and queue id from ``REAL_TOPIC`` / ``REAL_QID``, both removed from the properties;
- ``WAIT`` removed, then ``TIMER_ENQUEUE_MS`` (the held record's store time),
  ``TIMER_DEQUEUE_MS`` (``now``) and ``WAIT=false`` appended, in that order; every other
  property in its place, byte for byte (an earlier TIMER_ENQUEUE_MS / TIMER_DEQUEUE_MS is dropped);
- body, body CRC, flag, sysFlag, born time and host, reconsume times kept; this store's host;
  queue offset, physical offset, store time and PREPARED_TRANSACTION_OFFSET 0 (the writer fills
  the first three).

Its row: the (topic, queue) key (one per distinct queue, in first-seen order), the tag code of its
TAGS (Java's String.hashCode, 0 without), F_INDEX when KEYS or UNIQ_KEY is non-empty, no F_WAIT.

:func:`real_topic_ids` reads only the ``REAL_TOPIC`` of held records (the timer service's
per-topic figures): given one buffer and each record's start and size in it, it returns each
record's id in ``ids`` (a topic first seen gets the next id, ``len(ids)``), -1 where the record is
not a well-formed IPv4 record or has no single usable REAL_TOPIC (its topic is not checked).

Left to the caller: a record that is not a well-formed IPv4 record of ``timer_topic``,
properties that are not ``k\\x01v\\x02`` pairs, REAL_TOPIC / REAL_QID missing, repeated or
unusable (a topic the store refuses, a queue that is not a non-negative int32), or a delivered
record over ``max_size``.
"""
from __future__ import annotations

import struct

import numpy as np
from typing import Sequence

from ..protocol.message_const import NAME_VALUE_SEPARATOR, PROPERTY_SEPARATOR, MessageConst
from ..protocol.record_layout import HOST_V6_BITS, MAX_TOPIC_LEN, MESSAGE_MAGIC_CODE, MIN_RECORD_LEN_V4
from .javahash import jhash
from .send_batch_py import F_INDEX, SendBatch

__all__ = ["delivered_records", "real_topic_ids"]

FIXED = MIN_RECORD_LEN_V4
_NAME_SEP, _PROP_SEP = NAME_VALUE_SEPARATOR.encode(), PROPERTY_SEPARATOR.encode()
_TAGS, _WAIT, _KEYS, _UNIQ_KEY, _REAL_TOPIC, _REAL_QID, _ENQ, _DEQ = (n.encode() for n in (
    MessageConst.TAGS, MessageConst.WAIT_STORE_MSG_OK, MessageConst.KEYS, MessageConst.UNIQ_CLIENT_MESSAGE_ID_KEYIDX,
    MessageConst.REAL_TOPIC, MessageConst.REAL_QUEUE_ID, MessageConst.TIMER_ENQUEUE_MS,
    MessageConst.TIMER_DEQUEUE_MS))
_DROPPED = frozenset((_REAL_TOPIC, _REAL_QID, _WAIT, _ENQ, _DEQ))
_TOPIC_CHARS = frozenset(b"%|_-0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz")
_HEAD = struct.Struct(">iiiiiqqiq8sq8siqi")  # TOTALSIZE .. BODYLEN (IPv4 hosts)
_U16 = struct.Struct(">H")


def _one(rec: bytes, timer_topic: bytes, now: int, store_host: bytes, max_size: int
         ) -> tuple[bytes, bytes, int, int, int] | None:
    """(record, real topic, queue id, tag code, flags) of one delivery; None for the caller."""
    n = len(rec)
    if n < FIXED:
        return None
    (size, magic, crc, _qid, flag, _qoff, _phys, sys_flag, born_ts, born_host, store_ts, _sh, reconsume,
     _prepared, body_len) = _HEAD.unpack_from(rec)
    if size != n or magic != MESSAGE_MAGIC_CODE - (1 << 32) or sys_flag & HOST_V6_BITS or body_len < 0 \
            or FIXED + body_len > n:
        return None
    p = _HEAD.size + body_len
    tl = rec[p]
    if rec[p + 1:p + 1 + tl] != timer_topic or p + 3 + tl > n:
        return None
    pl = _U16.unpack_from(rec, p + 1 + tl)[0]
    props_at = p + 3 + tl
    if props_at + pl != n:
        return None
    pb = rec[props_at:]
    if not pb or pb[-1:] != _PROP_SEP:
        return None
    kept: list[bytes] = []
    rt = q = None
    tags = b""
    index = False
    for item in pb[:-1].split(_PROP_SEP):
        k, sep, v = item.partition(_NAME_SEP)
        if not sep or not k or _NAME_SEP in v:
            return None
        if k == _REAL_TOPIC or k == _REAL_QID:
            if (rt if k == _REAL_TOPIC else q) is not None:
                return None  # repeated
            if k == _REAL_TOPIC:
                rt = v
            else:
                q = v
        if k in _DROPPED:
            continue
        if k == _TAGS:
            tags = v
        elif k == _KEYS or k == _UNIQ_KEY:
            index = index or bool(v)
        kept.append(item)
    if not rt or len(rt) > MAX_TOPIC_LEN or not _TOPIC_CHARS.issuperset(rt):
        return None
    if q is None or not q or len(q) > 10 or not q.isdigit() or int(q) > 0x7FFFFFFF:
        return None
    kept.append(_ENQ + _NAME_SEP + b"%d" % store_ts)
    kept.append(_DEQ + _NAME_SEP + b"%d" % now)
    kept.append(_WAIT + _NAME_SEP + b"false")
    props = _PROP_SEP.join(kept) + _PROP_SEP
    if len(props) > 0x7FFF:
        return None
    real_qid = int(q)
    out_size = FIXED + body_len + len(rt) + len(props)
    if out_size > max_size:
        return None
    out = b"".join((
        _HEAD.pack(out_size, magic, crc, real_qid, flag, 0, 0, sys_flag, born_ts, born_host, 0, store_host,
                   reconsume, 0, body_len),
        rec[_HEAD.size:p], bytes((len(rt),)), rt, _U16.pack(len(props)), props))
    return out, rt, real_qid, jhash(tags) if tags else 0, F_INDEX if index else 0


def delivered_records(records: Sequence[bytes | memoryview], timer_topic: bytes, now: int, store_host: bytes,
                      max_size: int) -> tuple[SendBatch, list[int]]:
    """The deliveries of ``records`` (module doc) and the indexes left to the caller. ``now``:
    TIMER_DEQUEUE_MS; ``store_host``: this store's packed IPv4 host (8 bytes)."""
    b = SendBatch(len(records), 0)
    left: list[int] = []
    keys: dict[tuple[bytes, int], int] = {}
    if len(store_host) != 8:
        return b, list(range(len(records)))
    for i, r in enumerate(records):
        one = _one(bytes(r), timer_topic, now, store_host, max_size)
        if one is None:
            left.append(i)
            continue
        rec, rt, qid, tag, flags = one
        k = keys.get((rt, qid))
        if k is None:
            k = keys[(rt, qid)] = len(b.keys)
            b.keys.append((rt.decode("ascii"), qid))
        b.add(i, rec, k, tag, flags, qid)
    b.finish()
    return b, left


def _real_topic(rec: bytes) -> bytes | None:
    """The REAL_TOPIC of one held record; None when it has no usable one."""
    n = len(rec)
    if n < FIXED:
        return None
    size, magic, sys_flag, body_len = (struct.unpack_from(">i", rec, 0)[0], struct.unpack_from(">i", rec, 4)[0],
                                       struct.unpack_from(">i", rec, 36)[0], struct.unpack_from(">i", rec, 84)[0])
    if size != n or magic != MESSAGE_MAGIC_CODE - (1 << 32) or sys_flag & HOST_V6_BITS or body_len < 0 \
            or FIXED + body_len > n:
        return None
    p = _HEAD.size + body_len
    tl = rec[p]
    if p + 3 + tl > n:
        return None
    props_at = p + 3 + tl
    if props_at + _U16.unpack_from(rec, p + 1 + tl)[0] != n:
        return None
    pb = rec[props_at:]
    if not pb or pb[-1:] != _PROP_SEP:
        return None
    rt = None
    for item in pb[:-1].split(_PROP_SEP):
        k, sep, v = item.partition(_NAME_SEP)
        if not sep or not k or _NAME_SEP in v:
            return None
        if k == _REAL_TOPIC:
            if rt is not None:
                return None
            rt = v
    if not rt or len(rt) > MAX_TOPIC_LEN or not _TOPIC_CHARS.issuperset(rt):
        return None
    return rt


def real_topic_ids(buf: bytes | memoryview, starts: np.ndarray, sizes: np.ndarray, ids: dict[str, int]) -> np.ndarray:
    """The id in ``ids`` of each held record's REAL_TOPIC (module doc); ``starts`` int64 and
    ``sizes`` int32, one per record, into ``buf``."""
    if len(starts) != len(sizes):
        raise ValueError("starts and sizes differ in length")
    out = np.full(len(starts), -1, np.int32)
    mv = memoryview(buf).cast("B")
    for i, (s, n) in enumerate(zip(starts.tolist(), sizes.tolist())):
        if s < 0 or n <= 0 or s + n > len(mv):
            continue
        rt = _real_topic(bytes(mv[s:s + n]))
        if rt is None:
            continue
        name = rt.decode("ascii")
        got = ids.get(name)
        if got is None:
            got = ids[name] = len(ids)
        out[i] = got
    return out
