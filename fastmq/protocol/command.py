"""RemotingCommand: the request/response envelope, and the helpers that make one.

The class itself lives in the codec twin (``fastmq._ext.codec``) so that the
compiled decoder can build it without a Python round per field; this module
adds what the rest of fastmq needs around it: opaque numbering, request and
response constructors, and typed access to ``extFields``.
"""
from __future__ import annotations

import itertools
from typing import Mapping

from .._ext.codec import RemotingCommand
from ..errors import RemotingCommandError
from .codes import LanguageCode, ResponseCode
from .java_number import JavaNumberFormatError, parse_long

__all__ = [
    "RemotingCommand",
    "VERSION",
    "VERSION_NAME",
    "next_opaque",
    "create_request",
    "create_response",
    "response_for",
    "ext_int",
    "ext_str",
    "ext_bool",
]

#: The wire version fastmq announces: MQVersion.V4_9_8's ordinal, so 4.9
#: servers treat us as a current 4.9 client (standard JSON route bodies).
VERSION = 409
#: Its name (MQVersion.getVersionDesc), as a client reports it in PROP_CLIENT_VERSION.
VERSION_NAME = "V4_9_8"

_opaque = itertools.count(1)
#: The counter :func:`next_opaque` takes its ids from (the producer's compiled fast path takes
#: them from it directly, one Python call less per send; masked as next_opaque masks them).
OPAQUE_COUNTER = _opaque


def next_opaque() -> int:
    """A process-wide increasing request id (wraps inside int32)."""
    return next(_opaque) & 0x7FFFFFFF


def _stringify(fields: Mapping[str, object] | None) -> dict[str, str] | None:
    if fields is None:
        return None
    out: dict[str, str] = {}
    for k, v in fields.items():
        if v is None:
            continue  # Java omits null header fields
        if isinstance(v, bool):
            out[k] = "true" if v else "false"
        else:
            out[k] = str(v)
    return out


def create_request(code: int, ext_fields: Mapping[str, object] | None = None, body: bytes | None = None,
                   *, serialize_type: int = 0) -> RemotingCommand:
    """A request with a fresh opaque; header values are stringified as Java does."""
    return RemotingCommand(code, language=int(LanguageCode.PYTHON), version=VERSION, opaque=next_opaque(),
                           flag=0, ext_fields=_stringify(ext_fields), serialize_type=serialize_type, body=body)


def create_response(code: int = ResponseCode.SUCCESS, remark: str | None = None,
                    ext_fields: Mapping[str, object] | None = None, body: bytes | None = None) -> RemotingCommand:
    """A response not yet bound to a request (see :func:`response_for`)."""
    return RemotingCommand(int(code), language=int(LanguageCode.JAVA), version=VERSION, opaque=0, flag=1,
                           remark=remark, ext_fields=_stringify(ext_fields), body=body)


def response_for(request: RemotingCommand, code: int = ResponseCode.SUCCESS, remark: str | None = None,
                 ext_fields: Mapping[str, object] | None = None, body: bytes | None = None) -> RemotingCommand:
    """A response to ``request``: same opaque, same serialize type, flag bit 0 set.

    Language is JAVA because clients such as the C++ one branch on it only to
    recognise a Java-compatible server.
    """
    return RemotingCommand(int(code), language=int(LanguageCode.JAVA), version=VERSION, opaque=request.opaque,
                           flag=1, remark=remark, ext_fields=_stringify(ext_fields),
                           serialize_type=request.serialize_type, body=body)


def ext_str(cmd: RemotingCommand, name: str, default: str | None = None) -> str | None:
    f = cmd.ext_fields
    if not f:
        return default
    return f.get(name, default)


def ext_int(cmd: RemotingCommand, name: str, default: int | None = None) -> int | None:
    """An integer header field as ``Long.parseLong`` reads it (no blanks, no underscores, 64 bits).

    Raises:
        RemotingCommandError: not an integer, or beyond 64 bits (Long.parseLong refuses both).
    """
    v = ext_str(cmd, name)
    if v is None or v == "":
        return default
    try:
        return parse_long(v)
    except JavaNumberFormatError as exc:
        raise RemotingCommandError(f"header field {name!r} is not a Java long: {exc}") from None


def ext_bool(cmd: RemotingCommand, name: str, default: bool = False) -> bool:
    """A boolean header field; Java's Boolean.parseBoolean semantics."""
    v = ext_str(cmd, name)
    if v is None:
        return default
    return v.strip().lower() == "true"
