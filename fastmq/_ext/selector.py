"""The selector twin the rest of fastmq imports: compiled, or the pure-Python reference."""
from __future__ import annotations

from typing import TYPE_CHECKING

from ._flags import NO_EXTENSIONS

if TYPE_CHECKING or NO_EXTENSIONS:
    from .selector_py import *  # noqa: F403
    from .selector_py import __all__
else:
    try:
        from .selector_c import *  # noqa: F403
        from .selector_c import __all__
    except ImportError:  # unbuilt source checkout; the test suite refuses this (tests/conftest.py)
        from .selector_py import *  # noqa: F403
        from .selector_py import __all__
