"""Type stub of the compiled record writer (same contract as ``record_writer_py``)."""
from typing import Any

import numpy as np

from .send_batch_c import SendBatch

__all__ = ["place_records", "place_one", "index_records"]

def place_records(b: SendBatch, mapping: Any, pos: int, file_size: int, file_from: int, start: int,
                  next_offsets: np.ndarray, store_ts: int) -> tuple[int, int]: ...
def place_one(b: SendBatch, mapping: Any, pos: int, file_size: int, file_from: int, queue_offset: int,
              store_ts: int, cq_mapping: Any = None, cq_pos: int = -1, row: int = -1) -> tuple[int, int] | None: ...
def index_records(b: SendBatch, start: int, mapping: Any, slots: int, entries: int, state: list[int],
                  store_ts: int) -> int: ...
def wire_facts() -> dict[str, Any]: ...
