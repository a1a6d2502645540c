"""The records of an END_TRANSACTION, pure-Python reference of ``end_transaction_c``.

The contract both twins keep (the differential tests hold them to the same bytes and rows):

:func:`end_records` takes the stored half record (the bytes at the commit-log offset the
request names) and, when nothing about it needs judgement, returns a
:class:`~fastmq._ext.send_batch.SendBatch` of what 4.9.8's EndTransactionProcessor stores: for a
commit the real message and then the op message, for a rollback the op message alone. The
store's record writer places them in one append (``MessageStore.put_batch_now``), as it places a
run of sends.

- The real message is the half's record with the real topic and queue back (``REAL_TOPIC`` /
  ``REAL_QID``), sysFlag COMMIT (``resetTransactionValue``), PREPARED_TRANSACTION_OFFSET the
  half's commit-log offset and this store's STOREHOST; body, flag, born time and host, reconsume
  times and the properties string are the half's, byte for byte (4.9.8 clears REAL_TOPIC,
  REAL_QID and TRAN_MSG from its map after serializing it, so its commit log keeps them too).
- The op message: ``op_topic`` on the half's queue, tag ``op_tag`` (4.9's ``d``), body the half's queue offset in
  decimal, born ``now`` at this store's host, flag and sysFlag 0.

Anything else is None, and the processor takes the long way (``TransactionalMessageBridge``),
which answers every refusal with 4.9's remark: no well-formed IPv4 record of ``half_topic``
starting at ``half_offset``, a queue offset or PGROUP other than the request's, REAL_TOPIC /
REAL_QID missing, repeated or unusable (a topic the store would refuse, a queue that is not a
plain non-negative int32), a DELAY level (the store would park the commit on it), a PGROUP
repeated, malformed properties, or a real record over ``max_size``.
"""
from __future__ import annotations

import struct
import zlib

from ..protocol.message_const import NAME_VALUE_SEPARATOR, PROPERTY_SEPARATOR, MessageConst, MessageSysFlag
from ..protocol.record_layout import HOST_V6_BITS, MAX_TOPIC_LEN, MESSAGE_MAGIC_CODE, MIN_RECORD_LEN_V4
from .javahash import jhash
from .send_batch_py import F_INDEX, F_WAIT, SendBatch

__all__ = ["end_fields", "end_records"]

FIXED = MIN_RECORD_LEN_V4
_TX_MASK = MessageSysFlag.TRANSACTION_ROLLBACK_TYPE
_COMMIT = MessageSysFlag.TRANSACTION_COMMIT_TYPE
_NAME_SEP, _PROP_SEP = NAME_VALUE_SEPARATOR.encode(), PROPERTY_SEPARATOR.encode()
_TAGS, _WAIT, _KEYS, _UNIQ_KEY, _DELAY, _REAL_TOPIC, _REAL_QID, _PGROUP = (n.encode() for n in (
    MessageConst.TAGS, MessageConst.WAIT_STORE_MSG_OK, MessageConst.KEYS, MessageConst.UNIQ_CLIENT_MESSAGE_ID_KEYIDX,
    MessageConst.DELAY_TIME_LEVEL, MessageConst.REAL_TOPIC, MessageConst.REAL_QUEUE_ID,
    MessageConst.PRODUCER_GROUP))
_TAGS_NV = MessageConst.TAGS.encode() + _NAME_SEP
_TOPIC_CHARS = frozenset(b"%|_-0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz")
_HEAD = struct.Struct(">iiiiiqqiq8sq8siqi")  # TOTALSIZE .. BODYLEN (IPv4 hosts)
_U16 = struct.Struct(">H")


def _props(p: bytes) -> dict[bytes, list[bytes]] | None:
    """The pairs of a stored properties string (each name's values in order); None when it is
    not well formed (every pair ``k\\x01v\\x02``, non-empty names)."""
    if p and p[-1:] != _PROP_SEP:
        return None
    out: dict[bytes, list[bytes]] = {}
    for item in p[:-1].split(_PROP_SEP) if p else ():
        k, sep, v = item.partition(_NAME_SEP)
        if not sep or not k or _NAME_SEP in v:
            return None
        out.setdefault(k, []).append(v)
    return out


#: every field of 4.9.8's EndTransactionRequestHeader (and 5.x's ``bname``): a header naming any
#: other goes the long way, whose name check sees it
END_FIELDS = frozenset(("producerGroup", "tranStateTableOffset", "commitLogOffset", "commitOrRollback",
                        "fromTransactionCheck", "msgId", "transactionId", "bname"))


def _offset(v: str | None) -> int | None:
    """A plain non-negative decimal (1 to 18 ASCII digits), else None."""
    if v is None or not 0 < len(v) <= 18 or not v.isascii() or not v.isdigit():
        return None
    return int(v)


def end_fields(fields: dict[str, str] | None, legal_groups: set[str] | frozenset[str]) -> tuple[bytes, int, int, bool] | None:
    """``(producerGroup as UTF-8, tranStateTableOffset, commitLogOffset, commit)`` of an
    END_TRANSACTION header the batch path takes as it is; None for the long way (whose header
    decoding answers every refusal with 4.9's text).

    Taken: only :data:`END_FIELDS`, every value a ``str``; a producer group in ``legal_groups``
    (names the broker's name check already passed); ``msgId`` present; ``fromTransactionCheck``
    absent or ``false`` (an answer to a check looks for an earlier commit first);
    ``commitOrRollback`` ``8`` or ``12``; both offsets plain non-negative decimals."""
    if type(fields) is not dict or len(fields) > len(END_FIELDS):
        return None
    for k, v in fields.items():
        if k not in END_FIELDS or type(v) is not str:
            return None
    group = fields.get("producerGroup")
    if not group or group not in legal_groups or "msgId" not in fields:
        return None
    if fields.get("fromTransactionCheck", "false") != "false":
        return None
    cor = fields.get("commitOrRollback")
    if cor == "8":
        commit = True
    elif cor == "12":
        commit = False
    else:
        return None
    qoff, clo = _offset(fields.get("tranStateTableOffset")), _offset(fields.get("commitLogOffset"))
    if qoff is None or clo is None:
        return None
    try:
        return group.encode("utf-8"), qoff, clo, commit
    except UnicodeEncodeError:  # (a lone surrogate: the long way refuses it)
        return None


def end_records(half: bytes | memoryview, half_offset: int, half_topic: bytes, group: bytes, queue_offset: int,
                commit: bool, op_topic: bytes, op_tag: bytes, now: int, store_host: bytes,
                max_size: int) -> SendBatch | None:
    """The records ending the half ``half`` stored at ``half_offset`` (module doc); None for the
    long way. ``group`` and ``queue_offset`` are the request's producerGroup and
    tranStateTableOffset; ``now`` the op message's born time (ms); ``store_host`` this store's
    packed IPv4 host."""
    rec = bytes(half)
    n = len(rec)
    if n < FIXED or len(store_host) != 8:
        return None
    (size, magic, crc, qid, flag, qoff, phys, sys_flag, born_ts, born_host, _store_ts, _store_host, reconsume,
     _prepared, body_len) = _HEAD.unpack_from(rec)
    if (size != n or magic != MESSAGE_MAGIC_CODE - (1 << 32) or sys_flag & HOST_V6_BITS or phys != half_offset
            or qoff != queue_offset or body_len < 0 or FIXED + body_len > n):
        return None
    p = _HEAD.size + body_len  # the body's end: TOPICLEN
    tl = rec[p]
    if rec[p + 1:p + 1 + tl] != half_topic or p + 3 + tl > n:
        return None
    pl = _U16.unpack_from(rec, p + 1 + tl)[0]
    props_at = p + 3 + tl
    if props_at + pl != n:
        return None
    pb = rec[props_at:]
    props = _props(pb)
    if props is None or _DELAY in props or props.get(_PGROUP) != [group]:
        return None
    b = SendBatch(1, 0)
    if commit:
        topic, qid_s = props.get(_REAL_TOPIC), props.get(_REAL_QID)
        if topic is None or qid_s is None or len(topic) != 1 or len(qid_s) != 1:
            return None
        rt, q = topic[0], qid_s[0]
        if not rt or len(rt) > MAX_TOPIC_LEN or not _TOPIC_CHARS.issuperset(rt):
            return None
        if not q or len(q) > 10 or not q.isdigit() or not q.isascii() or int(q) > 0x7FFFFFFF:
            return None
        real_qid = int(q)
        if rt == op_topic and real_qid == qid:  # (one queue key for both would give them one offset)
            return None
        rsize = n - tl + len(rt)
        if rsize > max_size:
            return None
        tags = props.get(_TAGS)
        tag = tags[-1] if tags else b""
        wait = props.get(_WAIT)
        index = any(props.get(k, [b""])[-1] for k in (_KEYS, _UNIQ_KEY))
        real = b"".join((
            _HEAD.pack(rsize, magic, crc, real_qid, flag, 0, 0, (sys_flag & ~_TX_MASK) | _COMMIT, born_ts, born_host,
                       0, store_host, reconsume, half_offset, body_len),
            rec[88:p], bytes((len(rt),)), rt, rec[p + 1 + tl:]))
        b.keys.append((rt.decode("ascii"), real_qid))
        b.add(0, real, 0, jhash(tag) if tag else 0,
              (0 if wait and wait[-1] == b"false" else F_WAIT) | (F_INDEX if index else 0), real_qid)
    op_body = b"%d" % queue_offset
    op_props = _TAGS_NV + op_tag + _PROP_SEP
    op_size = FIXED + len(op_body) + len(op_topic) + len(op_props)
    op = b"".join((
        _HEAD.pack(op_size, magic, zlib.crc32(op_body) & 0x7FFFFFFF, qid, 0, 0, 0, 0, now, store_host, 0, store_host,
                   0, 0, len(op_body)),
        op_body, bytes((len(op_topic),)), op_topic, _U16.pack(len(op_props)), op_props))
    b.keys.append((op_topic.decode("ascii"), qid))
    b.add(0, op, len(b.keys) - 1, jhash(op_tag), F_WAIT, qid)
    b.fast.append(0)
    b.finish()
    return b
