"""SEND_BATCH_MESSAGE bodies, pure-Python reference of ``batch_c``.

A batch body is RocketMQ's ``MessageDecoder.encodeMessages``: per message ::

    int32 totalSize | int32 magic (0) | int32 bodyCRC (0) | int32 flag | int32 bodyLen | body
    | int16 propertiesLen | properties ("name\\x01value\\x02" per property, UTF-8)

Both twins take any objects with ``body`` (bytes-like), ``flag`` (int) and ``properties`` (a
mapping; values are turned into ``str``) and raise ``ValueError`` for what cannot be encoded: a
separator inside a property name or value (it would corrupt every property after it on the
reader's side), properties over 32767 bytes, a flag outside int32.
"""
from __future__ import annotations

import struct
from typing import Any, Iterable

from ..protocol.message_const import NAME_VALUE_SEPARATOR as _NAME_SEP
from ..protocol.message_const import PROPERTY_SEPARATOR as _PROP_SEP
from ..protocol.record_layout import BATCH_HEAD_FORMAT, MAX_PROPERTIES_LEN

__all__ = ["encode_batch_body"]

_HEAD = struct.Struct(BATCH_HEAD_FORMAT)
_H16 = struct.Struct(">H")


def _properties(props: Any) -> bytes:
    if not props:
        return b""
    parts = []
    for k, v in props.items():
        k, v = str(k), str(v)
        if _NAME_SEP in k or _PROP_SEP in k or _NAME_SEP in v or _PROP_SEP in v:
            raise ValueError(f"property {k!r} contains a reserved separator (\\x01 or \\x02)")
        parts.append(f"{k}{_NAME_SEP}{v}{_PROP_SEP}")
    return "".join(parts).encode("utf-8")


def encode_batch_body(messages: Iterable[Any]) -> bytes:
    """The body of a SEND_BATCH_MESSAGE holding ``messages`` (see the module doc)."""
    out = []
    for m in messages:
        pb = _properties(m.properties)
        if len(pb) > MAX_PROPERTIES_LEN:
            raise ValueError(f"properties are {len(pb)} bytes, the batch format allows {MAX_PROPERTIES_LEN}")
        body = m.body
        flag = m.flag
        if not -(1 << 31) <= flag < (1 << 31):
            raise ValueError(f"flag {flag} is outside int32")
        size = _HEAD.size + len(body) + 2 + len(pb)
        out.append(b"".join((_HEAD.pack(size, 0, 0, flag, len(body)), body, _H16.pack(len(pb)), pb)))
    return b"".join(out)
