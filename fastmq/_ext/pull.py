"""Selects the pull-header decoder: compiled ``pull_c`` unless FASTMQ_NO_EXTENSIONS is set."""
from typing import TYPE_CHECKING

from ._flags import NO_EXTENSIONS

if TYPE_CHECKING or NO_EXTENSIONS:
    from .pull_py import PULL_NUMBERS, decode_pull_header
else:
    try:
        from .pull_c import PULL_NUMBERS, decode_pull_header
    except ImportError:  # unbuilt source checkout; the test suite refuses to run like this
        from .pull_py import PULL_NUMBERS, decode_pull_header

__all__ = ["decode_pull_header", "PULL_NUMBERS"]
