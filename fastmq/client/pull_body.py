"""The records of a PULL_MESSAGE answer, decoded a body at a time.

``protocol.message.decode_records`` is the reference decoder (every record shape, every check,
one ``MessageExt`` per call of a general routine). Nearly every body a consumer sees holds IPv4
records only, so this reads each of those with one ``struct`` call for the 88 fixed bytes and
turns the repeated host fields into strings once per body. Anything else (an IPv6 host, a length
that does not add up, bad UTF-8, a wrong magic) sends the whole body to ``decode_records``, which
decodes it or raises its typed error: the results are the same either way
(tests/test_pull_body.py holds the two equal).
"""
from __future__ import annotations

import socket
import struct

from ..protocol.message import MAGIC_V1, MessageExt, MessageSysFlag, decode_records

__all__ = ["decode_pull_body"]

#: TOTALSIZE .. BODYLEN of a record whose two hosts are IPv4 (RocketMQ's v1 store format).
_FIXED_V4 = struct.Struct(">iIiiiqqiq4siq4siiqi")
_V6_BITS = MessageSysFlag.BORNHOST_V6 | MessageSysFlag.STOREHOST_V6
_MIN_TOTAL = _FIXED_V4.size + 1 + 2  # empty body, topic and properties


class _NotPlain(Exception):
    """This body needs the reference decoder."""


def decode_pull_body(buf: bytes | bytearray | memoryview) -> list[MessageExt]:
    """Every record of a pull body, as ``decode_records(buf, verify_crc=False)`` returns them.

    Raises:
        MessageFormatError: as ``decode_records`` does, for a body it rejects.
    """
    data = buf if isinstance(buf, bytes) else bytes(buf)
    try:
        return _decode_v4(data)
    except (_NotPlain, UnicodeDecodeError, struct.error, IndexError):
        return decode_records(data, verify_crc=False)


def _decode_v4(data: bytes) -> list[MessageExt]:
    out: list[MessageExt] = []
    hosts: dict[tuple[bytes, int], tuple[str, int]] = {}
    unpack = _FIXED_V4.unpack_from
    fixed = _FIXED_V4.size
    pos, n = 0, len(data)
    while pos < n:
        (total, magic, crc, queue_id, flag, queue_offset, phys, sys_flag, born_ts, born_ip, born_port, store_ts,
         store_ip, store_port, reconsume, prepared, body_len) = unpack(data, pos)
        end = pos + total
        if magic != MAGIC_V1 or sys_flag & _V6_BITS or total < _MIN_TOTAL or end > n:
            raise _NotPlain
        p = pos + fixed
        if body_len < 0 or p + body_len + 3 > end:
            raise _NotPlain
        body = data[p:p + body_len]
        p += body_len
        topic_len = data[p]
        p += 1
        if p + topic_len + 2 > end:
            raise _NotPlain
        topic = data[p:p + topic_len].decode("utf-8")
        p += topic_len
        if p + 2 + ((data[p] << 8) | data[p + 1]) != end:
            raise _NotPlain
        props: dict[str, str] = {}
        if end > p + 2:
            for item in data[p + 2:end].decode("utf-8").split("\x02"):
                k, sep, v = item.partition("\x01")
                if sep and k:
                    props[k] = v
        key = (born_ip, born_port)
        born = hosts.get(key)
        if born is None:
            born = hosts[key] = (socket.inet_ntoa(born_ip), born_port)
        key = (store_ip, store_port)
        store = hosts.get(key)
        if store is None:
            store = hosts[key] = (socket.inet_ntoa(store_ip), store_port)
        out.append(MessageExt(topic, body, flag, props, queue_id, total, queue_offset, sys_flag, born_ts, born,
                              store_ts, store, phys, crc, reconsume, prepared))
        pos = end
    return out
