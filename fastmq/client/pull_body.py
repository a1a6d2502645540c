"""The records of a PULL_MESSAGE answer, decoded a body at a time.

``protocol.message.decode_records`` is the reference decoder (every record shape, every check,
one ``MessageExt`` per call of a general routine). Nearly every body a consumer sees holds IPv4
records only, so the ``_ext.records`` twin reads those a body at a time (compiled: the fixed
fields, properties and ``MessageExt`` objects built in C; hosts and topics made once per body).
Anything else (an IPv6 host, a length that does not add up, bad UTF-8, a wrong magic) sends the
whole body to ``decode_records``, which decodes it or raises its typed error: the results are
the same either way (tests/test_pull_body.py and tests/test_records.py hold them equal).
"""
from __future__ import annotations

from .._ext.records import decode_v4
from ..protocol.message import MessageExt, decode_records

__all__ = ["decode_pull_body"]


def decode_pull_body(buf: bytes | bytearray | memoryview) -> list[MessageExt]:
    """Every record of a pull body, as ``decode_records(buf, verify_crc=False)`` returns them.

    Raises:
        MessageFormatError: as ``decode_records`` does, for a body it rejects.
    """
    data = buf if isinstance(buf, bytes) else bytes(buf)
    out = decode_v4(data, MessageExt)
    if out is None:
        return decode_records(data, verify_crc=False)
    return out
