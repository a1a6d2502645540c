"""Messages as RocketMQ stores and ships them: properties, tag codes, ids and the store format.

The stored record's layout is declared in :mod:`fastmq.protocol.record_layout` and the property
names and separators in :mod:`fastmq.protocol.message_const` (re-exported here); this module
encodes and decodes records with them. A PULL_MESSAGE response body is such records
concatenated, sliced straight out of the commit log, so the same bytes serve the disk, the wire
and recovery. The fields the store fills in at append time (queue offset, physical offset, store
timestamp) sit at fixed positions (:data:`QUEUE_OFFSET_POS`, :data:`PHYS_OFFSET_POS`,
:func:`store_timestamp_pos`) so the commit log can patch them into an already encoded record
instead of encoding it again.
"""
from __future__ import annotations

import ipaddress
import struct
import time
import zlib
from dataclasses import dataclass, field
from typing import Iterable, Iterator, Mapping

from .._ext.batch import encode_batch_body as _encode_batch_body
from ..errors import FastMQError, TimerMessageError
from .java_number import parse_int
from .message_const import NAME_VALUE_SEPARATOR, PROPERTY_SEPARATOR, CompressedBody, MessageConst, MessageSysFlag
from .record_layout import (BATCH_HEAD_FORMAT, BLANK_MAGIC_CODE, BORN_HOST_POS, HEAD_FORMAT, IPV4_HOST_LEN, IPV6_HOST_LEN,
                            MAX_PROPERTIES_LEN, MAX_TOPIC_LEN, MESSAGE_MAGIC_CODE, PHYS_OFFSET_POS, QUEUE_OFFSET_POS,
                            host_len, record_length, store_timestamp_pos)

__all__ = [
    "MessageFormatError", "MessageConst", "MessageSysFlag",
    "MAGIC_V1", "BLANK_MAGIC", "QUEUE_OFFSET_POS", "PHYS_OFFSET_POS",
    "Message", "MessageExt", "CompressedBody",
    "encode_properties", "decode_properties", "java_string_hash", "tags_code",
    "create_offset_msg_id", "decode_offset_msg_id", "body_crc",
    "record_length", "store_timestamp_pos", "encode_record", "decode_record",
    "decode_records", "iter_records", "pack_host", "encode_batch_body", "decode_batch_body",
    "MAX_INFLATED_BODY", "inflate_body", "TIMER_MAX_DELAY_MS",
]


class MessageFormatError(FastMQError, ValueError):
    """Bytes that are not a valid stored message (bad magic, CRC, lengths, truncated),
    or a message id / property string that cannot be decoded."""


#: What a compressed body (SYSFLAG COMPRESSED) may inflate to in a client: four times the largest
#: body a producer sends by default (4 MiB). A few KiB of zeros inflate to gigabytes; past this
#: the message is delivered as it came, with a warning.
MAX_INFLATED_BODY = 16 * 1024 * 1024


def inflate_body(body: bytes, limit: int = MAX_INFLATED_BODY) -> bytes:
    """``body`` inflated (zlib); ValueError when it inflates past ``limit`` bytes, zlib.error when
    it does not inflate."""
    d = zlib.decompressobj()
    out = d.decompress(body, limit + 1)
    if len(out) > limit:
        raise ValueError(f"inflates past {limit} bytes")
    if not d.eof:
        raise zlib.error("incomplete or truncated stream")
    return out


MAGIC_V1 = MESSAGE_MAGIC_CODE
"""Magic code of a v1 stored message (RocketMQ 4.x, ``MESSAGE_MAGIC_CODE``)."""
BLANK_MAGIC = BLANK_MAGIC_CODE
"""Magic code of the end-of-file filler written when the next message does not fit."""

_HOST_LENS = (IPV4_HOST_LEN, IPV6_HOST_LEN)
_NAME_SEP = NAME_VALUE_SEPARATOR
_PROP_SEP = PROPERTY_SEPARATOR

_HEAD = struct.Struct(HEAD_FORMAT)  # TOTALSIZE .. BORNTIMESTAMP
_I32 = struct.Struct(">i")
_I64 = struct.Struct(">q")
_U32 = struct.Struct(">I")
_H16 = struct.Struct(">H")


# --------------------------------------------------------------------------- properties

def encode_properties(props: Mapping[str, str]) -> bytes:
    """``k\\x01v\\x02`` repeated, UTF-8, as ``MessageDecoder.messageProperties2String``.

    Raises:
        MessageFormatError: a name or value contains one of the two separators (it would
            silently corrupt every property after it on the reader's side).
    """
    if not props:
        return b""
    parts = []
    for k, v in props.items():
        v = str(v)
        if _NAME_SEP in k or _PROP_SEP in k or _NAME_SEP in v or _PROP_SEP in v:
            raise MessageFormatError(f"property {k!r} contains a reserved separator (\\x01 or \\x02)")
        parts.append(f"{k}{_NAME_SEP}{v}{_PROP_SEP}")
    return "".join(parts).encode("utf-8")


def decode_properties(data: bytes | bytearray | memoryview | str) -> dict[str, str]:
    """Parse a properties string; pieces without a ``\\x01`` are skipped, as RocketMQ does.

    Raises:
        MessageFormatError: the bytes are not UTF-8.
    """
    if not isinstance(data, str):
        try:
            data = bytes(data).decode("utf-8")
        except UnicodeDecodeError as exc:
            raise MessageFormatError(f"properties are not UTF-8: {exc}") from None
    out: dict[str, str] = {}
    for item in data.split(_PROP_SEP):
        k, sep, v = item.partition(_NAME_SEP)
        if sep and k:
            out[k] = v
    return out


# --------------------------------------------------------------------------- tag code

def java_string_hash(s: str) -> int:
    """Java's ``String.hashCode()``: ``h = 31*h + c`` over UTF-16 code units, signed int32.

    Clients send these values as a subscription's ``codeSet``; the broker matches them against
    the consume-queue tag code, so they must be bit-exact (astral characters count as two
    surrogate code units, exactly as in Java).
    """
    if not s:
        return 0
    if s.isascii():
        units: bytes | tuple[int, ...] = s.encode("ascii")
    else:
        raw = s.encode("utf-16-be", "surrogatepass")
        units = struct.unpack(f">{len(raw) // 2}H", raw)
    h = 0
    for c in units:
        h = (31 * h + c) & 0xFFFFFFFF
    return h - 0x100000000 if h & 0x80000000 else h


def tags_code(tags: str | None) -> int:
    """The consume-queue tag code of a message's TAGS (0 when it has none), widened to int64."""
    return java_string_hash(tags) if tags else 0


# --------------------------------------------------------------------------- hosts and ids

def pack_host(host: str, port: int) -> bytes:
    """IP bytes (4 or 16) followed by the int32 port, as in the stored record and message ids.

    Raises:
        MessageFormatError: ``host`` is not an IP literal or ``port`` is out of range.
    """
    try:
        ip = ipaddress.ip_address(host)
    except ValueError:
        raise MessageFormatError(f"not an IP address: {host!r}") from None
    if not 0 <= port <= 0x7FFFFFFF:
        raise MessageFormatError(f"port out of range: {port}")
    return ip.packed + _I32.pack(port)


def _unpack_host(raw: bytes) -> tuple[str, int]:
    return str(ipaddress.ip_address(raw[:-4])), _I32.unpack(raw[-4:])[0]


def create_offset_msg_id(host: str, port: int, commit_log_offset: int) -> str:
    """RocketMQ's offset message id: uppercase hex of IP + int32 port + int64 offset
    (32 characters for IPv4, 56 for IPv6)."""
    return (pack_host(host, port) + _I64.pack(commit_log_offset)).hex().upper()


def decode_offset_msg_id(msg_id: str) -> tuple[str, int, int]:
    """``(ip, port, commit_log_offset)`` of an offset message id.

    Raises:
        MessageFormatError: not 32 or 56 hex characters.
    """
    if len(msg_id) not in (32, 56):
        raise MessageFormatError(f"offset message id must be 32 or 56 hex chars, got {len(msg_id)}")
    try:
        raw = bytes.fromhex(msg_id)
    except ValueError:
        raise MessageFormatError(f"offset message id is not hex: {msg_id!r}") from None
    ip, port = _unpack_host(raw[:-8])
    return ip, port, _I64.unpack(raw[-8:])[0]


def body_crc(body: bytes | bytearray | memoryview) -> int:
    """BODYCRC as RocketMQ stores it: CRC-32 of the body, top bit cleared."""
    return zlib.crc32(body) & 0x7FFFFFFF


# --------------------------------------------------------------------------- dataclasses

#: The farthest ahead a timer message may be set by default (RocketMQ 5's timerMaxDelaySec, 3 days);
#: a broker configured otherwise answers MESSAGE_ILLEGAL beyond its own limit.
TIMER_MAX_DELAY_MS = 3 * 86_400_000
_TIMER_SENDER_KEYS = (MessageConst.TIMER_DELIVER_MS, MessageConst.TIMER_DELAY_SEC, MessageConst.TIMER_DELAY_MS)


@dataclass(init=False)
class Message:
    """What a producer sends: topic, body, flag and string properties.

    ``deliver_time_ms`` (epoch milliseconds) or ``delay_time_ms`` make it a timer message
    (RocketMQ 5's ``TIMER_DELIVER_MS`` / ``TIMER_DELAY_MS``): the broker holds it until then.

    Raises:
        TimerMessageError: both given, a time not in the future, or more than 3 days ahead.
    """

    topic: str
    body: bytes = b""
    flag: int = 0
    properties: dict[str, str] = field(default_factory=dict)

    def __init__(self, topic: str, body: bytes = b"", flag: int = 0, properties: dict[str, str] | None = None,
                 *, deliver_time_ms: int | None = None, delay_time_ms: int | None = None) -> None:
        self.topic = topic
        self.body = body
        self.flag = flag
        self.properties = {} if properties is None else properties
        if deliver_time_ms is not None or delay_time_ms is not None:
            if deliver_time_ms is not None and delay_time_ms is not None:
                raise TimerMessageError("give deliver_time_ms or delay_time_ms, not both")
            if deliver_time_ms is not None:
                self.deliver_time_ms = deliver_time_ms
            else:
                self.delay_time_ms = delay_time_ms

    @property
    def deliver_time_ms(self) -> int | None:
        """When a timer message is due (epoch ms, ``TIMER_DELIVER_MS``); None when not set.

        Setting it drops a delay set before; None clears it.

        Raises:
            TimerMessageError: not an int, not in the future, or more than 3 days ahead.
        """
        return self._get_timer(MessageConst.TIMER_DELIVER_MS)

    @deliver_time_ms.setter
    def deliver_time_ms(self, value: int | None) -> None:
        self._set_timer(MessageConst.TIMER_DELIVER_MS, "deliver_time_ms", value, int(time.time() * 1000))

    @property
    def delay_time_ms(self) -> int | None:
        """How long after it reaches the broker a timer message is due (``TIMER_DELAY_MS``);
        None when not set. Setting it drops a deliver time set before; None clears it.

        Raises:
            TimerMessageError: not an int, not above 0, or more than 3 days.
        """
        return self._get_timer(MessageConst.TIMER_DELAY_MS)

    @delay_time_ms.setter
    def delay_time_ms(self, value: int | None) -> None:
        self._set_timer(MessageConst.TIMER_DELAY_MS, "delay_time_ms", value, 0)

    def _get_timer(self, key: str) -> int | None:
        v = self.properties.get(key)
        return int(v) if v is not None and v.lstrip("-").isdigit() else None

    def _set_timer(self, key: str, name: str, value: int | None, now: int) -> None:
        """``key`` = ``value``, which must be above ``now`` by at most TIMER_MAX_DELAY_MS; the other
        timer properties dropped (one at a time: the broker's precedence would otherwise pick for
        the caller). None clears ``key``."""
        if value is None:
            self.properties.pop(key, None)
            return
        if type(value) is not int:  # bool is an int too, and never a time
            raise TimerMessageError(f"{name} must be an int of milliseconds, not {type(value).__name__}")
        ahead = value - now
        if ahead <= 0:
            raise TimerMessageError(f"{name} {value} is not in the future ({-ahead} ms ago)" if now
                                    else f"{name} must be above 0, not {value}")
        if ahead > TIMER_MAX_DELAY_MS:
            raise TimerMessageError(f"{name} {value} is {ahead} ms ahead, beyond the {TIMER_MAX_DELAY_MS} ms a "
                                    "broker holds a timer message by default")
        for k in _TIMER_SENDER_KEYS:
            self.properties.pop(k, None)
        self.properties[key] = str(value)

    def set_deliver_time_ms(self, value: int) -> None:
        """RocketMQ 5's ``setDeliverTimeMs``: :attr:`deliver_time_ms`."""
        self.deliver_time_ms = value

    def set_delay_time_ms(self, value: int) -> None:
        """RocketMQ 5's ``setDelayTimeMs``: :attr:`delay_time_ms`."""
        self.delay_time_ms = value

    @property
    def tags(self) -> str | None:
        return self.properties.get(MessageConst.TAGS)

    @tags.setter
    def tags(self, value: str | None) -> None:
        if value is None:
            self.properties.pop(MessageConst.TAGS, None)
        else:
            self.properties[MessageConst.TAGS] = value

    @property
    def keys(self) -> list[str]:
        raw = self.properties.get(MessageConst.KEYS, "")
        return [k for k in raw.split(MessageConst.KEY_SEPARATOR) if k]

    @keys.setter
    def keys(self, value: list[str] | str) -> None:
        self.properties[MessageConst.KEYS] = (
            value if isinstance(value, str) else MessageConst.KEY_SEPARATOR.join(value))

    @property
    def delay_time_level(self) -> int:
        """Message.getDelayTimeLevel(): 0 when unset, else ``Integer.parseInt`` of the property.

        Raises:
            JavaNumberFormatError: the property is not a Java int (as Java throws).
        """
        t = self.properties.get(MessageConst.DELAY_TIME_LEVEL)
        return 0 if not t else parse_int(t)


@dataclass
class MessageExt(Message):
    """A message as stored: everything in the record plus where it lives."""

    queue_id: int = 0
    store_size: int = 0
    queue_offset: int = 0
    sys_flag: int = 0
    born_timestamp: int = 0
    born_host: tuple[str, int] = ("127.0.0.1", 0)
    store_timestamp: int = 0
    store_host: tuple[str, int] = ("127.0.0.1", 0)
    commit_log_offset: int = 0
    body_crc: int = 0
    reconsume_times: int = 0
    prepared_transaction_offset: int = 0

    @property
    def msg_id(self) -> str:
        """The offset message id of this record."""
        return create_offset_msg_id(self.store_host[0], self.store_host[1], self.commit_log_offset)


# --------------------------------------------------------------------------- store format

def encode_record(
    *,
    topic: str | bytes,
    body: bytes | bytearray | memoryview,
    properties: Mapping[str, str] | bytes = b"",
    queue_id: int = 0,
    flag: int = 0,
    queue_offset: int = 0,
    phys_offset: int = 0,
    sys_flag: int = 0,
    born_timestamp: int = 0,
    born_host: tuple[str, int] | bytes = ("127.0.0.1", 0),
    store_timestamp: int = 0,
    store_host: tuple[str, int] | bytes = ("127.0.0.1", 0),
    reconsume_times: int = 0,
    prepared_transaction_offset: int = 0,
    crc: int | None = None,
) -> bytearray:
    """One stored record. Hosts may be given pre-packed (:func:`pack_host`) so a hot path
    packs its own store host once; the v6 sysflag bits are set from the host widths.

    Raises:
        MessageFormatError: topic over 127 bytes, properties over 32767 bytes, bad host.
    """
    tb = topic.encode("utf-8") if isinstance(topic, str) else topic
    pb = properties if isinstance(properties, (bytes, bytearray)) else encode_properties(properties)
    bh = born_host if isinstance(born_host, (bytes, bytearray)) else pack_host(*born_host)
    sh = store_host if isinstance(store_host, (bytes, bytearray)) else pack_host(*store_host)
    if len(tb) > MAX_TOPIC_LEN:
        raise MessageFormatError(f"topic is {len(tb)} bytes, the store format allows {MAX_TOPIC_LEN}")
    if len(pb) > MAX_PROPERTIES_LEN:
        raise MessageFormatError(f"properties are {len(pb)} bytes, the store format allows 32767")
    if len(bh) not in _HOST_LENS or len(sh) not in _HOST_LENS:
        raise MessageFormatError("a packed host must be 8 (IPv4) or 20 (IPv6) bytes")
    sys_flag &= ~(MessageSysFlag.BORNHOST_V6 | MessageSysFlag.STOREHOST_V6)
    if len(bh) == IPV6_HOST_LEN:
        sys_flag |= MessageSysFlag.BORNHOST_V6
    if len(sh) == IPV6_HOST_LEN:
        sys_flag |= MessageSysFlag.STOREHOST_V6
    total = record_length(sys_flag, len(body), len(tb), len(pb))
    # join() of pre-packed pieces is ~2x faster in CPython than pack_into at running offsets.
    out = bytearray(b"".join((
        _HEAD.pack(total, MAGIC_V1, body_crc(body) if crc is None else crc, queue_id, flag,
                   queue_offset, phys_offset, sys_flag, born_timestamp),
        bh, _I64.pack(store_timestamp), sh,
        _I32.pack(reconsume_times), _I64.pack(prepared_transaction_offset),
        _I32.pack(len(body)), body, bytes((len(tb),)), tb, _H16.pack(len(pb)), pb,
    )))
    assert len(out) == total
    return out


def decode_record(buf: bytes | bytearray | memoryview, pos: int = 0, *, verify_crc: bool = True,
                  with_body: bool = True) -> MessageExt:
    """Decode the record starting at ``buf[pos]``.

    Raises:
        MessageFormatError: truncated record, wrong magic (the blank end-of-file marker
            included), inconsistent lengths, or (with ``verify_crc``) a body CRC mismatch.
    """
    mv = memoryview(buf)
    n = len(mv)
    if pos + _HEAD.size > n:
        raise MessageFormatError(f"truncated record header at {pos}: {n - pos} bytes left")
    (total, magic, crc, queue_id, flag, queue_offset, phys_offset, sys_flag,
     born_ts) = _HEAD.unpack_from(mv, pos)
    if magic != MAGIC_V1:
        what = "blank end-of-file marker" if magic == BLANK_MAGIC else f"magic 0x{magic:08X}"
        raise MessageFormatError(f"not a v1 message at {pos}: {what}")
    if total < record_length(sys_flag, 0, 0, 0) or pos + total > n:
        raise MessageFormatError(f"bad total size {total} at {pos} ({n - pos} bytes left)")
    end = pos + total
    p = BORN_HOST_POS
    bhl = host_len(sys_flag, MessageSysFlag.BORNHOST_V6)
    born_host = _unpack_host(bytes(mv[pos + p:pos + p + bhl]))
    p += bhl
    store_ts = _I64.unpack_from(mv, pos + p)[0]
    p += 8
    shl = host_len(sys_flag, MessageSysFlag.STOREHOST_V6)
    store_host = _unpack_host(bytes(mv[pos + p:pos + p + shl]))
    p += shl
    reconsume = _I32.unpack_from(mv, pos + p)[0]
    prepared = _I64.unpack_from(mv, pos + p + 4)[0]
    p = pos + p + 12
    body_len = _I32.unpack_from(mv, p)[0]
    p += 4
    if body_len < 0 or p + body_len + 3 > end:
        raise MessageFormatError(f"bad body length {body_len} in record at {pos}")
    body_mv = mv[p:p + body_len]
    if verify_crc and body_crc(body_mv) != crc:
        raise MessageFormatError(f"body CRC mismatch in record at {pos}")
    p += body_len
    topic_len = mv[p]
    p += 1
    if p + topic_len + 2 > end:
        raise MessageFormatError(f"bad topic length {topic_len} in record at {pos}")
    try:
        topic = bytes(mv[p:p + topic_len]).decode("utf-8")
    except UnicodeDecodeError:
        raise MessageFormatError(f"topic is not UTF-8 in record at {pos}") from None
    p += topic_len
    props_len = _H16.unpack_from(mv, p)[0]
    p += 2
    if p + props_len != end:
        raise MessageFormatError(f"properties length {props_len} disagrees with total size at {pos}")
    props = decode_properties(mv[p:p + props_len])
    return MessageExt(
        topic=topic, body=bytes(body_mv) if with_body else b"", flag=flag, properties=props,
        queue_id=queue_id, store_size=total, queue_offset=queue_offset, sys_flag=sys_flag,
        born_timestamp=born_ts, born_host=born_host, store_timestamp=store_ts,
        store_host=store_host, commit_log_offset=phys_offset, body_crc=crc,
        reconsume_times=reconsume, prepared_transaction_offset=prepared)


def iter_records(buf: bytes | bytearray | memoryview, *, verify_crc: bool = True,
                 with_body: bool = True) -> Iterator[MessageExt]:
    """Yield every record of a buffer of concatenated records (a PULL body).

    Raises:
        MessageFormatError: at the first bad record (the ones before it were yielded).
    """
    mv = memoryview(buf)
    pos, n = 0, len(mv)
    while pos < n:
        msg = decode_record(mv, pos, verify_crc=verify_crc, with_body=with_body)
        yield msg
        pos += msg.store_size


def decode_records(buf: bytes | bytearray | memoryview, *, verify_crc: bool = True,
                   with_body: bool = True) -> list[MessageExt]:
    """All records of a buffer of concatenated records (see :func:`iter_records`)."""
    return list(iter_records(buf, verify_crc=verify_crc, with_body=with_body))


# --------------------------------------------------------------------------- batch bodies

_BATCH_HEAD = struct.Struct(BATCH_HEAD_FORMAT)  # TOTALSIZE, MAGIC (0), BODYCRC (0), FLAG, bodyLen


def encode_batch_body(messages: Iterable[Message]) -> bytes:
    """A SEND_BATCH_MESSAGE body (``MessageDecoder.encodeMessages``): per message
    int32 size, int32 0, int32 0, int32 flag, int32 bodyLen + body, int16 propsLen + props.
    The compiled encoder in ``fastmq._ext.batch`` writes it in one call.

    Raises:
        MessageFormatError: a separator in a property, properties over 32767 bytes, a flag
            outside int32.
    """
    try:
        return _encode_batch_body(messages)
    except ValueError as exc:
        raise MessageFormatError(str(exc)) from None


def decode_batch_body(buf: bytes | bytearray | memoryview, topic: str = "") -> list[Message]:
    """The messages of a SEND_BATCH_MESSAGE body; each gets ``topic``.

    Raises:
        MessageFormatError: a size that disagrees with its parts or runs past the body.
    """
    mv = memoryview(buf)
    n = len(mv)
    pos = 0
    out: list[Message] = []
    while pos < n:
        if pos + _BATCH_HEAD.size + 2 > n:
            raise MessageFormatError(f"truncated batch message at {pos}")
        size, _magic, _crc, flag, body_len = _BATCH_HEAD.unpack_from(mv, pos)
        p = pos + _BATCH_HEAD.size
        if body_len < 0 or p + body_len + 2 > n:
            raise MessageFormatError(f"bad body length {body_len} in batch message at {pos}")
        body = bytes(mv[p:p + body_len])
        p += body_len
        props_len = _H16.unpack_from(mv, p)[0]
        p += 2
        if p + props_len > n or size != p + props_len - pos:
            raise MessageFormatError(f"batch message at {pos}: size {size} disagrees with its fields")
        out.append(Message(topic=topic, body=body, flag=flag,
                           properties=decode_properties(mv[p:p + props_len])))
        pos = p + props_len
    return out
