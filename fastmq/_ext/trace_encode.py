"""Selects a traced client's record buffer and its dispatcher's packer: compiled ``trace_encode_c`` unless FASTMQ_NO_EXTENSIONS is set."""
from typing import TYPE_CHECKING

from ._flags import NO_EXTENSIONS

if TYPE_CHECKING or NO_EXTENSIONS:
    from .trace_encode_py import PubRows, TracePacker, join_keys
else:
    try:
        from .trace_encode_c import PubRows, TracePacker, join_keys
    except ImportError:  # unbuilt source checkout; the test suite refuses to run like this
        from .trace_encode_py import PubRows, TracePacker, join_keys

__all__ = ["PubRows", "TracePacker", "join_keys"]
