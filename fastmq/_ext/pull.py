"""Selects the pull-header decoder and the pull answer's numbers: compiled ``pull_c`` unless
FASTMQ_NO_EXTENSIONS is set."""
from typing import TYPE_CHECKING

from ._flags import NO_EXTENSIONS

if TYPE_CHECKING or NO_EXTENSIONS:
    from .pull_py import PULL_NUMBERS, decode_pull_header, usual_longs
else:
    try:
        from .pull_c import PULL_NUMBERS, decode_pull_header, usual_longs
    except ImportError:  # unbuilt source checkout; the test suite refuses to run like this
        from .pull_py import PULL_NUMBERS, decode_pull_header, usual_longs

__all__ = ["decode_pull_header", "PULL_NUMBERS", "usual_longs"]
