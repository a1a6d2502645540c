# cython: language_level=3, embedsignature=True
"""The producer's hot path, compiled twin of ``produce_py`` (read that module for the contract).

What the reference spends per message on Python objects (a header dict of a dozen strings, a
RemotingCommand, the properties string, a frozen dataclass for the result) is C here: the frame
is written from the producer's fixed header pieces into one buffer, UNIQ_KEYs are formatted in
place, and a SUCCESS answer becomes a SendResult without leaving C.

One extension module in three files, in the order of ``produce_py``: ``produce_uniq.pxi``
(UNIQ_KEYs), ``produce_frames.pxi`` (request frames, batch bodies), then here the send's result,
its pending entry (AsyncSend) and the first try (SendFastPath). The includes keep every cdef call
between them a direct C call, as in one file.
"""
cimport cython
from cpython.buffer cimport PyBUF_SIMPLE, PyObject_GetBuffer, PyBuffer_Release
from cpython.bytes cimport PyBytes_AS_STRING, PyBytes_FromStringAndSize, PyBytes_GET_SIZE
from cpython.dict cimport PyDict_GetItem, PyDict_GetItemWithError, PyDict_Next, PyDict_SetItem
from cpython.object cimport PyObject
from libc.stdint cimport int64_t, uint8_t, uint32_t, uint64_t
from libc.string cimport memcpy

from .bigendian cimport put32 as _put32
from .bytebuf cimport ByteBuf, bytebuf_free, bytebuf_reserve
from .properties cimport write_properties
from .wire_facts cimport NAME_VALUE_SEPARATOR, PROPERTY_SEPARATOR
from .codec_c cimport RemotingCommand, command_code
from .trace_encode_c cimport PubRows
from .acl_check_c cimport HmacKey, B64_LEN

import gc
import random
import time
import weakref
import zlib
from asyncio import BaseEventLoop, CancelledError, InvalidStateError
from contextvars import copy_context

from fastmq.protocol import command as _command
from fastmq.protocol.codes import RequestCode
from fastmq.protocol.headers import SEND_V2_NAMES, SendMessageResponseHeader, declared
from fastmq.protocol.message_const import CompressedBody, MessageConst

from .batch_c import encode_batch_body
from .codec_c import LANGUAGE_NAMES, MAX_HEADER_LENGTH

cdef extern from "Python.h":
    Py_ssize_t PyDict_GET_SIZE(object o)
    int PyUnicode_CheckExact(object o)
    int PyUnicode_CHECK_INTERNED(object o)
    void PyObject_GC_Track(object o)
    void PyObject_GC_UnTrack(object o)
    int PyObject_GC_IsTracked(object o)
    const char* PyUnicode_AsUTF8AndSize(object o, Py_ssize_t *size) except NULL
    object PyUnicode_New(Py_ssize_t size, Py_UCS4 maxchar)
    void* PyUnicode_DATA(object o)
    Py_ssize_t PyUnicode_GET_LENGTH(object o)

cdef extern from "<time.h>" nogil:
    ctypedef long time_t
    cdef struct tm:
        int tm_year
        int tm_mon
        int tm_mday
        int tm_hour
        int tm_min
        int tm_sec
    cdef struct timespec:
        time_t tv_sec
        long tv_nsec
    int CLOCK_REALTIME
    int clock_gettime(int clk, timespec* ts)
    tm* gmtime_r(const time_t* t, tm* out)
    time_t timegm(tm* t)

__all__ = ["UniqIds", "SendRequestWriter", "encode_batch", "SendResult", "AsyncSend", "SendFastPath", "month_bounds",
           "SendWindow", "Handback"]

cdef const char* _UHEX = b"0123456789ABCDEF"
cdef uint64_t COUNTER_MASK = 0x3FFFFFFFFFFFFFFF  # the round-robin counter stays a positive int64
cdef const char* _LHEX = b"0123456789abcdef"
# the process's request ids (fastmq.protocol.command.next_opaque): when the fast path is given
# that function it takes the next id from its counter itself, one Python call less per send
cdef object _NEXT_OPAQUE = _command.next_opaque
cdef object _OPAQUES = _command.OPAQUE_COUNTER
# asyncio's own loop clock, which is time.monotonic(): read directly, one Python call less per send
cdef object _LOOP_TIME = BaseEventLoop.time


cdef bytes _letter_key(bytes before, str attr):
    """``before`` + the JSON key of ``attr``'s V2 letter + ``:"`` (the opening quote of its value)."""
    return before + SEND_V2_NAMES[attr].encode("ascii") + b'":"'


cdef str _UNIQ_KEY = MessageConst.UNIQ_CLIENT_MESSAGE_ID_KEYIDX
cdef str _DELAY = MessageConst.DELAY_TIME_LEVEL
cdef str _ZERO = "0"
cdef int _SEND_V2 = RequestCode.SEND_MESSAGE_V2
cdef int _SEND_BATCH = RequestCode.SEND_BATCH_MESSAGE
cdef str _SEND_OK = "SEND_OK"
cdef str _MSG_ID, _QUEUE_ID, _QUEUE_OFFSET
_MSG_ID, _QUEUE_ID, _QUEUE_OFFSET = declared(SendMessageResponseHeader, "msgId", "queueId", "queueOffset")
cdef str _MSG_REGION = MessageConst.MSG_REGION
cdef str _TRACE_SWITCH = MessageConst.TRACE_SWITCH
cdef str _FALSE = "false"
cdef str _TAGS = MessageConst.TAGS
cdef str _KEYS = MessageConst.KEYS
cdef str _PREPARED = MessageConst.TRANSACTION_PREPARED
cdef str _TRUE = "true"
# the fixed pieces between a request's variable header values; the letters are the declaration's
# (protocol/headers.py), laid out once here
cdef bytes _F = _letter_key(b'","', "sysFlag")
cdef bytes _G = _letter_key(b'","', "bornTimestamp")
cdef bytes _H = _letter_key(b'","', "flag")
cdef bytes _I = _letter_key(b'","', "properties")
cdef bytes _JK = _letter_key(b'","', "reconsumeTimes") + b'0' + _letter_key(b'","', "unitMode") + b'false'
cdef bytes _JKL = _JK + _letter_key(b'","', "maxReconsumeTimes") + b'16' + _letter_key(b'","', "batch")
_JK += _letter_key(b'","', "batch")
cdef bytes _BATCH = b'true"}'
cdef bytes _SINGLE = b'false"}'
cdef bytes _BATCH_SIGNED = b'true"'
cdef bytes _SINGLE_SIGNED = b'false"'
# the fields 4.9.8's AclClientRPCHook adds (SessionCredentials' names), after the header's own
cdef str _ACCESS_KEY = "AccessKey"
cdef str _SECURITY_TOKEN = "SecurityToken"
cdef str _SIGNATURE = "Signature"


include "produce_uniq.pxi"


include "produce_frames.pxi"


# ======================================================================= results

@cython.final
@cython.no_gc
@cython.freelist(256)
cdef class SendResult:
    """As the Java client reports it: ``msg_id`` is the client's UNIQ_KEY, ``offset_msg_id`` the
    broker's; immutable, compared and hashed by value.

    Not tracked by the cycle collector (one less object per send for it to scan): a result
    holds strings, an int and a MessageQueue, none of which can refer back to it.
    """

    cdef readonly object status
    cdef readonly object msg_id
    cdef readonly object offset_msg_id
    cdef readonly object message_queue
    cdef readonly object queue_offset
    cdef readonly object region_id
    # the answer's TRACE_ON as sent (a str, or None when absent) or a bool given to __init__:
    # read as ``trace_on`` only by a traced send, so the fast path just keeps what it got
    cdef object trace_switch

    def __init__(self, status, msg_id, offset_msg_id, message_queue, queue_offset, region_id=None, trace_on=True):
        self.status = status
        self.msg_id = msg_id
        self.offset_msg_id = offset_msg_id
        self.message_queue = message_queue
        self.queue_offset = queue_offset
        self.region_id = region_id
        self.trace_switch = trace_on

    @property
    def trace_on(self):
        """False when the broker's answer said ``TRACE_ON=false`` (its ``traceOn``): the send is
        not traced (4.9.8's SendResult.isTraceOn)."""
        t = self.trace_switch
        return t is None or t is True or (t is not False and t != _FALSE)

    def _fields(self) -> tuple:
        return (self.status, self.msg_id, self.offset_msg_id, self.message_queue, self.queue_offset, self.region_id,
                self.trace_on)

    def __eq__(self, other):
        if type(other) is not SendResult:
            return NotImplemented
        return self._fields() == (<SendResult>other)._fields()

    def __ne__(self, other):
        r = self.__eq__(other)
        return r if r is NotImplemented else not r

    def __hash__(self):
        return hash(self._fields())

    def __repr__(self):
        return ("SendResult(status={!r}, msg_id={!r}, offset_msg_id={!r}, message_queue={!r}, queue_offset={!r}, "
                "region_id={!r}, trace_on={!r})".format(*self._fields()))

    def __reduce__(self):
        return (SendResult, self._fields())


cdef inline SendResult _result(object status, object msg_id, object offset_msg_id, object mq, object qoff,
                               object region, object trace_switch):
    cdef SendResult r = SendResult.__new__(SendResult)
    r.status = status
    r.msg_id = msg_id
    r.offset_msg_id = offset_msg_id
    r.message_queue = mq
    r.queue_offset = qoff
    r.region_id = region
    r.trace_switch = trace_switch
    return r


# the property names a Pub record reads are interned (names in fastmq's source): an interned key
# of a message's properties that is none of them is no other spelling of them either
cdef bint _TRACE_NAMES_INTERNED = all(PyUnicode_CHECK_INTERNED(n) for n in (_TAGS, _KEYS, _PREPARED, _DELAY))


cdef bint _trace_props(dict props, PyObject** prepared, PyObject** delay, PyObject** tags,
                       PyObject** keys) noexcept:
    """The four properties a Pub record reads, found in one pass over a small dict whose keys
    are all interned (what fastmq's own Message and send path put there); False when that
    cannot tell (the caller looks them up)."""
    cdef Py_ssize_t pos = 0
    cdef PyObject* k = NULL
    cdef PyObject* v = NULL
    if not _TRACE_NAMES_INTERNED or PyDict_GET_SIZE(props) > 8:
        return False
    while PyDict_Next(props, &pos, &k, &v):
        if k == <PyObject*>_TAGS:
            tags[0] = v
        elif k == <PyObject*>_KEYS:
            keys[0] = v
        elif k == <PyObject*>_PREPARED:
            prepared[0] = v
        elif k == <PyObject*>_DELAY:
            delay[0] = v
        elif not (PyUnicode_CheckExact(<object>k) and PyUnicode_CHECK_INTERNED(<object>k)):
            prepared[0] = delay[0] = tags[0] = keys[0] = NULL
            return False
    return True


cdef _trace_row(AsyncSend entry, object result):
    """An answered asynchronous send of a traced producer: its Pub record written into its
    dispatcher's ``pub_rows`` (trace_encode_c.PubRows) by a C call, with what
    ``client/trace_data.pub_row`` reads; for anything unusual, and for a drop or a wake, the
    dispatcher is called (``append_pub``, what the pure twin always calls, or ``pub_added``)."""
    cdef SendResult r
    cdef PubRows rows = entry._trace_rows
    cdef PyObject* prepared = NULL
    cdef PyObject* delay = NULL
    cdef PyObject* tags_p = NULL
    cdef PyObject* keys_p = NULL
    cdef int code = 0, mtype = 0
    tracer = entry.tracer
    if rows is None:  # (an entry the fast path did not start: its tracer's, when it has them)
        held = getattr(tracer, "pub_rows", None)
        if type(held) is PubRows:
            rows = <PubRows>held
    props = entry.properties
    if rows is None or type(result) is not SendResult or type(props) is not dict or type(entry.body) is not bytes:
        tracer.append_pub(entry, result, entry.trace_begin_ms)
        return
    r = <SendResult>result
    t = r.trace_switch
    # (a text of another length than "false"'s is not it: no comparison for the usual "true")
    if r.region_id is None or not (t is None or t is True or (t is not False and (
            (type(t) is str and PyUnicode_GET_LENGTH(t) != 5) or t != _FALSE))):
        return  # (pub_row's: a broker that does not know traces, or says TRACE_ON=false)
    status = r.status
    try:
        if not _trace_props(<dict>props, &prepared, &delay, &tags_p, &keys_p):
            # (lookups that keep no error state to save and restore, unlike PyDict_GetItem)
            prepared = PyDict_GetItemWithError(props, _PREPARED)
            delay = PyDict_GetItemWithError(props, _DELAY)
            tags_p = PyDict_GetItemWithError(props, _TAGS)
            keys_p = PyDict_GetItemWithError(props, _KEYS)
        # (references of our own first: a comparison below may run a value's own code)
        tags = <object>tags_p if tags_p != NULL else None
        keys = <object>keys_p if keys_p != NULL else None
        tran = <object>prepared if prepared != NULL else None
        level = <object>delay if delay != NULL else None
        if tran is not None and tran == _TRUE:
            mtype = 1
        elif level is not None and level:
            mtype = 3
        mq = r.message_queue
        # (the queue the send started on, whose broker name start read: no attribute lookup)
        broker = entry._trace_broker if mq is entry._trace_mq and mq is not None else mq.broker_name
        code = rows.add_row(entry.trace_begin_ms, _now_ms(), entry.topic, r.msg_id, tags, keys, broker,
                            PyBytes_GET_SIZE(entry.body), mtype, r.offset_msg_id, status is _SEND_OK or status == _SEND_OK,
                            r.region_id)
    except Exception:  # (a field it refuses: append_pub says what, and counts the send's record dropped)
        tracer.append_pub(entry, result, entry.trace_begin_ms)
        return
    if code != 0:
        tracer.pub_added(code)


cdef bint _plain_int(object s, int64_t* out) noexcept:
    """A decimal integer written plainly (what a broker sends); False for anything else."""
    cdef Py_ssize_t n, i = 0
    cdef const char* p
    cdef int64_t v = 0
    cdef bint neg = False
    if type(s) is not str:
        return False
    n = len(<str>s)
    if n == 0 or n > 19 or not (<str>s).isascii():
        return False
    p = <const char*>PyUnicode_DATA(s)
    if p[0] == b"-":
        neg = True
        i = 1
        if n == 1:
            return False
    while i < n:
        if p[i] < b"0" or p[i] > b"9":
            return False
        v = v * 10 + (p[i] - 48)
        i += 1
    out[0] = -v if neg else v
    return True


cdef inline void _track(object o) noexcept:
    if not PyObject_GC_IsTracked(o):
        PyObject_GC_Track(o)


# the future's states, as asyncio's
cdef enum:
    _PENDING = 0
    _CANCELLED = 1
    _FINISHED = 2


@cython.final
cdef class AsyncSend:
    """One asynchronous send: the future its caller holds and the pending entry of its first try
    (see ``produce_py.AsyncSend``, an ``asyncio.Future``). This one keeps asyncio's Future
    protocol itself (``asyncio.isfuture`` is true of it: tasks await it, ``gather``, ``wait``,
    ``wait_for`` and ``shield`` take it), because a compiled class cannot extend the C future."""

    cdef public object context
    cdef public object topic
    cdef public object body
    cdef public object flag
    cdef public object properties
    cdef public object mq
    cdef public object uniq
    cdef public object callback
    cdef public object permits
    cdef public object error
    cdef public object timer
    cdef public int64_t timeout_ms
    cdef public int retries
    cdef public bint batch
    cdef public bint fault
    cdef public bint trace  # the producer traces its sends: keep the answer's TRACE_ON
    # an asynchronous send of a traced producer: its dispatcher, told of the answer as the send
    # ends (``append_pub``), and the wall clock ms it started at
    cdef public object tracer
    cdef PubRows _trace_rows  # the tracer's pub_rows, when the fast path started the send
    cdef object _trace_mq  # the queue the fast path started the send on, and its broker name
    cdef object _trace_broker
    cdef public int64_t trace_begin_ms
    cdef public double begin
    cdef public double deadline
    cdef bint _answered
    cdef bint _released
    # the future's part: what a C future holds, the first callback apart as it keeps it (a task
    # awaiting the send is the usual one, and needs no list)
    cdef object _loop
    cdef int _state
    cdef object _result
    cdef object _exception
    cdef object _exception_tb
    cdef object _cancel_message
    cdef object _cb0
    cdef object _ctx0
    cdef list _callbacks
    cdef bint _log_traceback
    cdef public bint _asyncio_future_blocking

    def __init__(self, context, msg, mq, uniq, loop, callback, permits, int64_t timeout_ms, double begin,
                 double deadline):
        self.context = context
        if msg is None:
            self.topic = self.body = self.flag = self.properties = None
        else:
            self.topic, self.body, self.flag, self.properties = msg.topic, msg.body, msg.flag, msg.properties
        self.mq = mq
        self.uniq = uniq
        self._loop = loop
        self.callback = callback
        self.permits = permits
        self.timeout_ms = timeout_ms
        self.begin = begin
        self.deadline = deadline
        self.retries = 0
        self.fault = False
        self.trace = False

    # ------------------------------------------------------------- the pending entry

    def answered(self) -> bool:
        """True once an answer or a failure reached this send's first try."""
        return self._answered

    def on_response(self, resp) -> None:
        """The broker's answer: a SUCCESS with plain fields completes the send here."""
        cdef RemotingCommand cmd
        cdef int64_t qid = 0, qoff = 0
        cdef PyObject* p
        cdef dict fields
        self._answered = True
        _track(self)
        if type(resp) is RemotingCommand:
            cmd = <RemotingCommand>resp
            code, ext = command_code(cmd), cmd.ext_fields
        else:
            code, ext = resp.code, resp.ext_fields
        if code == 0 and type(ext) is dict:
            fields = <dict>ext  # (typed: its gets below are C calls, not method lookups)
            p = PyDict_GetItem(fields, _MSG_ID)
            msg_id = <object>p if p != NULL else None  # a reference of our own before any Python call
            mq = self.mq
            if type(msg_id) is str \
                    and _plain_int(fields.get(_QUEUE_ID), &qid) and qid == mq.queue_id \
                    and _plain_int(fields.get(_QUEUE_OFFSET), &qoff):
                if self.fault:
                    self.context.update_fault(mq.broker_name, int((self._loop.time() - self.begin) * 1000), False)
                trace_switch = None
                if self.trace:  # (a lookup only a traced send pays for; a str key cannot raise)
                    p = PyDict_GetItemWithError(fields, _TRACE_SWITCH)
                    if p != NULL:
                        trace_switch = <object>p
                self.finish(_result(_SEND_OK, self.uniq, msg_id, mq, qoff, fields.get(_MSG_REGION), trace_switch),
                            None)
                return
        self.context.send_answered(self, resp)

    def on_failure(self, exc) -> None:
        """The try failed before any answer (connection lost, timed out)."""
        self._answered = True
        _track(self)
        self.context.send_failed(self, exc)

    # ------------------------------------------------------------- the send's end

    # (cpdef, both: finish and release are called from here per send, as C calls)
    cpdef release(self):
        """Give the in-flight permit back (once)."""
        if not self._released:
            self._released = True
            if self.permits is not None:
                self.permits.release()

    cpdef finish(self, result, exc):
        """The send is over: permit back, timer off, ``callback(result, exc)``, then the future."""
        self.release()
        if self.timer is not None:
            self.timer.cancel()
            self.timer = None
        if self._state != _PENDING:  # the caller cancelled it
            return
        if self.tracer is not None and result is not None:
            # (its fields only: the record is made later, a batch at a time)
            _trace_row(self, result)
        if self.callback is not None:
            try:
                self.callback(result, exc)
            except Exception as cb_exc:
                self._complete(None, cb_exc)
                return
        self._complete(result, exc)
        if exc is not None and self.callback is not None:
            self._log_traceback = False  # the callback had it: not to be logged as never retrieved

    cdef _complete(self, result, exc):
        if exc is None:
            self._result = result
        else:
            self._exception = exc
            self._exception_tb = exc.__traceback__
            self._log_traceback = True
        self._state = _FINISHED
        self._schedule_callbacks()

    cdef _schedule_callbacks(self):
        cb0 = self._cb0
        if cb0 is not None:
            ctx0 = self._ctx0
            self._cb0 = self._ctx0 = None
            self._loop.call_soon(cb0, self, context=ctx0)
        callbacks = self._callbacks
        if callbacks is not None:
            self._callbacks = None
            for cb, ctx in callbacks:
                self._loop.call_soon(cb, self, context=ctx)

    # ------------------------------------------------------------- asyncio's Future protocol

    def set_result(self, result) -> None:
        raise RuntimeError("a send's future is completed by the send only")

    def set_exception(self, exception) -> None:
        raise RuntimeError("a send's future is completed by the send only")

    def get_loop(self):
        """The loop the send runs on."""
        return self._loop

    def done(self) -> bool:
        """True once the send is over (or cancelled)."""
        return self._state != _PENDING

    def cancelled(self) -> bool:
        return self._state == _CANCELLED

    def cancel(self, msg=None) -> bool:
        """Cancel the caller's wait; a request already written is not recalled (its answer is
        taken, then dropped)."""
        self._log_traceback = False
        if self._state != _PENDING:
            return False
        self._state = _CANCELLED
        self._cancel_message = msg
        self._schedule_callbacks()
        return True

    cdef _settled(self, str not_ready):
        """Raise unless the send finished (CancelledError, or InvalidStateError(``not_ready``));
        its error now counts as seen."""
        if self._state == _CANCELLED:
            raise CancelledError() if self._cancel_message is None else CancelledError(self._cancel_message)
        if self._state != _FINISHED:
            raise InvalidStateError(not_ready)
        self._log_traceback = False

    def result(self):
        """The SendResult; raises the send's error, CancelledError, or InvalidStateError while it runs."""
        self._settled("Result is not ready.")
        if self._exception is not None:
            raise self._exception.with_traceback(self._exception_tb)
        return self._result

    def exception(self):
        """The send's error or None; raises CancelledError, or InvalidStateError while it runs."""
        self._settled("Exception is not set.")
        return self._exception

    def add_done_callback(self, fn, *, context=None) -> None:
        """``fn(self)`` on the loop once the send is over, in ``context`` (a copy of the current one)."""
        if context is None:
            context = copy_context()
        if self._state != _PENDING:
            self._loop.call_soon(fn, self, context=context)
        elif self._cb0 is None and not self._callbacks:
            self._cb0, self._ctx0 = fn, context
        else:
            if self._callbacks is None:
                self._callbacks = []
            self._callbacks.append((fn, context))

    def remove_done_callback(self, fn) -> int:
        """Forget every ``fn`` added; returns how many."""
        cdef int n = 0
        if self._cb0 is not None and self._cb0 == fn:
            self._cb0 = self._ctx0 = None
            n = 1
        if self._callbacks:
            kept = [(cb, ctx) for cb, ctx in self._callbacks if cb != fn]
            n += len(self._callbacks) - len(kept)
            self._callbacks = kept or None
        return n

    def __await__(self):
        if self._state == _PENDING:
            self._asyncio_future_blocking = True
            yield self
        if self._state == _PENDING:
            raise RuntimeError("await wasn't used with future")
        return self.result()

    def __iter__(self):
        return self.__await__()

    def __del__(self):
        if self._log_traceback and self._state == _FINISHED and self._loop is not None:
            self._loop.call_exception_handler({
                "message": f"{type(self).__name__} exception was never retrieved",
                "exception": self._exception,
                "future": self,
            })

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {('pending', 'cancelled', 'finished')[self._state]} {self.mq!r}>"


@cython.final
cdef class SendFastPath:
    """The first try of a producer's sends, or None (see ``produce_py.SendFastPath``)."""

    cdef public object context
    cdef public SendRequestWriter writer
    cdef public UniqIds ids
    cdef public object next_opaque
    cdef public bint running
    cdef public uint64_t counter
    # the producer's settings, kept here by the producer whenever one is set (a C field read per
    # send rather than a lookup in the producer's __dict__)
    cdef public int64_t max_message_size
    cdef public int64_t compress_over
    cdef public bint send_latency_fault_enable
    # set by a producer with trace on: its sends keep the answer's TRACE_ON in their results
    cdef public bint trace
    # set by a producer with trace on (``tracer``): the dispatcher its asynchronous sends tell as
    # they end, and its pub_rows, which they write their records into
    cdef object _tracer
    cdef PubRows _trace_rows
    # set by the producer while a broker is marked unreachable (see produce_py.SendFastPath)
    cdef public bint avoid_unreachable
    cdef public int64_t send_msg_timeout
    cdef public int retry_times_when_send_failed
    cdef public int retry_times_when_send_async_failed
    # what the context gives (the producer's containers, never rebound; its calls), looked up once
    cdef set _good_topics
    cdef dict _publish
    cdef object _permits
    cdef object _open
    cdef object _select
    cdef object _loop
    cdef object _time
    # the connections whose pending tables may hold sends of ours the collector does not see
    cdef set _untracked_in
    cdef object _last_conn
    cdef object __weakref__

    def __init__(self, context, SendRequestWriter writer, UniqIds ids, next_opaque):
        self.context = context
        self.writer = writer
        self.ids = ids
        self.next_opaque = next_opaque
        self.running = False
        self.loop = None
        self.counter = random.randrange(1 << 30)
        # the settings stay 0 (the fast path takes no send) until the producer sets them
        self._good_topics = context.good_topics
        self._publish = context.publish
        self._permits = context.permits
        self._open = context.open_connection
        self._select = context.select
        self._untracked_in = set()
        _FAST_PATHS.add(self)

    @property
    def tracer(self):
        """The trace dispatcher of a producer with trace on (its asynchronous sends tell it as
        they end), or None."""
        return self._tracer

    @tracer.setter
    def tracer(self, tracer):
        self._tracer = tracer
        rows = getattr(tracer, "pub_rows", None)
        self._trace_rows = <PubRows>rows if type(rows) is PubRows else None

    @property
    def loop(self):
        """The loop the producer's connections live on (None when it is not running)."""
        return self._loop

    @loop.setter
    def loop(self, loop):
        self._loop = loop
        if loop is None:
            self._time = None
        else:
            clock = loop.time
            self._time = time.monotonic if getattr(clock, "__func__", None) is _LOOP_TIME else clock

    cpdef uint64_t next_counter(self):
        """The round-robin counter, one step on (it wraps, staying a positive int64)."""
        self.counter = (self.counter + 1) & COUNTER_MASK
        return self.counter

    def passes(self, msg) -> bool:
        """True when ``msg`` passes what a send checks before sending (the producer's
        ``check_message``): the fast path runs, the topic passed validation before, and the
        body is bytes, not empty and within ``max_message_size``. False says nothing: the
        producer's own checks then decide (the blocking facade calls this per send_async, a C
        call where check_message is a Python one)."""
        if not self.running:
            return False
        body = msg.body
        if type(body) is not bytes or PyBytes_GET_SIZE(body) == 0 or PyBytes_GET_SIZE(body) > self.max_message_size:
            return False
        return msg.topic in self._good_topics

    def start(self, msg, callback, timeout_ms, bint awaited=False, batch_ids=None, held=None):
        """The future of ``msg``'s send with its first try queued, or None (nothing queued)."""
        cdef Py_ssize_t n
        cdef int sys_flag = 0
        cdef int64_t tmo, born
        cdef double now
        cdef PyObject* p
        cdef AsyncSend entry
        if not self.running:
            return None
        topic = msg.topic
        body = msg.body
        props = msg.properties
        if type(body) is not bytes:
            if type(body) is not CompressedBody or batch_ids is not None:
                return None
            sys_flag = 1  # compressed already (a trace dispatcher's thread does): sent as it is
        if type(props) is not dict or topic not in self._good_topics:
            return None
        n = PyBytes_GET_SIZE(body)
        if n == 0 or n > self.max_message_size:
            return None
        if sys_flag == 0 and batch_ids is None and n >= self.compress_over:  # (tryToCompressMessage: >=)
            body = zlib.compress(body, 5)
            sys_flag = 1  # MessageSysFlag.COMPRESSED
        p = PyDict_GetItem(self._publish, topic)
        if p == NULL:
            return None
        info = <object>p
        queues = info.queues
        if not queues:
            return None
        if self.send_latency_fault_enable or self.avoid_unreachable:
            chosen = self._select(info)
        else:
            chosen = queues[info.table.select(self.next_counter(), -1)]
        broker_name = chosen.broker_name
        addr = info.masters.get(broker_name)
        if addr is None:
            return None
        conn = self._open(addr)
        if conn is None:
            return None
        if batch_ids is not None:
            uniq = batch_ids
        else:
            p = PyDict_GetItem(props, _UNIQ_KEY)
            if p != NULL and <object>p:
                uniq = <object>p
            else:
                uniq = self.ids.next()
                PyDict_SetItem(props, _UNIQ_KEY, uniq)
        if self.next_opaque is _NEXT_OPAQUE:
            opaque = next(_OPAQUES) & 0x7FFFFFFF  # (next_opaque's body)
        else:
            opaque = self.next_opaque()
        born = _now_ms()
        try:
            frame = self.writer.frame(opaque, topic, chosen.queue_id, sys_flag, born, msg.flag, props, body,
                                      batch_ids is not None)
        except (ValueError, TypeError):
            return None  # the general path raises the typed error for it
        now = self._time()
        tmo = self.send_msg_timeout if timeout_ms is None else int(timeout_ms)
        entry = AsyncSend.__new__(AsyncSend)
        entry.context = self.context
        entry.topic = topic
        entry.body = msg.body  # as given: a retry compresses it again for itself
        entry.flag = msg.flag
        entry.properties = props
        entry.mq = chosen
        entry.uniq = uniq
        entry._loop = self._loop
        entry.callback = callback
        entry.permits = held if awaited else self._permits
        entry.timeout_ms = tmo
        entry.retries = self.retry_times_when_send_failed if awaited else self.retry_times_when_send_async_failed
        entry.batch = batch_ids is not None
        entry.fault = self.send_latency_fault_enable or self.avoid_unreachable
        entry.trace = self.trace
        if self._tracer is not None and batch_ids is None and not awaited:
            entry.tracer = self._tracer
            entry._trace_rows = self._trace_rows
            entry._trace_mq = chosen
            entry._trace_broker = broker_name
            entry.trace_begin_ms = born  # (the born timestamp's clock read: both are the send's start)
        entry.begin = now
        entry.deadline = now + tmo / 1000.0
        conn.start_frame(opaque, frame, entry)
        if awaited:
            conn.expire_at(opaque, entry.deadline)
        elif not entry._answered:  # still in the table: hidden from the cycle collector (see the end)
            if conn is not self._last_conn:  # first, so that a full collection finds every such entry
                self._untracked_in.add(conn)
                self._last_conn = conn
            PyObject_GC_UnTrack(entry)
        return entry

    def retrack(self) -> int:
        """Hand the sends in flight back to the cycle collector (before each full collection);
        returns how many. Forgets the connections that are closed and hold none."""
        cdef int n = 0
        for conn in list(self._untracked_in):
            for entry in conn.entries():  # those awaiting answers, and those flow control holds back
                if type(entry) is AsyncSend and not PyObject_GC_IsTracked(entry):
                    PyObject_GC_Track(entry)
                    n += 1
            if conn.closed and not conn.pending:
                self._untracked_in.discard(conn)
                if conn is self._last_conn:
                    self._last_conn = None
        return n


# Why sends in flight are hidden from the cycle collector, and why that is safe.
#
# A pipelining producer keeps thousands of sends in flight; each lives long enough to reach the
# oldest generation, and they made full collections a quarter of send_async's time. A send in
# flight is always reachable from its connection's pending table, so the collector has nothing
# to find in it: SendFastPath.start untracks it, and it is tracked again the moment it leaves
# the table (on_response, on_failure). An untracked object only ever keeps what it refers to
# alive, never frees it. The one thing lost would be a cycle through it that became garbage
# while it was in flight (a loop abandoned with its connections open and the producer never
# shut down): before every full collection, _before_full_collection tracks every send in flight
# again, so that collection sees the cycle whole.
_FAST_PATHS = weakref.WeakSet()


def _before_full_collection(phase, info):
    if phase == "start" and info["generation"] == 2:
        for fast in list(_FAST_PATHS):
            fast.retrack()


gc.callbacks.append(_before_full_collection)


# ------------------------------------------------------------------ the blocking producer's window

@cython.final
@cython.auto_pickle(False)  # a producer's live window, never sent anywhere
cdef class SendWindow:
    """A blocking producer's window of sends in flight and the batch of callbacks its loop hands
    to the callback thread (see ``produce_py.SendWindow``). Taking a place and making the send's
    hand-back is one C call; the counters change in C with the GIL held, so no lock guards them."""

    cdef public list batch
    cdef public Py_ssize_t queued  # callbacks queued, ever
    cdef public Py_ssize_t held
    cdef public Py_ssize_t free
    cdef readonly Py_ssize_t size
    cdef public object on_first

    def __init__(self, on_first, Py_ssize_t size=0):
        self.batch = []
        self.queued = 0
        self.held = 0
        self.free = self.size = size
        self.on_first = on_first

    def open(self, Py_ssize_t size) -> None:
        """Set the window's size, every place free (before any send)."""
        self.free = self.size = size

    def try_take(self) -> bool:
        """Take a place if one is free."""
        if self.free > 0:
            self.free -= 1
            return True
        return False

    def take(self, fn):
        """A place and the hand-back of ``fn``: a :class:`Handback`, or None when no place is free."""
        if self.free <= 0:
            return None
        self.free -= 1
        return self._handback(fn)

    def handback(self, fn):
        """The hand-back of ``fn``, for a place taken already (``try_take``)."""
        return self._handback(fn)

    cdef inline Handback _handback(self, fn):
        cdef Handback h = Handback.__new__(Handback)
        h.window = self
        h.fn = fn
        return h

    def give(self, Py_ssize_t n) -> None:
        """Give ``n`` places back."""
        self.free += n

    def busy(self) -> bool:
        """Places are out."""
        return self.free < self.size

    cpdef put_releasing(self, fn, result, error):
        """Queue ``fn(result, error)`` for the callback thread, its place held until the batch's hand-over."""
        self.queued += 1
        self.held += 1
        self.batch.append((fn, result, error))
        if len(self.batch) == 1:
            self.on_first()

    cpdef put_plain(self, fn, result, error):
        """Queue ``fn(result, error)`` for the callback thread (no place held)."""
        self.queued += 1
        self.batch.append((fn, result, error))
        if len(self.batch) == 1:
            self.on_first()

    def swap(self):
        """The batch and the places it holds, both reset: ``(batch, held)``."""
        batch, held = self.batch, self.held
        self.batch = []
        self.held = 0
        return batch, held


@cython.final
@cython.freelist(64)
@cython.auto_pickle(False)  # a send's hand-back, never sent anywhere
cdef class Handback:
    """``fn``'s hand-back: called with a send's ``(result, error)`` on the loop, it queues
    ``fn(result, error)`` for the callback thread (``SendWindow.put_releasing``)."""

    cdef SendWindow window
    cdef object fn

    def __call__(self, result, error):
        self.window.put_releasing(self.fn, result, error)
