"""The interface both codec twins implement, written down once.

``codec_c`` (Cython) and ``codec_py`` (pure Python) export the same names with
the same signatures; tests check both against this module.

Wire layout of one frame (RocketMQ RemotingCommand, all integers big-endian)::

    int32  total      = 4 + header_len + body_len   (the 4 bytes of this field excluded)
    int32  mark       = (serialize_type << 24) | header_len
    bytes  header     JSON (serialize_type 0) or ROCKETMQ binary (1)
    bytes  body       the rest

JSON header keys: code, extFields, flag, language, opaque, remark,
serializeTypeCurrentRPC, version. ROCKETMQ binary header: int16 code, int8
language, int16 version, int32 opaque, int32 flag, int32 remark length + UTF-8,
int32 ext length + repeated (int16 key length, key, int32 value length, value).
"""
from __future__ import annotations

from typing import Iterable, Protocol

SERIALIZE_JSON = 0
SERIALIZE_ROCKETMQ = 1
FLAG_RESPONSE = 1
FLAG_ONEWAY = 2
DEFAULT_MAX_FRAME_SIZE = 16 * 1024 * 1024


class RemotingCommandProto(Protocol):
    """A decoded request or response.

    ``language`` is a LanguageCode number (JSON carries its name; unknown
    names decode as OTHER=7). ``ext_fields`` values are always ``str`` after
    decoding, whatever JSON type they arrived as (numbers keep their text,
    booleans become "true"/"false", nulls are dropped). ``serialize_type`` is
    the type the command arrived in and the type it is encoded in.
    """

    code: int
    language: int
    version: int
    opaque: int
    flag: int
    remark: str | None
    ext_fields: dict[str, str] | None
    serialize_type: int
    body: bytes | None

    @property
    def is_response(self) -> bool: ...
    @property
    def is_oneway(self) -> bool: ...


class FrameDecoderProto(Protocol):
    """Push decoder: feed socket chunks, get whole commands back.

    Keeps at most one partial frame; never copies already-buffered bytes
    more than once per frame. After a FrameError the decoder is poisoned and
    every further ``feed`` raises the same error.
    """

    max_frame_size: int

    def feed(self, data: bytes | bytearray | memoryview) -> list[RemotingCommandProto]: ...
    def buffered(self) -> int: ...


class CodecModule(Protocol):
    RemotingCommand: type
    FrameDecoder: type

    def encode_frame(self, cmd: RemotingCommandProto) -> bytes: ...
    def encode_frames(self, cmds: Iterable[RemotingCommandProto]) -> bytes: ...
    def decode_frame(self, frame: bytes, max_frame_size: int = DEFAULT_MAX_FRAME_SIZE) -> RemotingCommandProto: ...
