from typing import Any, Iterable, final

__all__ = ["RemotingCommand", "FrameDecoder", "encode_frame", "encode_frames", "decode_frame", "settle_responses",
           "LANGUAGE_NAMES", "MAX_HEADER_LENGTH"]

LANGUAGE_NAMES: tuple[str, ...]
MAX_HEADER_LENGTH: int

@final
class RemotingCommand:
    # Cython generates these for its automatic pickling (pickle and copy reach them through __reduce__):
    # real methods of the compiled class, so the stub names them rather than an allowlist hiding them.
    def __reduce_cython__(self) -> tuple[Any, ...]: ...
    def __setstate_cython__(self, __pyx_state: Any, /) -> None: ...
    code: int
    language: int
    version: int
    opaque: int
    flag: int
    remark: str | None
    ext_fields: dict[str, str] | None
    serialize_type: int
    body: bytes | None
    def __init__(self, code: int = 0, *, language: int = 3, version: int = 409, opaque: int = 0, flag: int = 0,
                 remark: str | None = None, ext_fields: dict[str, str] | None = None, serialize_type: int = 0,
                 body: bytes | None = None) -> None: ...
    @property
    def is_response(self) -> bool: ...
    @property
    def is_oneway(self) -> bool: ...

@final
class FrameDecoder:
    max_frame_size: int
    def __init__(self, max_frame_size: int = 16777216) -> None: ...
    def feed(self, data: bytes | bytearray | memoryview) -> list[RemotingCommand]: ...
    def buffered(self) -> int: ...

def encode_frame(cmd: RemotingCommand) -> bytes: ...
def encode_frames(cmds: Iterable[RemotingCommand]) -> bytes: ...
def decode_frame(frame: bytes | bytearray | memoryview, max_frame_size: int = 16777216) -> RemotingCommand: ...
def settle_responses(cmds: list[RemotingCommand], pending: dict[int, Any]
                     ) -> tuple[list[RemotingCommand] | None, list[int] | None]: ...
