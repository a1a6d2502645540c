from typing import Any, Callable, Sequence

def month_bounds(ms: int) -> tuple[int, int]: ...

class UniqIds:
    prefix: str
    def __init__(self, prefix: str) -> None: ...
    def reseed(self, prefix: str) -> None: ...
    def next(self, now_ms: int = -1) -> str: ...
    def take(self, n: int, now_ms: int = -1) -> list[str]: ...

class SendRequestWriter:
    group: str
    default_topic: str
    default_topic_queue_nums: int
    language: int
    version: int
    def __init__(self, group: str, default_topic: str, default_topic_queue_nums: int, language: int,
                 version: int) -> None: ...
    def frame(self, opaque: int, topic: str, queue_id: int, sys_flag: int, born_ms: int, flag: int,
              properties: Any, body: bytes, batch: bool) -> bytes: ...

def encode_batch(messages: Sequence[Any], topic: str, max_body: int, ids: UniqIds) -> tuple[bytes, str] | None: ...

class SendResult:
    status: str
    msg_id: str
    offset_msg_id: str
    message_queue: Any
    queue_offset: int
    region_id: str | None
    def __init__(self, status: str, msg_id: str, offset_msg_id: str, message_queue: Any, queue_offset: int,
                 region_id: str | None = None) -> None: ...

class AsyncSend:
    owner: Any
    topic: str | None
    body: bytes | None
    flag: int | None
    properties: dict[str, str] | None
    mq: Any
    uniq: str
    fut: Any
    callback: Callable[..., Any] | None
    permits: Any
    error: BaseException | None
    timer: Any
    retries: int
    batch: bool
    fault: bool
    timeout_ms: int
    begin: float
    deadline: float
    def __init__(self, owner: Any, msg: Any, mq: Any, uniq: str, fut: Any, callback: Callable[..., Any] | None,
                 permits: Any, timeout_ms: int, begin: float, deadline: float) -> None: ...
    def done(self) -> bool: ...
    def set_result(self, resp: Any) -> None: ...
    def set_exception(self, exc: BaseException) -> None: ...
    def release(self) -> None: ...
    def finish(self, result: Any, exc: BaseException | None) -> None: ...

class SendFastPath:
    owner: Any
    writer: SendRequestWriter
    ids: UniqIds
    next_opaque: Callable[[], int]
    running: bool
    loop: Any
    counter: int
    max_message_size: int
    compress_over: int
    send_latency_fault_enable: bool
    send_msg_timeout: int
    retry_times_when_send_failed: int
    retry_times_when_send_async_failed: int
    def __init__(self, owner: Any, writer: SendRequestWriter, ids: UniqIds, next_opaque: Callable[[], int]) -> None: ...
    def next_counter(self) -> int: ...
    def start(self, msg: Any, callback: Callable[..., Any] | None, timeout_ms: int | None, awaited: bool = False,
              batch_ids: str | None = None) -> Any: ...
