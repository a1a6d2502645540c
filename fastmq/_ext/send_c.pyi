"""Type stub of the compiled send pipeline (same contract as ``send_py``)."""
from typing import Any, final

import numpy as np

__all__ = ["SendBatch", "encode_sends", "place_records", "index_records", "encode_answers", "COLUMNS",
           "crc32", "java_hash"]

COLUMNS: tuple[str, ...]

@final
class SendBatch:
    cols: np.ndarray
    n: int
    keys: list[tuple[str, int]]
    slow: list[int]
    fast: list[int]
    rr: int
    wait: bool
    total_size: int
    @property
    def records(self) -> bytes: ...

def crc32(data: bytes) -> int: ...
def java_hash(data: bytes) -> int: ...
def encode_sends(requests: list[Any], topics: dict[str, tuple[int, int, int]], born_host: bytes,
                 store_host: bytes, cluster_prop: bytes, max_size: int, rr: int = ..., *,
                 groups: set[str] | None = ...) -> SendBatch: ...
def place_records(b: SendBatch, mapping: Any, pos: int, file_size: int, file_from: int, start: int,
                  next_offsets: np.ndarray, store_ts: int) -> tuple[int, int]: ...
def index_records(b: SendBatch, start: int, mapping: Any, slots: int, entries: int, state: list[int],
                  store_ts: int) -> int: ...
def encode_answers(b: SendBatch, requests: list[Any], msg_id_prefix: bytes,
                   template: tuple[bytes, bytes, bytes, bytes, bytes]) -> bytes: ...
def wire_facts() -> dict[str, Any]: ...
