import asyncio
import contextvars
from typing import Any, Callable, Generator, NoReturn, Sequence, final

from ._protocols import ProduceContextProto

__all__ = ["UniqIds", "SendRequestWriter", "encode_batch", "SendResult", "AsyncSend", "SendFastPath", "month_bounds"]

def month_bounds(ms: int) -> tuple[int, int]: ...

@final
class UniqIds:
    # Cython generates these for its automatic pickling (pickle and copy reach them through __reduce__):
    # real methods of the compiled class, so the stub names them rather than an allowlist hiding them.
    def __reduce_cython__(self) -> tuple[Any, ...]: ...
    def __setstate_cython__(self, __pyx_state: Any, /) -> None: ...
    prefix: str
    def __init__(self, prefix: str) -> None: ...
    def reseed(self, prefix: str) -> None: ...
    def next(self, now_ms: int = -1) -> str: ...
    def take(self, n: int, now_ms: int = -1) -> list[str]: ...

@final
class SendRequestWriter:
    group: str
    default_topic: str
    default_topic_queue_nums: int
    language: int
    version: int
    @property
    def signer(self) -> Any: ...
    def __init__(self, group: str, default_topic: str, default_topic_queue_nums: int, language: int,
                 version: int, *, signer: Any = None) -> None: ...
    def frame(self, opaque: int, topic: str, queue_id: int, sys_flag: int, born_ms: int, flag: int,
              properties: Any, body: bytes, batch: bool) -> bytes: ...

def encode_batch(messages: Sequence[Any], topic: str, max_body: int, ids: UniqIds) -> tuple[bytes, str] | None: ...

@final
class SendResult:
    status: str
    msg_id: str
    offset_msg_id: str
    message_queue: Any
    queue_offset: int
    region_id: str | None
    trace_on: bool
    def __init__(self, status: str, msg_id: str, offset_msg_id: str, message_queue: Any, queue_offset: int,
                 region_id: str | None = None, trace_on: bool = True) -> None: ...

@final
class AsyncSend:
    # Cython generates these for its automatic pickling (pickle and copy reach them through __reduce__):
    # real methods of the compiled class, so the stub names them rather than an allowlist hiding them.
    def __reduce_cython__(self) -> tuple[Any, ...]: ...
    def __setstate_cython__(self, __pyx_state: Any, /) -> None: ...
    """A send's future (asyncio's Future protocol) and its first try's pending entry."""
    context: ProduceContextProto
    topic: str | None
    body: bytes | None
    flag: int | None
    properties: dict[str, str] | None
    mq: Any
    uniq: str
    callback: Callable[..., Any] | None
    permits: Any
    error: BaseException | None
    timer: Any
    retries: int
    batch: bool
    fault: bool
    trace: bool
    tracer: Any
    trace_begin_ms: int
    timeout_ms: int
    begin: float
    deadline: float
    _asyncio_future_blocking: bool
    def __init__(self, context: ProduceContextProto, msg: Any, mq: Any, uniq: str, loop: asyncio.AbstractEventLoop,
                 callback: Callable[..., Any] | None, permits: Any, timeout_ms: int, begin: float,
                 deadline: float) -> None: ...
    # the pending entry
    def answered(self) -> bool: ...
    def on_response(self, resp: Any) -> None: ...
    def on_failure(self, exc: BaseException) -> None: ...
    def release(self) -> None: ...
    def finish(self, result: Any, exc: BaseException | None) -> None: ...
    # the future
    def set_result(self, result: Any) -> NoReturn: ...
    def set_exception(self, exception: Any) -> NoReturn: ...
    def get_loop(self) -> asyncio.AbstractEventLoop: ...
    def done(self) -> bool: ...
    def cancelled(self) -> bool: ...
    def cancel(self, msg: Any = None) -> bool: ...
    def result(self) -> SendResult: ...
    def exception(self) -> BaseException | None: ...
    def add_done_callback(self, fn: Callable[[AsyncSend], object], *, context: contextvars.Context | None = None
                          ) -> None: ...
    def remove_done_callback(self, fn: Callable[[AsyncSend], object]) -> int: ...
    def __await__(self) -> Generator[Any, None, SendResult]: ...
    def __iter__(self) -> Generator[Any, None, SendResult]: ...

@final
class SendFastPath:
    # Cython generates these for its automatic pickling (pickle and copy reach them through __reduce__):
    # real methods of the compiled class, so the stub names them rather than an allowlist hiding them.
    def __reduce_cython__(self) -> tuple[Any, ...]: ...
    def __setstate_cython__(self, __pyx_state: Any, /) -> None: ...
    context: ProduceContextProto
    writer: SendRequestWriter
    ids: UniqIds
    next_opaque: Callable[[], int]
    running: bool
    loop: Any
    counter: int
    max_message_size: int
    compress_over: int
    send_latency_fault_enable: bool
    trace: bool
    tracer: Any
    avoid_unreachable: bool
    send_msg_timeout: int
    retry_times_when_send_failed: int
    retry_times_when_send_async_failed: int
    def __init__(self, context: ProduceContextProto, writer: SendRequestWriter, ids: UniqIds,
                 next_opaque: Callable[[], int]) -> None: ...
    def next_counter(self) -> int: ...
    def passes(self, msg: Any) -> bool: ...
    def start(self, msg: Any, callback: Callable[..., Any] | None, timeout_ms: int | None, awaited: bool = False,
              batch_ids: str | None = None, held: Any = None) -> Any: ...
    def retrack(self) -> int: ...
