"""Type stub of the compiled SEND_BATCH_MESSAGE body encoder (same contract as ``batch_py``)."""
from typing import Any, Iterable

__all__ = ["encode_batch_body"]

def encode_batch_body(messages: Iterable[Any]) -> bytes: ...
