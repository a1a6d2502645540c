"""Type stub of the compiled send stage (same contract as ``send_py``)."""
from typing import Any

from .send_batch_c import SendBatch

__all__ = ["encode_sends", "encode_answers", "crc32", "java_hash"]

def crc32(data: bytes) -> int: ...
def java_hash(data: bytes) -> int: ...
def encode_sends(requests: list[Any], topics: dict[str, tuple[int, int, int]], born_host: bytes,
                 store_host: bytes, cluster_prop: bytes, max_size: int, rr: int = ..., *,
                 groups: set[str] | None = ..., born_hosts: list[bytes] | None = ...,
                 binary: bool = ..., half_topic: str | None = ...) -> SendBatch: ...
def encode_answers(b: SendBatch, requests: list[Any], msg_id_prefix: bytes,
                   template: tuple[bytes, bytes, bytes, bytes, bytes], *, lo: int = ..., hi: int = ...,
                   binary_template: tuple[bytes, bytes, bytes, bytes, bytes, bytes] | None = ...) -> bytes: ...
def wire_facts() -> dict[str, Any]: ...
