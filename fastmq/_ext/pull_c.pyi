"""Type stub of the compiled pull-header decoder (same contract as ``pull_py``)."""
from typing import Any

__all__ = ["decode_pull_header", "PULL_NUMBERS", "usual_longs"]

PULL_NUMBERS: tuple[tuple[str, int, int], ...]

def decode_pull_header(fields: dict[str, Any], cls: Any) -> Any: ...

def usual_longs(fields: dict[str, Any] | None, first: str, second: str) -> tuple[int, int] | None: ...
