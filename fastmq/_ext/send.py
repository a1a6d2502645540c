"""Selects the send hot path: compiled ``send_c`` unless FASTMQ_NO_EXTENSIONS is set."""
from typing import TYPE_CHECKING

from ._flags import NO_EXTENSIONS
from .send_py import answer_template

if TYPE_CHECKING or NO_EXTENSIONS:
    from .send_py import (COLUMNS, SendBatch, crc32, encode_answers, encode_sends, index_records, java_hash,
                          place_records)
else:
    try:
        from .send_c import (COLUMNS, SendBatch, crc32, encode_answers, encode_sends, index_records, java_hash,
                             place_records)
    except ImportError:  # unbuilt source checkout; the test suite refuses to run like this
        from .send_py import (COLUMNS, SendBatch, crc32, encode_answers, encode_sends, index_records, java_hash,
                              place_records)

__all__ = ["SendBatch", "encode_sends", "place_records", "index_records", "encode_answers", "COLUMNS",
           "crc32", "java_hash", "answer_template"]
