"""The commit-log record layout (RocketMQ 4.x store format v1), declared once.

A stored message (``CommitLog``/``MessageDecoder``) is, big-endian, the fields of :data:`FIELDS`
in order, then ``body``, ``int8 topicLen + topic``, ``int16 propertiesLen + properties``. A host is
its IP (4 bytes, or 16 when the SYSFLAG bit ``BORNHOST_V6``/``STOREHOST_V6`` is set) and an int32
port. A PULL_MESSAGE body is such records back to back, sliced out of the commit log, so the same
bytes serve the disk, the wire and recovery; the end of a commit-log file that the next record
does not fit is filled by ``int32 size | int32 BLANK_MAGIC_CODE``.

Everything else is derived from :data:`FIELDS`: the ``struct`` formats and byte positions the
pure codecs use, and the constants the compiled twins cimport from the generated
``fastmq/_ext/wire_facts.pxd`` (``fastmq/protocol/wire_pxd.py`` writes it). This module imports
only ``message_const``, so every floor reads it.
"""
from __future__ import annotations

from .message_const import MessageSysFlag

__all__ = [
    "MESSAGE_MAGIC_CODE", "BLANK_MAGIC_CODE", "FIELDS", "IPV4_HOST_LEN", "IPV6_HOST_LEN", "HOST_V6_BITS",
    "MAX_TOPIC_LEN", "MAX_PROPERTIES_LEN", "END_FILE_MIN_BLANK_LENGTH", "fixed_format", "positions",
    "record_length", "store_timestamp_pos", "host_len", "POS_V4", "FIXED_LEN_V4", "MIN_RECORD_LEN_V4",
    "HEAD_FORMAT", "QUEUE_OFFSET_POS", "PHYS_OFFSET_POS", "SYSFLAG_POS", "BORN_TIMESTAMP_POS", "BORN_HOST_POS",
    "BATCH_FIELDS", "BATCH_HEAD_FORMAT", "BATCH_POS", "BATCH_MIN_LEN",
]

#: MAGICCODE of a v1 stored message (``MESSAGE_MAGIC_CODE``), as an unsigned 32-bit value.
MESSAGE_MAGIC_CODE = 0xDAA320A7
#: MAGICCODE of the end-of-file filler (``BLANK_MAGIC_CODE``).
BLANK_MAGIC_CODE = 0xCBD43194
#: The filler's size: int32 TOTALSIZE + int32 MAGICCODE.
END_FILE_MIN_BLANK_LENGTH = 8

#: The fixed part of a record, in order: (name, ``struct`` code); ``None`` is a host.
FIELDS: tuple[tuple[str, str | None], ...] = (
    ("TOTALSIZE", "i"), ("MAGICCODE", "I"), ("BODYCRC", "i"), ("QUEUEID", "i"), ("FLAG", "i"),
    ("QUEUEOFFSET", "q"), ("PHYSICALOFFSET", "q"), ("SYSFLAG", "i"), ("BORNTIMESTAMP", "q"),
    ("BORNHOST", None), ("STORETIMESTAMP", "q"), ("STOREHOST", None), ("RECONSUMETIMES", "i"),
    ("PREPARED_TRANSACTION_OFFSET", "q"), ("BODYLEN", "i"),
)
IPV4_HOST_LEN = 4 + 4
IPV6_HOST_LEN = 16 + 4
#: The SYSFLAG bits that widen a host to IPv6.
HOST_V6_BITS = MessageSysFlag.BORNHOST_V6 | MessageSysFlag.STOREHOST_V6
#: topicLen is one byte, of which RocketMQ allows the positive half.
MAX_TOPIC_LEN = 127
#: propertiesLen is a Java short.
MAX_PROPERTIES_LEN = 0x7FFF

_SIZES = {"i": 4, "I": 4, "q": 8}


def _host_v6(name: str, born_v6: bool, store_v6: bool) -> bool:
    return born_v6 if name == "BORNHOST" else store_v6


def fixed_format(born_v6: bool = False, store_v6: bool = False, upto: str | None = None) -> str:
    """The big-endian ``struct`` format of the fixed part (up to, not including, field ``upto``);
    a host is its IP as bytes and its port."""
    out = [">"]
    for name, code in FIELDS:
        if name == upto:
            break
        out.append(("16si" if _host_v6(name, born_v6, store_v6) else "4si") if code is None else code)
    return "".join(out)


def positions(born_v6: bool = False, store_v6: bool = False) -> dict[str, int]:
    """Each field's byte position in a record, plus ``BODY`` (where the body starts)."""
    out: dict[str, int] = {}
    pos = 0
    for name, code in FIELDS:
        out[name] = pos
        pos += (IPV6_HOST_LEN if _host_v6(name, born_v6, store_v6) else IPV4_HOST_LEN) if code is None \
            else _SIZES[code]
    out["BODY"] = pos
    return out


#: Field positions when both hosts are IPv4 (the compiled fast paths take only those).
POS_V4: dict[str, int] = positions()
#: The fixed part with IPv4 hosts: TOTALSIZE .. BODYLEN.
FIXED_LEN_V4 = POS_V4["BODY"]
#: A record with IPv4 hosts and empty body, topic and properties.
MIN_RECORD_LEN_V4 = FIXED_LEN_V4 + 1 + 2
#: TOTALSIZE .. BORNTIMESTAMP: the part before the first host, the same for every record.
HEAD_FORMAT = fixed_format(upto="BORNHOST")
QUEUE_OFFSET_POS = POS_V4["QUEUEOFFSET"]
PHYS_OFFSET_POS = POS_V4["PHYSICALOFFSET"]
SYSFLAG_POS = POS_V4["SYSFLAG"]
BORN_TIMESTAMP_POS = POS_V4["BORNTIMESTAMP"]
BORN_HOST_POS = POS_V4["BORNHOST"]


def host_len(sys_flag: int, v6_bit: int) -> int:
    """The width of the host whose IPv6 bit is ``v6_bit``."""
    return IPV6_HOST_LEN if sys_flag & v6_bit else IPV4_HOST_LEN


def record_length(sys_flag: int, body_len: int, topic_len: int, props_len: int) -> int:
    """TOTALSIZE of a record (``CommitLog.calMsgLength``)."""
    return (FIXED_LEN_V4 + host_len(sys_flag, MessageSysFlag.BORNHOST_V6) - IPV4_HOST_LEN
            + host_len(sys_flag, MessageSysFlag.STOREHOST_V6) - IPV4_HOST_LEN
            + body_len + 1 + topic_len + 2 + props_len)


def store_timestamp_pos(sys_flag: int) -> int:
    """Byte position of STORETIMESTAMP in a record (it follows the born host, whose width varies)."""
    return BORN_HOST_POS + host_len(sys_flag, MessageSysFlag.BORNHOST_V6)


#: One message of a SEND_BATCH_MESSAGE body (``MessageDecoder.encodeMessages``), in order, then
#: the body and ``int16 propertiesLen + properties``; MAGICCODE and BODYCRC are written as 0.
BATCH_FIELDS: tuple[tuple[str, str], ...] = (
    ("TOTALSIZE", "i"), ("MAGICCODE", "i"), ("BODYCRC", "i"), ("FLAG", "i"), ("BODYLEN", "i"))
BATCH_HEAD_FORMAT = ">" + "".join(code for _name, code in BATCH_FIELDS)


def _batch_positions() -> dict[str, int]:
    out: dict[str, int] = {}
    pos = 0
    for name, code in BATCH_FIELDS:
        out[name] = pos
        pos += _SIZES[code]
    out["BODY"] = pos
    return out


#: Each batch field's byte position in an entry, plus ``BODY``.
BATCH_POS = _batch_positions()
#: An entry with an empty body and no properties.
BATCH_MIN_LEN = BATCH_POS["BODY"] + 2
