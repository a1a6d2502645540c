"""Type stub of the compiled plain-IPv4 record decoder (same contract as ``records_py``)."""
from typing import Any

__all__ = ["decode_v4"]

def decode_v4(data: bytes, cls: Any) -> list[Any] | None: ...
def wire_facts() -> dict[str, Any]: ...
