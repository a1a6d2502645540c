"""Type stub of the compiled one-record put (same contract as ``lone_put_py``)."""
from typing import Any, Callable, final

__all__ = ["LonePut"]

@final
class LonePut:
    store: Any
    put_result: Callable[..., Any]
    put_ok: Any
    disk_check_interval: float
    clock: Callable[[], int] | None
    def __init__(self, store: Any, put_result: Callable[..., Any], put_ok: Any, disk_check_interval: float,
                 clock: Callable[[], int] | None = None) -> None: ...
    def put(self, batch: Any) -> Any: ...
    def stored(self, batch: Any, now: int, first_qoff: int, first_phys: int, end: int) -> Any: ...
    def took(self, result: Any, began: int) -> Any: ...
