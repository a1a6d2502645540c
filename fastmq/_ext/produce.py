"""Selects the producer hot path: compiled ``produce_c`` unless FASTMQ_NO_EXTENSIONS is set."""
from typing import TYPE_CHECKING

from ._flags import NO_EXTENSIONS

if TYPE_CHECKING or NO_EXTENSIONS:
    from .produce_py import (AsyncSend, Handback, SendFastPath, SendRequestWriter, SendResult, SendWindow, UniqIds,
                             encode_batch, month_bounds)
else:
    try:
        from .produce_c import (AsyncSend, Handback, SendFastPath, SendRequestWriter, SendResult, SendWindow,
                                UniqIds, encode_batch, month_bounds)
    except ImportError:  # unbuilt source checkout; the test suite refuses to run like this
        from .produce_py import (AsyncSend, Handback, SendFastPath, SendRequestWriter, SendResult, SendWindow,
                                 UniqIds, encode_batch, month_bounds)

__all__ = ["AsyncSend", "Handback", "SendFastPath", "SendRequestWriter", "SendResult", "SendWindow", "UniqIds",
           "encode_batch", "month_bounds"]
