"""Selects the store's record writer: compiled ``record_writer_c`` unless FASTMQ_NO_EXTENSIONS is set."""
from typing import TYPE_CHECKING

from ._flags import NO_EXTENSIONS

if TYPE_CHECKING or NO_EXTENSIONS:
    from .record_writer_py import index_records, place_one, place_records
else:
    try:
        from .record_writer_c import index_records, place_one, place_records
    except ImportError:  # unbuilt source checkout; the test suite refuses to run like this
        from .record_writer_py import index_records, place_one, place_records

__all__ = ["place_records", "place_one", "index_records"]
