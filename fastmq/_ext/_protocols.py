"""The interface both twins of every compiled module implement, written down once.

Each ``<stem>_c`` (Cython) and ``<stem>_py`` (pure Python) pair exports the same names with the
same signatures; :data:`TWINS` maps each stem to its module protocol and the protocols of its
classes, and tests/test_twin_protocols.py checks both twins against them (names, parameter
names, kinds and defaults).

Wire layout of one frame (RocketMQ RemotingCommand, all integers big-endian)::

    int32  total      = 4 + header_len + body_len   (the 4 bytes of this field excluded)
    int32  mark       = (serialize_type << 24) | header_len
    bytes  header     JSON (serialize_type 0) or ROCKETMQ binary (1)
    bytes  body       the rest

JSON header keys: code, extFields, flag, language, opaque, remark,
serializeTypeCurrentRPC, version. ROCKETMQ binary header: int16 code, int8
language, int16 version, int32 opaque, int32 flag, int32 remark length + UTF-8,
int32 ext length + repeated (int16 key length, key, int32 value length, value).
"""
from __future__ import annotations

import asyncio
from typing import Any, Callable, Iterable, Protocol, Sequence

SERIALIZE_JSON = 0
SERIALIZE_ROCKETMQ = 1
FLAG_RESPONSE = 1
FLAG_ONEWAY = 2
DEFAULT_MAX_FRAME_SIZE = 16 * 1024 * 1024


class RemotingCommandProto(Protocol):
    """A decoded request or response.

    ``language`` is a LanguageCode number (JSON carries its name; unknown
    names decode as OTHER=7). ``ext_fields`` values are always ``str`` after
    decoding, whatever JSON type they arrived as (numbers keep their text,
    booleans become "true"/"false", nulls are dropped). ``serialize_type`` is
    the type the command arrived in and the type it is encoded in.
    """

    code: int
    language: int
    version: int
    opaque: int
    flag: int
    remark: str | None
    ext_fields: dict[str, str] | None
    serialize_type: int
    body: bytes | None

    @property
    def is_response(self) -> bool: ...
    @property
    def is_oneway(self) -> bool: ...


class FrameDecoderProto(Protocol):
    """Push decoder: feed socket chunks, get whole commands back.

    Keeps at most one partial frame; never copies already-buffered bytes
    more than once per frame. After a FrameError the decoder is poisoned and
    every further ``feed`` raises the same error.
    """

    max_frame_size: int

    def feed(self, data: bytes | bytearray | memoryview) -> list[RemotingCommandProto]: ...
    def buffered(self) -> int: ...


class CodecModule(Protocol):
    RemotingCommand: type
    FrameDecoder: type

    def encode_frame(self, cmd: RemotingCommandProto) -> bytes: ...
    def encode_frames(self, cmds: Iterable[RemotingCommandProto]) -> bytes: ...
    def decode_frame(self, frame: bytes, max_frame_size: int = DEFAULT_MAX_FRAME_SIZE) -> RemotingCommandProto: ...
    def settle_responses(self, cmds: list[Any], pending: dict[int, Any]
                         ) -> tuple[list[Any] | None, list[int] | None]: ...


# ------------------------------------------------------------------ batch: SEND_BATCH_MESSAGE bodies

class BatchModule(Protocol):
    def encode_batch_body(self, messages: Iterable[Any]) -> bytes: ...


# ------------------------------------------------------------------ records: plain-IPv4 pull bodies

class RecordsModule(Protocol):
    def decode_v4(self, data: bytes, cls: Any) -> list[Any] | None: ...


# ------------------------------------------------------------------ pull: the broker's pull-header decoder, the pull answer's numbers

class PullModule(Protocol):
    PULL_NUMBERS: tuple[tuple[str, int, int], ...]

    def decode_pull_header(self, fields: dict[str, Any], cls: Any) -> Any: ...
    def usual_longs(self, fields: dict[str, Any] | None, first: str, second: str) -> tuple[int, int] | None: ...


# ------------------------------------------------------------------ sql_filter: SQL92 selectors on stored records

class SqlProgramProto(Protocol):
    """A compiled SQL92 selector: one message's properties, or a run of stored records."""

    nodes: tuple[tuple[int, int, int], ...]
    consts: tuple[tuple[int, Any], ...]
    props: tuple[str, ...]
    sets: tuple[frozenset[str], ...]

    def evaluate(self, properties: bytes) -> int: ...

    def evaluate_dict(self, values: dict[str, str]) -> int: ...

    def match_records(self, buf: Any, base: int, offs: Any, sizes: Any, start: int, out: Any,
                      max_match: int) -> tuple[int, int]: ...


class SqlFilterModule(Protocol):
    SqlProgram: type[SqlProgramProto]


# ------------------------------------------------------------------ sync_wait: the group commit's wait-then-sync

class SyncWaitModule(Protocol):
    TIMED_OUT: int
    PAST_LIMIT: int

    def wait_and_sync(self, wake_fd: int, data_fd: int, target: Any, limit: int, done: int,
                      timeout_ms: int) -> tuple[int, int]: ...


# ------------------------------------------------------------------ fault: the producer's latency-fault table

class FaultTableProto(Protocol):
    """Per-broker latency and penalty, indexed by broker number; grows on demand."""

    latency: Any
    available_from: Any
    present: Any
    unreachable: Any

    @property
    def capacity(self) -> int: ...
    def update(self, broker: int, latency_ms: int, isolation: bool, now_ms: int) -> None: ...
    def is_available(self, broker: int, now_ms: int) -> bool: ...
    def remove(self, broker: int) -> None: ...
    def mark_unreachable(self, broker: int) -> None: ...
    def mark_reachable(self, broker: int) -> None: ...
    def is_reachable(self, broker: int) -> bool: ...
    def unreachable_brokers(self) -> list[int]: ...
    def pick_one_at_least(self, now_ms: int, avoid: int = -1) -> int: ...


class FaultModule(Protocol):
    LATENCY_MAX: tuple[int, ...]
    NOT_AVAILABLE_DURATION: tuple[int, ...]
    FAILED_SEND_LATENCY: int
    FaultTable: type

    def not_available_duration(self, latency_ms: int) -> int: ...


# ------------------------------------------------------------------ selector: the producer's queue choice

class QueueTableProto(Protocol):
    """A topic's queues as broker numbers, with RocketMQ's round-robin selections over them."""

    queue_broker: Any

    def __len__(self) -> int: ...
    def select(self, counter: int, last_broker: int = -1) -> int: ...
    def select_fault(self, counter: int, last_broker: int, faults: Any, now_ms: int) -> int: ...
    def select_reachable(self, counter: int, last_broker: int, faults: Any) -> int: ...
    def select_of_broker(self, counter: int, broker: int) -> int: ...


class SelectorModule(Protocol):
    QueueTable: type

    def select_queue(self, queue_broker: Any, counter: int, last_broker: int = -1) -> int: ...
    def select_queue_fault(self, queue_broker: Any, counter: int, last_broker: int, present: Any,
                           available_from: Any, now_ms: int, unreachable: Any = None) -> int: ...
    def select_queue_reachable(self, queue_broker: Any, counter: int, last_broker: int, unreachable: Any) -> int: ...


# ------------------------------------------------------------------ send_batch: the send path's column container

class SendBatchProto(Protocol):
    """Records encoded from a run of SEND requests, one int64 row of ``COLUMNS`` per record."""

    cols: Any
    n: int
    keys: list[tuple[str, int]]
    slow: list[int]
    fast: list[int]
    rr: int
    wait: bool
    total_size: int

    @property
    def records(self) -> bytes: ...


class SendBatchModule(Protocol):
    COLUMNS: tuple[str, ...]
    SendBatch: type


# ------------------------------------------------------------------ send: the broker's send stage

class SendModule(Protocol):
    def crc32(self, data: bytes) -> int: ...
    def java_hash(self, data: bytes) -> int: ...
    def encode_sends(self, requests: list[Any], topics: dict[str, tuple[int, int, int]], born_host: bytes,
                     store_host: bytes, cluster_prop: bytes, max_size: int, rr: int = 0, *,
                     groups: set[str] | None = None, born_hosts: list[bytes] | None = None,
                     binary: bool = False, half_topic: str | None = None) -> Any: ...
    def encode_answers(self, b: Any, requests: list[Any], msg_id_prefix: bytes,
                       template: tuple[bytes, bytes, bytes, bytes, bytes], *, lo: int = 0, hi: int = -1,
                       binary_template: tuple[bytes, bytes, bytes, bytes, bytes, bytes] | None = None) -> bytes: ...


# ------------------------------------------------------------------ acl_check: the broker's per-request ACL check

class HmacKeyProto(Protocol):
    """HMAC-SHA1 keyed with one secret, ready for many messages."""

    def sign(self, fields: dict[str, str], body: Any, broker_side: bool = False) -> str: ...
    def sign_content(self, content: bytes, body: Any) -> str: ...


class GateProto(Protocol):
    """The per-read part of a server's ACL gate; a subclass gives ``peer_ip`` and ``general``."""

    def __call__(self, conn: Any, requests: list[Any]) -> None: ...
    def take(self, conn: Any, requests: list[Any]) -> None: ...
    def peer_ip(self, remote_addr: str) -> str: ...
    def general(self, conn: Any, requests: list[Any], start: int, ip: str) -> None: ...


class AclCheckModule(Protocol):
    HmacKey: type
    Gate: type

    def signed(self, key: Any, fields: dict[str, str], body: Any) -> bool: ...
    def fast_pass(self, requests: list[Any], start: int, ip: str, accounts: dict[str, tuple[Any, ...]]) -> int: ...


# ------------------------------------------------------------------ trace_encode: a traced client's records
class PubRowsProto(Protocol):
    """Answered sends of a traced producer as 4.9.8's Pub records (UTF-8, back to back), and
    other events encoded already, with each record's keys, at most ``limit``; cut into trace
    messages by the dispatcher's packer."""
    trace_topic: str
    group: str
    store_host: Callable[[Any], str | None]
    limit: int
    wake_at: int

    def __len__(self) -> int: ...
    def add(self, begin_ms: int, end_ms: int, topic: str, msg_id: str, tags: str | None, keys: str | None,
            broker: Any, length: int, mtype: int, offset_id: Any, ok: bool, region: str) -> int: ...
    def add_text(self, text: bytes, keys: bytes) -> int: ...
    def take(self) -> Any: ...
    def chunk(self, start: int, room: int, keys_room: int | None = None) -> tuple[bytes, bytes, int]: ...


class TracePackerProto(Protocol):
    """A trace dispatcher's worker: batches of records in, trace messages (and the tokens of
    flushes done) out, made on its own thread."""
    fill: int
    keys_fill: int
    keys_max: int
    compress_over: int
    level: int
    wait_s: float
    jobs_max: int
    notify_fd: int
    lost: int

    @property
    def jobs_waiting(self) -> int: ...
    def submit(self, rows: Any, token: int = 0) -> bool: ...
    def take_ready(self) -> list[tuple[bytes, bool, str, bytes] | int]: ...
    def run(self) -> None: ...


class TraceEncodeModule(Protocol):
    PubRows: type
    TracePacker: type

    def join_keys(self, raw: bytes) -> str: ...


# ------------------------------------------------------------------ end_transaction: a commit's or rollback's records

class EndTransactionModule(Protocol):
    def end_fields(self, fields: dict[str, str] | None,
                   legal_groups: set[str] | frozenset[str]) -> tuple[bytes, int, int, bool] | None: ...
    def end_records(self, half: bytes | memoryview, half_offset: int, half_topic: bytes, group: bytes,
                    queue_offset: int, commit: bool, op_topic: bytes, op_tag: bytes, now: int, store_host: bytes,
                    max_size: int) -> Any: ...


# ------------------------------------------------------------------ timer_deliver: due timer messages' deliveries

class TimerDeliverModule(Protocol):
    def delivered_records(self, records: Sequence[bytes | memoryview], timer_topic: bytes, now: int,
                          store_host: bytes, max_size: int) -> tuple[Any, list[int]]: ...
    def real_topic_ids(self, buf: bytes | memoryview, starts: Any, sizes: Any, ids: dict[str, int]) -> Any: ...


# ------------------------------------------------------------------ record_writer: the store's record writer

class RecordWriterModule(Protocol):
    def place_records(self, b: Any, mapping: Any, pos: int, file_size: int, file_from: int, start: int,
                      next_offsets: Any, store_ts: int) -> tuple[int, int]: ...
    def index_records(self, b: Any, start: int, mapping: Any, slots: int, entries: int, state: list[int],
                      store_ts: int) -> int: ...


# ------------------------------------------------------------------ lone_put: the store's one-record put

class LonePutModule(Protocol):
    LonePut: type


class LonePutProto(Protocol):
    """One MessageStore's one-record put: the whole usual put in one call, None for the rest; and
    the end of every put (index, statistics, answer, latency maximum), the general path's too."""

    store: Any
    put_result: Any
    put_ok: Any
    disk_check_interval: float
    clock: Any

    def put(self, batch: Any) -> Any: ...
    def stored(self, batch: Any, now: int, first_qoff: int, first_phys: int, end: int) -> Any: ...
    def took(self, result: Any, began: int) -> Any: ...


# ------------------------------------------------------------------ produce: the producer's first try

class UniqIdsProto(Protocol):
    """UNIQ_KEY (client message id) maker: a per-process prefix, a time part and a counter."""

    prefix: str

    def reseed(self, prefix: str) -> None: ...
    def next(self, now_ms: int = -1) -> str: ...
    def take(self, n: int, now_ms: int = -1) -> list[str]: ...


class SendRequestWriterProto(Protocol):
    """Writes whole SEND_MESSAGE_V2 / SEND_BATCH_MESSAGE request frames for one producer group."""

    group: str
    default_topic: str
    default_topic_queue_nums: int
    language: int
    version: int

    @property
    def signer(self) -> Any:
        """Signs each frame as the ACL hook would (a RequestSigner), or None."""

    def frame(self, opaque: int, topic: str, queue_id: int, sys_flag: int, born_ms: int, flag: int,
              properties: Any, body: bytes, batch: bool) -> bytes: ...


class SendResultProto(Protocol):
    status: str
    msg_id: str
    offset_msg_id: str
    message_queue: Any
    queue_offset: int
    region_id: str | None
    trace_on: bool


class ProduceContextProto(Protocol):
    """What a producer hands its compiled first try (``SendFastPath``, ``AsyncSend``): the only
    state of the producer they read and the only calls they make back into it, so no compiled
    code reaches into the producer's own attributes.

    ``good_topics`` (topic names already validated) and ``publish`` (topic -> publish info with
    ``queues``, ``table`` and ``masters``) are the producer's containers, read in place;
    ``permits`` its in-flight permits (``release()``), or None. ``open_connection(addr)`` is the
    connection a frame encoded in advance may be written on, or None (not connected, or a hook
    must see every request: the send then takes the general path). ``select(info)`` picks a
    queue away from penalised and unreachable brokers; ``update_fault`` reports a try's latency;
    ``send_answered`` / ``send_failed`` take a first try whose answer is not a plain SUCCESS.
    """

    good_topics: set[str]
    publish: dict[str, Any]
    permits: Any

    def open_connection(self, addr: str) -> Any: ...
    def select(self, info: Any) -> Any: ...
    def update_fault(self, broker_name: str, latency_ms: int, isolation: bool) -> None: ...
    def send_answered(self, entry: Any, resp: Any) -> None: ...
    def send_failed(self, entry: Any, exc: BaseException) -> None: ...


class AsyncSendProto(Protocol):
    """A send's future (asyncio's Future protocol) and its first try's pending entry."""

    context: ProduceContextProto
    mq: Any
    uniq: str
    retries: int
    timeout_ms: int
    begin: float
    deadline: float

    def answered(self) -> bool: ...
    def on_response(self, resp: Any) -> None: ...
    def on_failure(self, exc: BaseException) -> None: ...
    def release(self) -> None: ...
    def finish(self, result: Any, exc: BaseException | None) -> None: ...
    def get_loop(self) -> asyncio.AbstractEventLoop: ...
    def done(self) -> bool: ...
    def cancelled(self) -> bool: ...
    def cancel(self, msg: Any = None) -> bool: ...
    def result(self) -> Any: ...
    def exception(self) -> BaseException | None: ...
    def add_done_callback(self, fn: Callable[[Any], object], *, context: Any = None) -> None: ...
    def remove_done_callback(self, fn: Callable[[Any], object]) -> int: ...


class SendFastPathProto(Protocol):
    """The producer's first try of a send, without a Python round per message."""

    context: ProduceContextProto
    writer: Any
    ids: Any
    running: bool
    counter: int
    max_message_size: int
    send_msg_timeout: int

    def next_counter(self) -> int: ...
    def passes(self, msg: Any) -> bool: ...
    def start(self, msg: Any, callback: Callable[..., Any] | None, timeout_ms: int | None, awaited: bool = False,
              batch_ids: str | None = None, held: Any = None) -> Any: ...
    def retrack(self) -> int: ...


class SendWindowProto(Protocol):
    """A blocking producer's window of sends in flight and its callbacks' batch (produce_py.SendWindow)."""
    batch: list[tuple[Any, Any, BaseException | None]]
    queued: int
    held: int
    free: int
    @property
    def size(self) -> int: ...
    on_first: Callable[[], object]
    def __init__(self, on_first: Callable[[], object], size: int = 0) -> None: ...
    def open(self, size: int) -> None: ...
    def try_take(self) -> bool: ...
    def take(self, fn: Callable[[Any, BaseException | None], object]) -> Any: ...
    def handback(self, fn: Callable[[Any, BaseException | None], object]) -> Any: ...
    def give(self, n: int) -> None: ...
    def busy(self) -> bool: ...
    def put_releasing(self, fn: Callable[[Any, BaseException | None], object], result: Any,
                      error: BaseException | None) -> None: ...
    def put_plain(self, fn: Callable[[Any, BaseException | None], object], result: Any,
                  error: BaseException | None) -> None: ...
    def swap(self) -> tuple[list[tuple[Any, Any, BaseException | None]], int]: ...


class HandbackProto(Protocol):
    def __call__(self, result: Any, error: BaseException | None) -> None: ...


class ProduceModule(Protocol):
    UniqIds: type
    SendRequestWriter: type
    SendResult: type
    AsyncSend: type
    SendFastPath: type
    SendWindow: type
    Handback: type

    def month_bounds(self, ms: int) -> tuple[int, int]: ...
    def encode_batch(self, messages: Sequence[Any], topic: str, max_body: int, ids: Any) -> tuple[bytes, str] | None: ...


#: stem -> (protocol of the module, {class name: protocol of its instances}) for every compiled module.
TWINS: dict[str, tuple[type, dict[str, type]]] = {
    "acl_check": (AclCheckModule, {"HmacKey": HmacKeyProto, "Gate": GateProto}),
    "batch": (BatchModule, {}),
    "codec": (CodecModule, {"RemotingCommand": RemotingCommandProto, "FrameDecoder": FrameDecoderProto}),
    "end_transaction": (EndTransactionModule, {}),
    "fault": (FaultModule, {"FaultTable": FaultTableProto}),
    "lone_put": (LonePutModule, {"LonePut": LonePutProto}),
    "pull": (PullModule, {}),
    "produce": (ProduceModule, {"UniqIds": UniqIdsProto, "SendRequestWriter": SendRequestWriterProto,
                                "SendResult": SendResultProto, "AsyncSend": AsyncSendProto,
                                "SendFastPath": SendFastPathProto, "SendWindow": SendWindowProto,
                                "Handback": HandbackProto}),
    "record_writer": (RecordWriterModule, {}),
    "records": (RecordsModule, {}),
    "selector": (SelectorModule, {"QueueTable": QueueTableProto}),
    "send": (SendModule, {}),
    "send_batch": (SendBatchModule, {"SendBatch": SendBatchProto}),
    "sql_filter": (SqlFilterModule, {"SqlProgram": SqlProgramProto}),
    "sync_wait": (SyncWaitModule, {}),
    "timer_deliver": (TimerDeliverModule, {}),
    "trace_encode": (TraceEncodeModule, {"PubRows": PubRowsProto, "TracePacker": TracePackerProto}),
}
