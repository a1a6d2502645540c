"""Type stub of the compiled END_TRANSACTION record builder (same contract as ``end_transaction_py``)."""
from .send_batch_c import SendBatch

__all__ = ["end_fields", "end_records"]

def end_fields(fields: dict[str, str] | None, legal_groups: set[str] | frozenset[str]) -> tuple[bytes, int, int, bool] | None: ...

def end_records(half: bytes | memoryview, half_offset: int, half_topic: bytes, group: bytes, queue_offset: int,
                commit: bool, op_topic: bytes, op_tag: bytes, now: int, store_host: bytes,
                max_size: int) -> SendBatch | None: ...
