"""A trace dispatcher's Pub records made from its flat rows: the pure-Python reference of
``trace_encode_c``.

A row is an answered send's fields, ``PUB_ROW`` of them laid end to end in one list
(``fastmq.client.trace_data.pub_row``): begin ms, end ms, topic, msgId, tags, keys, broker name,
body length, message type ordinal, offsetMsgId, send status, region. A record is RocketMQ
4.9.8's ``Pub`` text (TraceDataEncoder): its fields joined by ``\\x01``, ended by ``\\x02``;
its keys are the msgId and the message's keys (split on spaces), what a broker indexes it by.
"""
from __future__ import annotations

from typing import Any, Callable, Sequence

from ..protocol.message_const import NAME_VALUE_SEPARATOR, PROPERTY_SEPARATOR, MessageConst

__all__ = ["encode_pub_rows", "PUB_ROW"]

#: fields of one answered send in a row
PUB_ROW = 12
_TYPE_TEXT = {0: "0", 1: "1", 2: "2", 3: "3"}  # MessageType's ordinals


def encode_pub_rows(rows: Sequence[Any], trace_topic: str, group: str,
                    store_host: Callable[[str], str | None]) -> list[tuple[str, list[str]]]:
    """The Pub records of ``rows`` and each record's keys; sends to the trace topic itself are
    left out. ``store_host(broker name)``: the broker's address (``null`` when None), asked once
    per broker name."""
    out: list[tuple[str, list[str]]] = []
    join, end, sep = NAME_VALUE_SEPARATOR.join, PROPERTY_SEPARATOR, MessageConst.KEY_SEPARATOR
    hosts: dict[str, str] = {}
    for i in range(0, len(rows) - PUB_ROW + 1, PUB_ROW):
        (begin, end_ms, topic, msg_id, tags, keys, broker, length, mtype, offset_id, status,
         region) = rows[i:i + PUB_ROW]
        if topic.startswith(trace_topic):
            continue
        host = hosts.get(broker)
        if host is None:
            addr = store_host(broker)
            host = hosts[broker] = "null" if addr is None else str(addr)
        data = join(("Pub", str(begin), region, group, topic, msg_id, "null" if tags is None else tags,
                     "null" if keys is None else keys, host, str(length), str(end_ms - begin), _TYPE_TEXT[mtype],
                     "null" if offset_id is None else str(offset_id), "true" if status == "SEND_OK" else "false")) + end
        out.append((data, [msg_id, *(k for k in keys.split(sep) if k)] if keys else [msg_id]))
    return out
