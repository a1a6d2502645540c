"""The RemotingCommand codec the rest of fastmq imports: compiled twin, or the reference."""
from __future__ import annotations

from typing import TYPE_CHECKING

from ._flags import NO_EXTENSIONS

if TYPE_CHECKING or NO_EXTENSIONS:
    from .codec_py import FrameDecoder, RemotingCommand, decode_frame, encode_frame, encode_frames, settle_responses
else:
    try:
        from .codec_c import FrameDecoder, RemotingCommand, decode_frame, encode_frame, encode_frames, settle_responses
    except ImportError:  # unbuilt source checkout; the test suite refuses this (tests/conftest.py)
        from .codec_py import FrameDecoder, RemotingCommand, decode_frame, encode_frame, encode_frames, settle_responses

__all__ = ["FrameDecoder", "RemotingCommand", "decode_frame", "encode_frame", "encode_frames", "settle_responses"]
