"""Selects the store's one-record put: compiled ``lone_put_c`` unless FASTMQ_NO_EXTENSIONS is set."""
from typing import TYPE_CHECKING

from ._flags import NO_EXTENSIONS

if TYPE_CHECKING or NO_EXTENSIONS:
    from .lone_put_py import LonePut
else:
    try:
        from .lone_put_c import LonePut
    except ImportError:  # unbuilt source checkout; the test suite refuses to run like this
        from .lone_put_py import LonePut

__all__ = ["LonePut"]
