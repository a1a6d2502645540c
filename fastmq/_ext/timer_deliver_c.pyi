"""Type stub of the compiled timer-delivery record builder (same contract as ``timer_deliver_py``)."""
from typing import Sequence

import numpy as np

from .send_batch_c import SendBatch

__all__ = ["delivered_records", "real_topic_ids"]

def delivered_records(records: Sequence[bytes | memoryview], timer_topic: bytes, now: int, store_host: bytes,
                      max_size: int) -> tuple[SendBatch, list[int]]: ...
def real_topic_ids(buf: bytes | memoryview, starts: np.ndarray, sizes: np.ndarray,
                   ids: dict[str, int]) -> np.ndarray: ...
