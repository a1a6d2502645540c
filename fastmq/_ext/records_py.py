"""Plain IPv4 store-format records, a body at a time: pure-Python reference of ``records_c``.

The records of a PULL_MESSAGE answer are RocketMQ's store format (the layout is in ``send_c``'s
module doc). :func:`decode_v4` reads a body whose every record has the plain shape: v1 magic,
IPv4 born and store hosts, lengths that add up, UTF-8 topic and properties. It returns one object
per record, or ``None`` as soon as any record is not of that shape, so that the caller hands the
whole body to its reference decoder (which decodes it or raises the typed error).

``cls`` is the record class: ``cls(*values)`` takes the values in the order of :data:`FIELDS`
and only stores each under its name (a plain dataclass such as ``MessageExt``). The compiled
twin relies on that: it makes each object with ``cls.__new__(cls)`` and sets the attributes
itself, without calling ``__init__``.
Properties follow ``decode_properties``: ``name\\x01value`` pieces split on ``\\x02``, pieces
without a ``\\x01`` or with an empty name skipped, the last of a repeated name kept.
"""
from __future__ import annotations

import socket
import struct
from typing import Any

from ..protocol.message_const import NAME_VALUE_SEPARATOR, PROPERTY_SEPARATOR
from ..protocol.record_layout import HOST_V6_BITS, MESSAGE_MAGIC_CODE, MIN_RECORD_LEN_V4, fixed_format

__all__ = ["FIELDS", "decode_v4"]

#: The attribute names of a record object, in the order ``cls`` takes them.
FIELDS = ("topic", "body", "flag", "properties", "queue_id", "store_size", "queue_offset", "sys_flag",
          "born_timestamp", "born_host", "store_timestamp", "store_host", "commit_log_offset", "body_crc",
          "reconsume_times", "prepared_transaction_offset")

_MAGIC_V1 = MESSAGE_MAGIC_CODE
_V6_BITS = HOST_V6_BITS
#: TOTALSIZE .. BODYLEN of a record whose two hosts are IPv4.
_FIXED_V4 = struct.Struct(fixed_format())
_MIN_TOTAL = MIN_RECORD_LEN_V4  # empty body, topic and properties
_NAME_SEP, _PROP_SEP = NAME_VALUE_SEPARATOR, PROPERTY_SEPARATOR


class _NotPlain(Exception):
    """This body needs the reference decoder."""


def decode_v4(data: bytes, cls: Any) -> list[Any] | None:
    """One ``cls`` object per record of ``data``, or ``None`` if a record is not plain IPv4.

    Raises:
        TypeError: ``data`` is not exactly ``bytes`` (the compiled twin's argument check).
    """
    if type(data) is not bytes:
        raise TypeError(f"Argument 'data' has incorrect type (expected bytes, got {type(data).__name__})")
    try:
        return _decode(data, cls)
    except (_NotPlain, UnicodeDecodeError, struct.error, IndexError):
        return None


def _decode(data: bytes, cls: Any) -> list[Any]:
    out: list[Any] = []
    hosts: dict[tuple[bytes, int], tuple[str, int]] = {}
    unpack = _FIXED_V4.unpack_from
    fixed = _FIXED_V4.size
    pos, n = 0, len(data)
    while pos < n:
        (total, magic, crc, queue_id, flag, queue_offset, phys, sys_flag, born_ts, born_ip, born_port, store_ts,
         store_ip, store_port, reconsume, prepared, body_len) = unpack(data, pos)
        end = pos + total
        if magic != _MAGIC_V1 or sys_flag & _V6_BITS or total < _MIN_TOTAL or end > n:
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
            for item in data[p + 2:end].decode("utf-8").split(_PROP_SEP):
                k, sep, v = item.partition(_NAME_SEP)
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
        out.append(cls(topic, body, flag, props, queue_id, total, queue_offset, sys_flag, born_ts, born,
                       store_ts, store, phys, crc, reconsume, prepared))
        pos = end
    return out
