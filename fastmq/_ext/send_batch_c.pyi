"""Type stub of the compiled send batch container (same contract as ``send_batch_py``)."""
from typing import final

import numpy as np

__all__ = ["SendBatch", "COLUMNS"]

COLUMNS: tuple[str, ...]

@final
class SendBatch:
    @property
    def cols(self) -> np.ndarray: ...
    n: int
    keys: list[tuple[str, int]]
    slow: list[int]
    fast: list[int]
    rr: int
    wait: bool
    total_size: int
    @property
    def records(self) -> bytes: ...
