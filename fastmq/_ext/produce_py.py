"""The producer's hot path, pure-Python reference of ``produce_c``.

A producer spends its time on five things per message; each is one call here:

- :class:`UniqIds` makes the UNIQ_KEY a producer gives every message (MessageClientIDSetter):
  32 uppercase hex digits, a 20-digit per-process prefix (IPv4 address, pid, a random int32),
  milliseconds since the start of the month (UTC) as 8 digits and a 16-bit counter as 4.
- :class:`SendRequestWriter` writes a whole SEND_MESSAGE_V2 (or SEND_BATCH_MESSAGE) request
  frame: the JSON header a ``RemotingCommand`` with the producer's ext fields would encode to,
  byte for byte, and the body; no command object and no header dict per message.
- :func:`encode_batch` checks the messages of a batch, gives each its UNIQ_KEY and encodes the
  SEND_BATCH_MESSAGE body, or answers ``None`` when a message needs the caller's exact checks
  (a body that is not non-empty ``bytes`` within the limit, another topic, a delay level,
  properties that are not a ``dict``); it changes nothing then.
- :class:`SendFastPath` makes the first try of a send when the producer has all
  it needs at hand (running, a topic already checked, a cached route, an open connection):
  queue chosen, UNIQ_KEY given, frame written and queued on the connection with an
  :class:`AsyncSend` entry, in one call; ``None`` sends the message down the general path.
- :class:`AsyncSend` is both the caller's future of a send and the connection's pending entry
  of its first try: a SUCCESS answer becomes a :class:`SendResult` and completes the future
  without leaving this class; anything else goes back to the producer
  (``context.send_answered`` / ``send_failed``).

Both read nothing of the producer but the :class:`~fastmq._ext._protocols.ProduceContextProto`
it hands them (``context``): its public attributes and calls. The connections come from
``context.open_connection``, which is the client API's ``connection_for_frames``: it gives none
while an RPC hook must see every request, and every send then takes the client API's general
send. The ACL signer alone is no such hook: the :class:`SendRequestWriter` is given its
``RequestSigner`` and signs each frame as the hook would sign the request.

Frame layout (RocketMQ RemotingCommand, JSON header)::

    int32 total = 4 + header_len + body_len | int32 header_len (serialize type 0 in the top byte)
    {"code":310,"extFields":{"a":group,"b":topic,"c":defaultTopic,"d":defaultTopicQueueNums,
     "e":queueId,"f":sysFlag,"g":bornTimestamp,"h":flag,"i":properties,"j":"0","k":"false",
     ["l":"16" on a %RETRY% topic,] "m":batch[,"AccessKey":ak[,"SecurityToken":t],"Signature":s]},
     "flag":0,"language":LANG,"opaque":N,
     "serializeTypeCurrentRPC":"JSON","version":V} | body
"""
from __future__ import annotations

import asyncio
import calendar
import json
import random
import struct
import threading
import time
import zlib
from typing import Any, Callable, Sequence

from ..protocol.codes import RequestCode
from ..protocol.headers import SEND_V2_NAMES, SendMessageResponseHeader, declared
from ..protocol.message_const import CompressedBody, MessageConst
from ._protocols import ProduceContextProto
from .batch_py import _properties, encode_batch_body
from .codec_py import LANGUAGE_NAMES, MAX_HEADER_LENGTH

__all__ = ["UniqIds", "SendRequestWriter", "encode_batch", "SendResult", "AsyncSend", "SendFastPath", "month_bounds",
           "SendWindow", "Handback"]

_FRAME_HEAD = struct.Struct(">ii")
_UNIQ_KEY = MessageConst.UNIQ_CLIENT_MESSAGE_ID_KEYIDX
_MSG_ID, _QUEUE_ID, _QUEUE_OFFSET = declared(SendMessageResponseHeader, "msgId", "queueId", "queueOffset")
_DELAY = MessageConst.DELAY_TIME_LEVEL
_SUCCESS = 0
_SEND_V2, _SEND_BATCH = int(RequestCode.SEND_MESSAGE_V2), int(RequestCode.SEND_BATCH_MESSAGE)
# the fields 4.9.8's AclClientRPCHook adds (SessionCredentials' names), after the header's own
_ACCESS_KEY, _SECURITY_TOKEN, _SIGNATURE = "AccessKey", "SecurityToken", "Signature"


def month_bounds(ms: int) -> tuple[int, int]:
    """The first millisecond of the UTC month holding ``ms``, and of the month after it."""
    t = time.gmtime(ms // 1000)
    start = calendar.timegm((t.tm_year, t.tm_mon, 1, 0, 0, 0)) * 1000
    year, month = (t.tm_year + 1, 1) if t.tm_mon == 12 else (t.tm_year, t.tm_mon + 1)
    return start, calendar.timegm((year, month, 1, 0, 0, 0)) * 1000


class UniqIds:
    """UNIQ_KEYs with one 20-hex-digit ``prefix``; thread-safe, the counter shared by every call."""

    def __init__(self, prefix: str) -> None:
        self.reseed(prefix)

    def reseed(self, prefix: str) -> None:
        """A new prefix, the counter from 0 (a forked child must not repeat its parent's keys).

        Not for use while other threads make keys: it replaces the lock rather than taking it,
        since in a forked child a lock another thread held at the fork stays held forever.
        """
        if len(prefix) != 20 or not prefix.isascii():
            raise ValueError(f"a UNIQ_KEY prefix is 20 ASCII hex digits, not {prefix!r}")
        self._lock = threading.Lock()
        self.prefix = prefix
        self._count = 0
        self._start = self._next = 0

    def _head(self, now_ms: int) -> str:
        if now_ms < 0:
            now_ms = int(time.time() * 1000)
        if not self._start <= now_ms < self._next:
            self._start, self._next = month_bounds(now_ms)
        return f"{self.prefix}{(now_ms - self._start) & 0xFFFFFFFF:08X}"

    def next(self, now_ms: int = -1) -> str:
        """A new UNIQ_KEY (``now_ms`` < 0: the clock's milliseconds)."""
        with self._lock:
            head = self._head(now_ms)
            c = self._count
            self._count = (c + 1) & 0xFFFF
        return f"{head}{c:04X}"

    def take(self, n: int, now_ms: int = -1) -> list[str]:
        """``n`` new UNIQ_KEYs from one clock read, as ``n`` calls of :meth:`next` would make them."""
        with self._lock:
            head = self._head(now_ms)
            c = self._count
            self._count = (c + n) & 0xFFFF
        return [f"{head}{(c + i) & 0xFFFF:04X}" for i in range(n)]


def _json_str(s: str) -> str:
    return json.dumps(s, ensure_ascii=False)


class SendRequestWriter:
    """SEND_MESSAGE_V2 / SEND_BATCH_MESSAGE request frames of one producer group."""

    def __init__(self, group: str, default_topic: str, default_topic_queue_nums: int, language: int,
                 version: int, *, signer: Any = None) -> None:
        """``signer``: sign each frame as 4.9.8's AclClientRPCHook signs a request, or None. An
        object with ``access_key``, ``security_token`` (or None) and ``key`` (an
        ``acl_check.HmacKey`` of the secret): ``fastmq.remoting.request_signer.RequestSigner``,
        whose frames these are byte for byte (its fields after the header's, then
        ``Signature``)."""
        self.signer = signer
        self.group = group
        self.default_topic = default_topic
        self.default_topic_queue_nums = default_topic_queue_nums
        self.language = language
        self.version = version
        lang = LANGUAGE_NAMES[language] if 0 <= language < len(LANGUAGE_NAMES) else "OTHER"
        self._tail = f',"flag":0,"language":"{lang}","opaque":'

    def frame(self, opaque: int, topic: str, queue_id: int, sys_flag: int, born_ms: int, flag: int,
              properties: Any, body: bytes, batch: bool) -> bytes:
        """One whole request frame (``batch``: SEND_BATCH_MESSAGE, else SEND_MESSAGE_V2).

        Raises:
            ValueError: a property name or value holds a separator (``\\x01``/``\\x02``), an
                integer is outside int32 (``opaque``, ``queue_id``, ``sys_flag``, ``flag``), the
                header is over 16 MiB (its length shares a word with the serialize type) or the
                frame over 2 GiB.
        """
        for name, v in (("opaque", opaque), ("queue_id", queue_id), ("sys_flag", sys_flag), ("flag", flag)):
            if not -2147483648 <= v <= 2147483647:
                raise ValueError(f"{name} {v} is outside int32")
        n = SEND_V2_NAMES
        ext = [(n["producerGroup"], self.group), (n["topic"], topic), (n["defaultTopic"], self.default_topic),
               (n["defaultTopicQueueNums"], str(self.default_topic_queue_nums)), (n["queueId"], str(queue_id)),
               (n["sysFlag"], str(sys_flag)), (n["bornTimestamp"], str(born_ms)), (n["flag"], str(flag)),
               (n["properties"], _properties(properties).decode("utf-8")), (n["reconsumeTimes"], "0"),
               (n["unitMode"], "false")]
        if topic.startswith("%RETRY%"):
            ext.append((n["maxReconsumeTimes"], "16"))
        ext.append((n["batch"], "true" if batch else "false"))
        signer = self.signer
        if signer is not None:
            ext.append((_ACCESS_KEY, signer.access_key))
            if signer.security_token is not None:
                ext.append((_SECURITY_TOKEN, signer.security_token))
            ext.append((_SIGNATURE, signer.key.sign(dict(ext), body)))
        fields = ",".join(f"{_json_str(k)}:{_json_str(v)}" for k, v in ext)
        header = (f'{{"code":{_SEND_BATCH if batch else _SEND_V2},"extFields":{{{fields}}}{self._tail}{opaque},'
                  f'"serializeTypeCurrentRPC":"JSON","version":{self.version}}}').encode("utf-8")
        body = bytes(body)
        if len(header) > MAX_HEADER_LENGTH:  # it shares a word with the serialize type
            raise ValueError(f"the request header is {len(header)} bytes, a frame allows {MAX_HEADER_LENGTH}")
        if 4 + len(header) + len(body) > 0x7FFFFFFF:
            raise ValueError(f"a {len(body)}-byte body does not fit in a frame")
        return _FRAME_HEAD.pack(4 + len(header) + len(body), len(header)) + header + body


def encode_batch(messages: Sequence[Any], topic: str, max_body: int, ids: UniqIds) -> tuple[bytes, str] | None:
    """The SEND_BATCH_MESSAGE body of ``messages`` and their UNIQ_KEYs joined by commas, or None.

    None (and nothing changed) when a message needs the caller's own checks: its topic is not
    ``topic``, its body is not non-empty ``bytes`` of at most ``max_body``, it has a DELAY
    property that is not ``0``, or its properties are not a ``dict``. Messages without a
    UNIQ_KEY get one (from one clock read); the body is ``batch_py.encode_batch_body``'s.

    Raises:
        ValueError: as ``encode_batch_body`` (a separator in a property, a flag outside int32).
    """
    need = 0
    for m in messages:
        body, props = m.body, m.properties
        if m.topic != topic or type(body) is not bytes or not body or len(body) > max_body or type(props) is not dict:
            return None
        delay = props.get(_DELAY)
        if delay is not None and delay != "0":
            return None
        if _UNIQ_KEY not in props:
            need += 1
    fresh = iter(ids.take(need)) if need else iter(())
    for m in messages:
        if _UNIQ_KEY not in m.properties:
            m.properties[_UNIQ_KEY] = next(fresh)
    return encode_batch_body(messages), ",".join(m.properties[_UNIQ_KEY] for m in messages)


class SendResult:
    """As the Java client reports it: ``msg_id`` is the client's UNIQ_KEY, ``offset_msg_id`` the
    broker's; immutable, compared and hashed by value."""

    __slots__ = ("status", "msg_id", "offset_msg_id", "message_queue", "queue_offset", "region_id", "trace_on")

    status: str
    msg_id: str
    offset_msg_id: str
    message_queue: Any
    queue_offset: int
    region_id: str | None
    trace_on: bool

    def __init__(self, status: str, msg_id: str, offset_msg_id: str, message_queue: Any, queue_offset: int,
                 region_id: str | None = None, trace_on: bool = True) -> None:
        for name, v in zip(self.__slots__, (status, msg_id, offset_msg_id, message_queue, queue_offset, region_id,
                                            trace_on)):
            object.__setattr__(self, name, v)

    def __setattr__(self, name: str, value: object) -> None:
        raise AttributeError(f"SendResult is immutable: cannot assign to field {name!r}")

    def __delattr__(self, name: str) -> None:
        raise AttributeError(f"SendResult is immutable: cannot delete field {name!r}")

    def _fields(self) -> tuple[str, str, str, Any, int, str | None, bool]:
        return (self.status, self.msg_id, self.offset_msg_id, self.message_queue, self.queue_offset, self.region_id,
                self.trace_on)

    def __eq__(self, other: object) -> bool:
        if type(other) is not type(self):
            return NotImplemented
        return self._fields() == other._fields()

    def __hash__(self) -> int:
        return hash(self._fields())

    def __repr__(self) -> str:
        return ("SendResult(status={!r}, msg_id={!r}, offset_msg_id={!r}, message_queue={!r}, queue_offset={!r}, "
                "region_id={!r}, trace_on={!r})".format(*self._fields()))

    def __reduce__(self) -> tuple[type[SendResult], tuple[str, str, str, Any, int, str | None, bool]]:
        return (type(self), self._fields())


def _plain_int(s: object) -> int | None:
    """A decimal integer written plainly (what a broker sends), else None (the caller's parser decides)."""
    if type(s) is not str or not s or len(s) > 19:
        return None
    digits = s[1:] if s[0] == "-" else s
    if not digits or not digits.isascii() or not digits.isdigit():
        return None
    return int(s)


class AsyncSend(asyncio.Future[SendResult]):
    """One asynchronous send: the future its caller holds, and the pending entry of its first try
    on the connection (``deadline`` on the loop clock, ``timeout_ms`` reported on expiry).

    One object for both because a pipelining caller keeps thousands of sends in flight: each is
    promoted to the cycle collector's oldest generation and walked by every full collection, and
    a separate future and entry made that two objects a send (measured: full collections were a
    quarter of ``send_async``'s time).

    As a pending entry (``answered`` / ``on_response`` / ``on_failure``, see
    ``Connection.pending``): a plain SUCCESS answer becomes a :class:`SendResult` without leaving
    this class; anything else goes back to the producer through ``context`` (``send_answered(entry,
    resp)``, ``send_failed(entry, exc)``), and its ``update_fault`` keeps the latency buckets
    current when ``fault`` (set by the fast path from the producer's ``send_latency_fault_enable``
    as the send started; False until then) is set. ``retries`` is how many more tries the producer
    may make after this one, on its general path; ``batch`` says the message is a SEND_BATCH_MESSAGE
    body (``uniq`` then holds its messages' UNIQ_KEYs, joined by commas).

    As a future: asyncio's, completed only by :meth:`finish` (``set_result`` and
    ``set_exception`` raise, as a Task's do). ``permits`` (or None) gets one ``release()`` when
    the send is over, whatever its end, and ``timer`` (a loop timer handle, or None) is
    cancelled then. Cancelling the future does not recall a request already written: its answer
    is still taken (permit, latency) and then dropped.

    The entry keeps the message's topic, body, flag and properties, not the ``Message``: those are
    all a retry needs, and none is seen by the cycle collector, so a caller's message can die as
    soon as the caller drops it."""

    __slots__ = ("context", "topic", "body", "flag", "properties", "mq", "uniq", "callback", "permits",
                 "timeout_ms", "begin", "deadline", "error", "retries", "batch", "fault", "trace", "tracer",
                 "trace_begin_ms", "timer", "_answered", "_released")

    def __init__(self, context: ProduceContextProto, msg: Any, mq: Any, uniq: str, loop: Any,
                 callback: Callable[..., Any] | None, permits: Any, timeout_ms: int, begin: float,
                 deadline: float) -> None:
        super().__init__(loop=loop)
        self.context = context
        if msg is None:
            self.topic = self.body = self.flag = self.properties = None
        else:
            self.topic, self.body, self.flag, self.properties = msg.topic, msg.body, msg.flag, msg.properties
        self.mq = mq
        self.uniq = uniq
        self.callback = callback
        self.permits = permits
        self.timeout_ms = timeout_ms
        self.begin = begin
        self.deadline = deadline
        self.error: BaseException | None = None
        self.retries = 0
        self.batch = False
        self.fault = False
        self.trace = False  # the producer traces its sends: keep the answer's TRACE_ON
        # an asynchronous send of a traced producer: its dispatcher, told of the answer as the
        # send ends (``append_pub``), and the wall clock ms it started at
        self.tracer: Any = None
        self.trace_begin_ms = 0
        self.timer: Any = None
        self._answered = False
        self._released = False

    # ------------------------------------------------------------- the pending entry

    def answered(self) -> bool:
        """True once an answer or a failure reached this send's first try."""
        return self._answered

    def on_response(self, resp: Any) -> None:
        """The broker's answer: a SUCCESS with plain fields completes the send here."""
        self._answered = True
        ext = resp.ext_fields if resp.code == _SUCCESS else None
        if type(ext) is dict:
            qid = _plain_int(ext.get(_QUEUE_ID))
            qoff = _plain_int(ext.get(_QUEUE_OFFSET))
            msg_id = ext.get(_MSG_ID)
            mq = self.mq
            if qid == mq.queue_id and qoff is not None and type(msg_id) is str:
                if self.fault:
                    self.context.update_fault(mq.broker_name, int((self.get_loop().time() - self.begin) * 1000),
                                              False)
                self.finish(SendResult("SEND_OK", self.uniq, msg_id, mq, qoff, ext.get(MessageConst.MSG_REGION),
                                       not self.trace or ext.get(MessageConst.TRACE_SWITCH) != "false"), None)
                return
        self.context.send_answered(self, resp)

    def on_failure(self, exc: BaseException) -> None:
        """The try failed before any answer (connection lost, timed out)."""
        self._answered = True
        self.context.send_failed(self, exc)

    # ------------------------------------------------------------- the send's end

    def release(self) -> None:
        """Give the in-flight permit back (once)."""
        if not self._released:
            self._released = True
            if self.permits is not None:
                self.permits.release()

    def finish(self, result: Any, exc: BaseException | None) -> None:
        """The send is over: permit back, timer off, ``callback(result, exc)``, then the future. A
        callback that raises fails the future with its error."""
        self.release()
        if self.timer is not None:
            self.timer.cancel()
            self.timer = None
        if self.done():  # the caller cancelled it
            return
        if self.tracer is not None and result is not None:
            # (its fields only: the record is made later, a batch at a time)
            self.tracer.append_pub(self, result, self.trace_begin_ms)
        if self.callback is not None:
            try:
                self.callback(result, exc)
            except Exception as cb_exc:
                _FUTURE_SET_EXCEPTION(self, cb_exc)
                return
        if exc is not None:
            _FUTURE_SET_EXCEPTION(self, exc)
            if self.callback is not None:
                self.exception()  # the callback had it: not to be logged as never retrieved
        else:
            _FUTURE_SET_RESULT(self, result)

    def set_result(self, result: Any) -> None:
        raise RuntimeError("a send's future is completed by the send only")

    def set_exception(self, exception: Any) -> None:
        raise RuntimeError("a send's future is completed by the send only")


_FUTURE_SET_RESULT = asyncio.Future.set_result
_FUTURE_SET_EXCEPTION = asyncio.Future.set_exception


class SendFastPath:
    """The first try of a producer's sends, or None when the general path must take it.

    ``context`` is what the producer hands it (a ``ProduceContextProto``); what this reads of
    it, once: ``good_topics`` (topic names already validated), ``publish`` (topic -> publish
    info with ``queues``, ``table`` and ``masters``), ``permits`` (the in-flight permits, or
    None), ``open_connection`` (None: no frame may be written there now) and ``select``, called
    per send when ``send_latency_fault_enable``. The producer keeps its settings here as it sets them
    (``max_message_size``, ``compress_over``, ``send_latency_fault_enable``,
    ``send_msg_timeout``, ``retry_times_when_send_failed``,
    ``retry_times_when_send_async_failed``: the compiled twin reads them as C fields), gives it a
    new ``writer`` when ``default_topic_queue_nums`` changes, and sets ``running`` and ``loop``
    (the loop the producer's connections live on: asking asyncio for it costs a getpid() system
    call on Python 3.11). ``avoid_unreachable`` is set while the producer has a broker marked
    unreachable: the queue is then chosen by ``select`` (which passes over such brokers), and the
    try's outcome reported through ``update_fault`` (a send that gets through marks its broker
    reachable again), as with ``send_latency_fault_enable``.
    """

    def __init__(self, context: ProduceContextProto, writer: SendRequestWriter, ids: UniqIds,
                 next_opaque: Callable[[], int]) -> None:
        self.context = context
        self.writer = writer
        self.ids = ids
        self.next_opaque = next_opaque
        self.running = False
        self.loop: Any = None  # the producer's event loop, set with ``running``
        self.counter = random.randrange(1 << 30)  # round robin from a random start, as the Java client
        # the producer's settings: none of its sends taken until it sets them (it does as it is built)
        self.max_message_size = self.compress_over = self.send_msg_timeout = 0
        self.retry_times_when_send_failed = self.retry_times_when_send_async_failed = 0
        self.send_latency_fault_enable = False
        self.trace = False  # set by a producer with trace on (see AsyncSend.trace)
        self.tracer: Any = None  # set by a producer with trace on (see AsyncSend.tracer)
        self.avoid_unreachable = False
        self._good_topics = context.good_topics
        self._publish = context.publish
        self._permits = context.permits
        self._open = context.open_connection
        self._select = context.select

    def next_counter(self) -> int:
        """The round-robin counter, one step on (it wraps, staying a positive int64)."""
        self.counter = (self.counter + 1) & 0x3FFFFFFFFFFFFFFF
        return self.counter

    def passes(self, msg: Any) -> bool:
        """True when ``msg`` passes what a send checks before sending (the producer's
        ``check_message``): the fast path runs, the topic passed validation before, and the
        body is bytes, not empty and within ``max_message_size``. False says nothing: the
        producer's own checks then decide (the blocking facade calls this per send_async, a C
        call where check_message is a Python one)."""
        body = msg.body
        return (self.running and type(body) is bytes and 0 < len(body) <= self.max_message_size
                and msg.topic in self._good_topics)

    def start(self, msg: Any, callback: Callable[..., Any] | None, timeout_ms: int | None, awaited: bool = False,
              batch_ids: str | None = None, held: Any = None) -> Any:
        """The future of ``msg``'s send with its first try queued, or None (nothing queued).

        ``awaited``: a caller waits for it (``send``): the producer's ``retry_times_when_send_failed``
        applies, no in-flight permit is taken (the caller holds one), and a timer fails the try at
        its deadline (the once-a-second scan would be up to a second late). Otherwise it is an
        asynchronous send: ``retry_times_when_send_async_failed``, a permit of ``permits``, the
        scan. ``batch_ids``: ``msg.body`` is a SEND_BATCH_MESSAGE body of messages with these
        UNIQ_KEYs (never compressed). ``held``: with ``awaited``, the permit the caller took for
        the send (its ``release()`` is called once, as the send ends, before ``callback``), or None.
        """
        if not self.running:
            return None
        topic, body, props = msg.topic, msg.body, msg.properties
        sys_flag = 0
        if type(body) is not bytes:
            if type(body) is not CompressedBody or batch_ids is not None:
                return None
            sys_flag = 1  # compressed already (a trace dispatcher's thread does): sent as it is
        if (topic not in self._good_topics or not body or len(body) > self.max_message_size
                or type(props) is not dict):
            return None
        if not sys_flag and batch_ids is None and len(body) >= self.compress_over:  # (tryToCompressMessage: >=)
            body = zlib.compress(body, 5)
            sys_flag = 1  # MessageSysFlag.COMPRESSED
        info = self._publish.get(topic)
        if info is None or not info.queues:
            return None
        if self.send_latency_fault_enable or self.avoid_unreachable:
            chosen = self._select(info)
        else:
            chosen = info.queues[info.table.select(self.next_counter(), -1)]
        addr = info.masters.get(chosen.broker_name)
        if addr is None:
            return None
        conn = self._open(addr)
        if conn is None:
            return None
        uniq: str | None
        if batch_ids is not None:
            uniq = batch_ids
        else:
            uniq = props.get(_UNIQ_KEY)
            if not uniq:
                uniq = props[_UNIQ_KEY] = self.ids.next()
        opaque = self.next_opaque()
        try:
            frame = self.writer.frame(opaque, topic, chosen.queue_id, sys_flag, int(time.time() * 1000), msg.flag,
                                      props, body, batch_ids is not None)
        except (ValueError, TypeError):
            return None  # the general path raises the typed error for it
        loop = self.loop
        now = loop.time()
        timeout_ms = self.send_msg_timeout if timeout_ms is None else int(timeout_ms)
        entry = AsyncSend(self.context, msg, chosen, uniq, loop, callback, held if awaited else self._permits,
                          timeout_ms, now, now + timeout_ms / 1000)
        entry.retries = self.retry_times_when_send_failed if awaited else self.retry_times_when_send_async_failed
        entry.batch = batch_ids is not None
        entry.fault = self.send_latency_fault_enable or self.avoid_unreachable
        entry.trace = self.trace
        if self.tracer is not None and batch_ids is None and not awaited:
            entry.tracer = self.tracer
            entry.trace_begin_ms = int(time.time() * 1000)
        conn.start_frame(opaque, frame, entry)
        if awaited:
            conn.expire_at(opaque, entry.deadline)
        return entry

    def retrack(self) -> int:
        """Hand the sends in flight back to the cycle collector; returns how many. The compiled
        twin hides an async send from the collector while its connection's pending table holds
        it (see the note at the end of ``produce_c``) and calls this before every full
        collection; Python code cannot untrack an object, so here there is never any."""
        return 0


class SendWindow:
    """A blocking producer's window of sends in flight, and the batch of callbacks its loop hands
    to the callback thread (``fastmq._driven.Callbacks``).

    The window: ``size`` places, one taken per ``send_async`` (``take``: None when none is free;
    the caller waits for one in Python and then takes ``handback``) and given back ``give(n)``
    when the callback thread is handed the batch that holds them. The batch: ``(fn, result,
    error)`` tuples in the order the loop queued them, ``queued`` the count ever queued, ``held``
    the places its entries hold; ``on_first()`` is called as the batch goes from empty to one
    entry (it schedules the hand-over), ``swap()`` takes the batch.

    The batch and its counters change only on the loop (by its driver, one thread at a time);
    the places change from any thread: the compiled twin changes them in C with the GIL held,
    this one under a lock (a Python ``-=`` is three steps another thread can come between)."""

    def __init__(self, on_first: Callable[[], object], size: int = 0) -> None:
        self.batch: list[tuple[Any, Any, BaseException | None]] = []
        self.queued = 0
        self.held = 0
        self.free = self.size = size
        self.on_first = on_first
        self._lock = threading.Lock()

    def open(self, size: int) -> None:
        """Set the window's size, every place free (before any send)."""
        self.free = self.size = size

    def try_take(self) -> bool:
        """Take a place if one is free."""
        with self._lock:
            if self.free > 0:
                self.free -= 1
                return True
            return False

    def take(self, fn: Callable[[Any, BaseException | None], object]) -> "Handback | None":
        """A place and the hand-back of ``fn``: a :class:`Handback`, or None when no place is free."""
        if not self.try_take():
            return None
        return Handback(self, fn)

    def handback(self, fn: Callable[[Any, BaseException | None], object]) -> "Handback":
        """The hand-back of ``fn``, for a place taken already (``try_take``)."""
        return Handback(self, fn)

    def give(self, n: int) -> None:
        """Give ``n`` places back."""
        with self._lock:
            self.free += n

    def busy(self) -> bool:
        """Places are out."""
        return self.free < self.size

    def put_releasing(self, fn: Callable[[Any, BaseException | None], object], result: Any,
                      error: BaseException | None) -> None:
        """Queue ``fn(result, error)`` for the callback thread, its place held until the batch's hand-over."""
        self.queued += 1
        self.held += 1
        self.batch.append((fn, result, error))
        if len(self.batch) == 1:
            self.on_first()

    def put_plain(self, fn: Callable[[Any, BaseException | None], object], result: Any,
                  error: BaseException | None) -> None:
        """Queue ``fn(result, error)`` for the callback thread (no place held)."""
        self.queued += 1
        self.batch.append((fn, result, error))
        if len(self.batch) == 1:
            self.on_first()

    def swap(self) -> tuple[list[tuple[Any, Any, BaseException | None]], int]:
        """The batch and the places it holds, both reset: ``(batch, held)``."""
        batch, held = self.batch, self.held
        self.batch = []
        self.held = 0
        return batch, held


class Handback:
    """``fn``'s hand-back: called with a send's ``(result, error)`` on the loop, it queues
    ``fn(result, error)`` for the callback thread (``SendWindow.put_releasing``)."""

    __slots__ = ("window", "fn")

    def __init__(self, window: SendWindow, fn: Callable[[Any, BaseException | None], object]) -> None:
        self.window = window
        self.fn = fn

    def __call__(self, result: Any, error: BaseException | None) -> None:
        self.window.put_releasing(self.fn, result, error)
