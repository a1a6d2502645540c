"""Type stub of the compiled one-record put (same contract as ``lone_put_py``)."""
from typing import Any, Callable, final

__all__ = ["LonePut"]

@final
class LonePut:
    # Cython generates these for its automatic pickling (pickle and copy reach them through __reduce__):
    # real methods of the compiled class, so the stub names them rather than an allowlist hiding them.
    def __reduce_cython__(self) -> tuple[Any, ...]: ...
    def __setstate_cython__(self, __pyx_state: Any, /) -> None: ...
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
