"""Compiled hot paths and their pure-Python twins.

Each concept has ``<name>_c`` (Cython), ``<name>_py`` (reference) and ``<name>``
(the selector the rest of fastmq imports). ``USING_EXTENSIONS`` says which twin
is live in this process.
"""
from __future__ import annotations

from ._flags import NO_EXTENSIONS


def _compiled_loaded() -> bool:
    if NO_EXTENSIONS:
        return False
    try:
        from . import codec_c  # noqa: F401
    except ImportError:
        return False
    return True


#: True when the compiled twins are the ones in use.
USING_EXTENSIONS: bool = _compiled_loaded()
