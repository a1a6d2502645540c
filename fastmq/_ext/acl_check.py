"""Selects the ACL signature and fast-pass check: compiled ``acl_check_c`` unless FASTMQ_NO_EXTENSIONS is set."""
from typing import TYPE_CHECKING

from ._flags import NO_EXTENSIONS

if TYPE_CHECKING or NO_EXTENSIONS:
    from .acl_check_py import Gate, HmacKey, Rules, fast_pass, signed
else:
    try:
        from .acl_check_c import Gate, HmacKey, Rules, fast_pass, signed
    except ImportError:  # unbuilt source checkout; the test suite refuses to run like this
        from .acl_check_py import Gate, HmacKey, Rules, fast_pass, signed

__all__ = ["Gate", "HmacKey", "Rules", "fast_pass", "signed"]
