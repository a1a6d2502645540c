"""The broker's send stage, pure-Python reference of ``send_c``.

The contract both twins keep (the differential tests hold them to the same bytes and rows):

- :func:`encode_sends` takes a list of SEND_MESSAGE / SEND_MESSAGE_V2 / SEND_BATCH_MESSAGE
  requests and encodes, back to back in one staging buffer, a commit-log record per message
  (RocketMQ's store format with IPv4 hosts; queue offset, physical offset and store timestamp
  left 0). A request is taken only when nothing about it needs judgement: a JSON header whose
  fields are plain decimal strings, a topic found in ``topics`` (the processor's cache of topics
  that passed its checks), a producer group found in ``groups`` when that set is given (its cache
  of groups), a queue id under its bound, no transactional prepared/rollback flag,
  properties made of well-formed ``k\\x01v\\x02`` pairs (the last \\x02 may be missing, as the Java
  client sends them; the record then adds it) without DELAY, TRAN_MSG or CLUSTER, a record within
  ``max_size``, and for a batch a body whose every entry is well formed. Every other request is
  listed in ``SendBatch.slow`` and left to the Python processor, which answers it with
  RocketMQ's checks and remarks. Each record's properties are the message's own plus
  ``cluster_prop``.
- A half (one request, TRAN_MSG exactly ``true``) is taken too when the processor passes
  ``half_topic`` (the broker takes halves and the half topic exists): its record is 4.9.8's
  prepareMessage (the half topic, queue 0, transaction bits reset, CLUSTER then REAL_TOPIC and
  REAL_QID after the message's properties), its row's queue id the requested one, which the
  answer names (:func:`_half` says which halves still take the long way).
- The records and their rows go into a :class:`~fastmq._ext.send_batch.SendBatch` (one int64
  row of ``COLUMNS`` per record); the store's record writer (``record_writer``) places and
  indexes them, filling in the offsets.
- :func:`encode_answers` writes the SUCCESS frames, byte for byte what the codec writes for
  ``response_for(request, 0, None, {msgId, queueId, queueOffset, MSG_REGION, TRACE_ON})``.

Why the stage is named ``send``: it speeds up the broker's SEND processor both ways, the
requests it decides on and the answers it writes, so neither "decode" nor "encode" names it.
"""
from __future__ import annotations

import struct
import zlib
from typing import Any, TypeGuard

from ..protocol.codes import RequestCode
from ..protocol.headers import SendMessageResponseHeader, declared, send_wire_names
from ..protocol.message_const import NAME_VALUE_SEPARATOR, PROPERTY_SEPARATOR, MessageConst, MessageSysFlag
from ..protocol.record_layout import (BATCH_HEAD_FORMAT, BATCH_MIN_LEN, BATCH_POS, HEAD_FORMAT, HOST_V6_BITS,
                                      MAX_PROPERTIES_LEN, MAX_TOPIC_LEN, MESSAGE_MAGIC_CODE, MIN_RECORD_LEN_V4)
from .javahash import jhash
from .send_batch_py import C_PHYS, C_QID, C_QOFF, C_REQ, F_INDEX, F_WAIT, SendBatch

__all__ = ["encode_sends", "encode_answers", "crc32", "java_hash", "answer_template", "binary_answer_template"]

FIXED = MIN_RECORD_LEN_V4
MAGIC = MESSAGE_MAGIC_CODE
_SEND, _SEND_V2, _SEND_BATCH = (int(RequestCode.SEND_MESSAGE), int(RequestCode.SEND_MESSAGE_V2),
                                int(RequestCode.SEND_BATCH_MESSAGE))
_CODES = (_SEND, _SEND_V2, _SEND_BATCH)
#: The send header fields both twins' fast path reads, by position (``names[i]``); their wire
#: names come from the declaration (protocol/headers.py).
SEND_FAST_ATTRS = ("producerGroup", "topic", "defaultTopic", "defaultTopicQueueNums", "queueId", "sysFlag",
                   "bornTimestamp", "flag", "properties", "reconsumeTimes", "batch", "maxReconsumeTimes")
_V1, _V2 = send_wire_names(SEND_FAST_ATTRS)
#: The answer's fields, in the order the template writes them.
_MSG_ID, _QUEUE_ID, _QUEUE_OFFSET = declared(SendMessageResponseHeader, "msgId", "queueId", "queueOffset")
_HEAD = struct.Struct(HEAD_FORMAT)       # TOTALSIZE .. BORNTIMESTAMP
_BATCH_HEAD = struct.Struct(BATCH_HEAD_FORMAT)  # one entry of a SEND_BATCH_MESSAGE body
_BATCH_BODY = BATCH_POS["BODY"]
_TX_MASK = MessageSysFlag.TRANSACTION_PREPARED_TYPE | MessageSysFlag.TRANSACTION_COMMIT_TYPE
_TX_HELD = (MessageSysFlag.TRANSACTION_PREPARED_TYPE, MessageSysFlag.TRANSACTION_ROLLBACK_TYPE)
_NAME_SEP, _PROP_SEP = NAME_VALUE_SEPARATOR.encode(), PROPERTY_SEPARATOR.encode()
_TAGS, _WAIT, _KEYS, _UNIQ_KEY, _DELAY, _TRAN_MSG, _CLUSTER = (n.encode() for n in (
    MessageConst.TAGS, MessageConst.WAIT_STORE_MSG_OK, MessageConst.KEYS, MessageConst.UNIQ_CLIENT_MESSAGE_ID_KEYIDX,
    MessageConst.DELAY_TIME_LEVEL, MessageConst.TRANSACTION_PREPARED, MessageConst.CLUSTER))
_TIMER = MessageConst.TIMER_PREFIX.encode()
_I32 = struct.Struct(">i")
_I64 = struct.Struct(">q")
_U32 = struct.Struct(">I")


def crc32(data: bytes) -> int:
    """zlib's CRC-32 of ``data``."""
    return zlib.crc32(data)


def java_hash(data: bytes) -> int:
    """Java's String.hashCode() of the UTF-8 text ``data`` (signed int32)."""
    return jhash(data)


def _int(v: Any) -> int | None:
    """A plain ``-?[0-9]{1,18}`` str as an int, else None."""
    if type(v) is not str or not v:
        return None
    digits = v[1:] if v[0] == "-" else v
    if not digits or len(digits) > 18 or not digits.isascii() or not digits.isdigit():
        return None
    return int(v)


def _i32(v: int | None) -> TypeGuard[int]:
    return v is not None and -(1 << 31) <= v < (1 << 31)


class _Props:
    __slots__ = ("ok", "wait", "index", "delay", "cluster", "tags", "sep", "half")

    def __init__(self, p: bytes) -> None:
        self.ok, self.wait, self.index, self.delay, self.cluster, self.tags = True, True, False, False, False, 0
        #: TRAN_MSG is exactly "true" (what the clients send): a half, which the fast path takes
        #: when the processor gives it the half topic; any other TRAN_MSG is the processor's
        self.half = False
        #: what goes between the message's properties and CLUSTER in the record: the \x02 that
        #: the Java client (4.9's messageProperties2String) leaves off after its last pair
        self.sep = _PROP_SEP if p and p[-1:] != _PROP_SEP else b""
        if not p:
            return
        for item in (p + self.sep)[:-1].split(_PROP_SEP):
            k, sep, v = item.partition(_NAME_SEP)
            if not sep or not k or _NAME_SEP in v:
                self.ok = False
                return
            if k == _TAGS:
                self.tags = jhash(v) if v else 0
            elif k == _WAIT:
                self.wait = v != b"false"
            elif k in (_KEYS, _UNIQ_KEY):
                self.index = self.index or bool(v)
            elif k == _TRAN_MSG:  # "true": a half (see encode_sends); anything else the processor judges
                if v == b"true" and not self.half:
                    self.half = True
                else:
                    self.delay = True
            elif k == _DELAY:  # the processor judges a delay level
                self.delay = True
            elif k == _CLUSTER:
                self.cluster = True
            elif k.startswith(_TIMER) and len(k) > len(_TIMER):  # a timer message: the processor decides
                self.delay = True


#: One message of a request: its flag, body, properties (with their trailing separator), and what
#: the properties say.
_Entry = tuple[int, bytes, bytes, _Props]


def _record(qid: int, flag: int, sys_flag: int, born_ts: int, reconsume: int, body: bytes, topic: bytes,
            props: bytes, born_host: bytes, store_host: bytes) -> bytes:
    size = FIXED + len(body) + len(topic) + len(props)
    return b"".join((
        _HEAD.pack(size, MAGIC, zlib.crc32(body) & 0x7FFFFFFF, qid, flag, 0, 0, sys_flag, born_ts),
        born_host, _I64.pack(0), store_host, _I32.pack(reconsume), _I64.pack(0),
        _I32.pack(len(body)), body, bytes((len(topic),)), topic,
        struct.pack(">H", len(props)), props))


def encode_sends(requests: list[Any], topics: dict[str, tuple[int, int, int]], born_host: bytes,
                 store_host: bytes, cluster_prop: bytes, max_size: int, rr: int = 0, *,
                 groups: set[str] | None = None, born_hosts: list[bytes] | None = None,
                 binary: bool = False, half_topic: str | None = None) -> SendBatch:
    """Encode every request the fast path takes; list the others in ``slow`` (module doc).
    ``binary``: take requests in RocketMQ's binary header too (their answers then need
    encode_answers' ``binary_template``). ``half_topic``: take halves too (see :func:`_half`)."""
    b = SendBatch(len(requests), rr)
    if len(born_host) != 8 or len(store_host) != 8:
        raise ValueError("the fast path takes packed IPv4 hosts (8 bytes)")
    if born_hosts is not None:
        if len(born_hosts) != len(requests):
            raise ValueError("born_hosts must give one host per request")
        if any(type(h) is not bytes or len(h) != 8 for h in born_hosts):
            raise ValueError("the fast path takes packed IPv4 hosts (8 bytes)")
    key_index: dict[tuple[str, int], int] = {}
    for i, req in enumerate(requests):
        if ((req.serialize_type != 0 and not (binary and req.serialize_type == 1)) or req.code not in _CODES
                or type(req.ext_fields) is not dict):
            b.slow.append(i)
            continue
        f = req.ext_fields
        names = _V1 if req.code == _SEND else _V2
        topic = f.get(names[1])
        info = topics.get(topic) if type(topic) is str else None
        qid = _int(f.get(names[4]))
        sys_flag, born_ts, flag = _int(f.get(names[5])), _int(f.get(names[6])), _int(f.get(names[7]))
        rc = f.get(names[9])
        reconsume = 0 if rc is None else _int(rc)
        bv = f.get(names[10])
        # maxReconsumeTimes: not used here, but a bad one is refused (by the slow path)
        mrt = f.get(names[11])
        if (names[0] not in f or names[2] not in f or not _i32(_int(f.get(names[3]))) or info is None
                or (groups is not None and f.get(names[0]) not in groups)
                or not _i32(qid) or qid >= info[0] or not _i32(sys_flag) or born_ts is None or not _i32(flag)
                or not _i32(reconsume) or bv not in (None, "true", "false", "0", "1")
                or (mrt is not None and not _i32(_int(mrt)))):
            b.slow.append(i)
            continue
        assert sys_flag is not None and flag is not None and reconsume is not None
        assert isinstance(topic, str)  # else ``info`` is None and the request went to ``slow``
        held = (sys_flag & _TX_MASK) in _TX_HELD
        if held and half_topic is None:
            b.slow.append(i)
            continue
        sys_flag = (sys_flag & ~HOST_V6_BITS) | info[2]
        # Java's parseBoolean, plus the C++ client's "1" on SEND_MESSAGE (see fast_send_header)
        batch = req.code == _SEND_BATCH or bv == "true" or (bv == "1" and req.code == _SEND)
        try:
            tb = topic.encode("utf-8")
        except UnicodeEncodeError:
            b.slow.append(i)
            continue
        body = req.body if req.body is not None else b""
        if type(body) is not bytes or len(tb) > MAX_TOPIC_LEN:
            b.slow.append(i)
            continue
        entries: list[_Entry] | None
        if not batch:
            props = f.get(names[8])
            if props is not None and type(props) is not str:
                b.slow.append(i)
                continue
            try:
                pb = props.encode("utf-8") if props else b""
            except UnicodeEncodeError:
                b.slow.append(i)
                continue
            pr = _Props(pb)
            pb += pr.sep
            size = FIXED + len(body) + len(tb) + len(pb) + len(cluster_prop)
            if (not pr.ok or pr.delay or pr.cluster or len(pb) + len(cluster_prop) > MAX_PROPERTIES_LEN
                    or size > max_size):
                b.slow.append(i)
                continue
            if pr.half or held:
                half = _half(pr, pb, tb, qid, half_topic, body, cluster_prop, max_size)
                if half is None:
                    b.slow.append(i)
                    continue
                htb, suffix = half
                kidx = key_index.get((half_topic, 0))  # type: ignore[arg-type]
                if kidx is None:
                    kidx = key_index[(half_topic, 0)] = len(b.keys)  # type: ignore[index]
                    b.keys.append((half_topic, 0))  # type: ignore[arg-type]
                born = born_host if born_hosts is None else born_hosts[i]
                b.add(i, _record(0, flag, sys_flag & ~_TX_MASK, born_ts, reconsume, body, htb, pb + suffix, born,
                                 store_host), kidx, pr.tags, (F_WAIT if pr.wait else 0) | (F_INDEX if pr.index else 0),
                      qid)
                b.fast.append(i)
                continue
            entries = [(flag, body, pb, pr)]
        else:
            if held:
                b.slow.append(i)
                continue
            entries = _batch_entries(body, tb, cluster_prop, max_size) if body else None
            if not entries:
                b.slow.append(i)
                continue
        # checks passed: only now does the request take a round-robin turn and a queue key
        if qid < 0:  # the broker picks (RocketMQ: at random); round robin keeps the twins comparable
            qid = b.rr % info[1] if info[1] > 0 else 0
            b.rr += 1
        kidx = key_index.get((topic, qid))
        if kidx is None:
            kidx = key_index[(topic, qid)] = len(b.keys)
            b.keys.append((topic, qid))
        born = born_host if born_hosts is None else born_hosts[i]
        for eflag, ebody, pb, pr in entries:
            b.add(i, _record(qid, eflag, sys_flag, born_ts, reconsume, ebody, tb, pb + cluster_prop, born,
                              store_host), kidx, pr.tags, (F_WAIT if pr.wait else 0) | (F_INDEX if pr.index else 0),
                   qid)
        b.fast.append(i)
    b.finish()
    return b


_REAL_NAMES = (MessageConst.REAL_TOPIC.encode() + _NAME_SEP, MessageConst.REAL_QUEUE_ID.encode() + _NAME_SEP)


def _half(pr: _Props, pb: bytes, tb: bytes, qid: int, half_topic: str | None, body: bytes, cluster_prop: bytes,
          max_size: int) -> tuple[bytes, bytes] | None:
    """A half (TRAN_MSG=true) as 4.9.8's prepareMessage stores it, when the fast path may take
    it: the half topic's name and what follows the message's properties in the record (CLUSTER,
    then REAL_TOPIC and REAL_QID, the order the processor's long way writes them); None for the
    long way. The record goes to ``half_topic`` queue 0 with its transaction bits reset to 0;
    its row keeps the requested queue, which the answer names (4.9).

    The long way takes: a prepared or rollback sysFlag without TRAN_MSG=true (refused there), a
    broker that refuses halves or has no half topic yet (``half_topic`` None), a queue the
    broker picks (qid < 0: the clients always pick one), and properties that already carry
    REAL_TOPIC or REAL_QID (the long way's map keeps one of each)."""
    if not pr.half or half_topic is None or qid < 0:
        return None
    for name in _REAL_NAMES:
        if pb.startswith(name) or _PROP_SEP + name in pb:
            return None
    suffix = b"".join((cluster_prop, _REAL_NAMES[0], tb, _PROP_SEP, _REAL_NAMES[1], b"%d" % qid, _PROP_SEP))
    htb = half_topic.encode()
    if (len(pb) + len(suffix) > MAX_PROPERTIES_LEN
            or FIXED + len(body) + len(htb) + len(pb) + len(suffix) > max_size):
        return None
    return htb, suffix


def _batch_entries(body: bytes, tb: bytes, cluster_prop: bytes, max_size: int) -> list[_Entry] | None:
    out: list[_Entry] = []
    pos, n = 0, len(body)
    while pos < n:
        if pos + BATCH_MIN_LEN > n:
            return None
        size, _magic, _crc, flag, el = _BATCH_HEAD.unpack_from(body, pos)
        if el < 0 or pos + BATCH_MIN_LEN + el > n:
            return None
        epl = struct.unpack_from(">H", body, pos + _BATCH_BODY + el)[0]
        end = pos + BATCH_MIN_LEN + el + epl
        if end > n or size != end - pos:
            return None
        pb = body[pos + BATCH_MIN_LEN + el:end]
        try:
            pb.decode("utf-8")
        except UnicodeDecodeError:
            return None
        pr = _Props(pb)
        pb += pr.sep
        if (not pr.ok or pr.delay or pr.half or pr.cluster or len(pb) + len(cluster_prop) > MAX_PROPERTIES_LEN
                or FIXED + el + len(tb) + len(pb) + len(cluster_prop) > max_size):
            return None
        out.append((flag, body[pos + _BATCH_BODY:pos + _BATCH_BODY + el], pb, pr))
        pos = end
    return out or None


def encode_answers(b: SendBatch, requests: list[Any], msg_id_prefix: bytes,
                   template: tuple[bytes, bytes, bytes, bytes, bytes], *, lo: int = 0, hi: int = -1,
                   binary_template: tuple[bytes, bytes, bytes, bytes, bytes, bytes] | None = None) -> bytes:
    """The SUCCESS response frames of every fast request that is not oneway, each in its
    request's header form (JSON, or RocketMQ's binary one from ``binary_template``); with
    ``hi`` >= 0, of requests ``lo <= i < hi`` only (one connection's share of a gathered batch).

    Raises:
        ValueError: a binary request and no ``binary_template``.
    """
    t0, t1, t2, t3, t4 = template
    if hi < 0:
        hi = len(requests)
    out: list[bytes] = []
    c = b.cols
    i = 0
    while i < b.n:
        r = int(c[i, C_REQ])
        j = i
        while j < b.n and int(c[j, C_REQ]) == r:
            j += 1
        req = requests[r]
        if not req.flag & 2 and lo <= r < hi:
            ids = b",".join(msg_id_prefix + b"%016X" % int(c[k, C_PHYS]) for k in range(i, j))
            qid, qoff = b"%d" % int(c[i, C_QID]), b"%d" % int(c[i, C_QOFF])
            if req.serialize_type == 1:
                if binary_template is None:
                    raise ValueError("a request in the binary header needs binary_template for its answer")
                h0, mid, k0, k1, k2, tail = binary_template
                ext = b"".join((k0, _U32.pack(len(ids)), ids, k1, _U32.pack(len(qid)), qid,
                                k2, _U32.pack(len(qoff)), qoff, tail))
                header = b"".join((h0, _I32.pack(req.opaque), mid, _U32.pack(len(ext)), ext))
                out.append(_U32.pack(len(header) + 4) + _U32.pack((1 << 24) | len(header)) + header)
            else:
                header = b"".join((t0, ids, t1, qid, t2, qoff, t3, b"%d" % req.opaque, t4))
                out.append(_U32.pack(len(header) + 4) + _U32.pack(len(header)) + header)
        i = j
    return b"".join(out)


def binary_answer_template(region: str, trace_on: bool) -> tuple[bytes, bytes, bytes, bytes, bytes, bytes]:
    """The constant pieces of a SUCCESS send answer in RocketMQ's binary header (the ROCKETMQ
    serialize type, which RocketMQ's own benchmark tools send), cut out of what the codec itself
    writes: before the opaque; from after it to the extFields length (flag and an empty remark);
    from there to msgId's value length (its key); then the queueId and queueOffset keys, each
    between the previous value and its own value length; and what follows queueOffset's value."""
    from .codec import RemotingCommand, encode_frame
    cmd = RemotingCommand(0, language=0, version=409, opaque=2109876543, flag=1, serialize_type=1, ext_fields={
        _MSG_ID: "\u0010M", _QUEUE_ID: "\u0010Q", _QUEUE_OFFSET: "\u0010O", MessageConst.MSG_REGION: region,
        MessageConst.TRACE_SWITCH: "true" if trace_on else "false"})
    header = encode_frame(cmd)[8:]
    head, found, rest = header.partition(_I32.pack(2109876543))
    if not found or rest[4:8] != bytes(4):  # (flag, then an empty remark)
        raise ValueError("the codec's binary response layout changed: cannot build the answer template")
    pieces = [head, rest[:8]]
    ext = rest[12:]
    for marker in (b"\x10M", b"\x10Q", b"\x10O"):
        key, found, ext = ext.partition(_U32.pack(len(marker)) + marker)
        if not found:
            raise ValueError("the codec's binary response layout changed: cannot build the answer template")
        pieces.append(key)
    pieces.append(ext)
    return pieces[0], pieces[1], pieces[2], pieces[3], pieces[4], pieces[5]


def answer_template(region: str, trace_on: bool) -> tuple[bytes, bytes, bytes, bytes, bytes]:
    """The five constant pieces of a SUCCESS send response header, cut out of what the codec
    itself writes, so the fast answers cannot drift from it: before msgId, between msgId and
    queueId, between queueId and queueOffset, between queueOffset and opaque, after opaque."""
    from .codec import RemotingCommand, encode_frame
    marks = ("\u0010M", "\u0010Q", "\u0010O")
    cmd = RemotingCommand(0, language=0, version=409, opaque=2109876543, flag=1, ext_fields={
        _MSG_ID: marks[0], _QUEUE_ID: marks[1], _QUEUE_OFFSET: marks[2], MessageConst.MSG_REGION: region,
        MessageConst.TRACE_SWITCH: "true" if trace_on else "false"})
    header = encode_frame(cmd)[8:]
    pieces = []
    for sep in (b'\\u0010M', b'\\u0010Q', b'\\u0010O', b"2109876543"):
        head, found, header = header.partition(sep)
        if not found:
            raise ValueError("the codec's response layout changed: cannot build the answer template")
        pieces.append(head)
    pieces.append(header)
    return pieces[0], pieces[1], pieces[2], pieces[3], pieces[4]
