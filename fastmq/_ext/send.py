"""Selects the broker's send stage: compiled ``send_c`` unless FASTMQ_NO_EXTENSIONS is set."""
from typing import TYPE_CHECKING

from ._flags import NO_EXTENSIONS
from .send_py import answer_template, binary_answer_template

if TYPE_CHECKING or NO_EXTENSIONS:
    from .send_py import crc32, encode_answers, encode_sends, java_hash
else:
    try:
        from .send_c import crc32, encode_answers, encode_sends, java_hash
    except ImportError:  # unbuilt source checkout; the test suite refuses to run like this
        from .send_py import crc32, encode_answers, encode_sends, java_hash

__all__ = ["encode_sends", "encode_answers", "crc32", "java_hash", "answer_template", "binary_answer_template"]
