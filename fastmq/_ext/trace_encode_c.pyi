"""Type stub of the compiled trace encoder (same contract as ``trace_encode_py``)."""
from typing import Any, Callable, Sequence

__all__ = ["encode_pub_rows", "PUB_ROW"]

PUB_ROW: int

def encode_pub_rows(rows: Sequence[Any], trace_topic: str, group: str,
                    store_host: Callable[[str], str | None]) -> list[tuple[str, list[str]]]: ...
