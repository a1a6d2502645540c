"""Where trace events come from: RocketMQ 4.9.8's SendMessageTraceHookImpl,
ConsumeMessageTraceHookImpl and EndTransactionTraceHookImpl, as functions of what a send, a
listener call or an END_TRANSACTION saw.

- A send answered by a broker gives a ``Pub`` event (none for a send that failed without an
  answer, for a oneway send, or for a send to the trace topic itself; none when the answer has
  no ``MSG_REGION``, the mark of a broker that does not know about traces, as in 4.9.8).
- A listener call gives a ``SubBefore`` event (one record per message) before it runs and a
  ``SubAfter`` after: success when it returned CONSUME_SUCCESS, with the ConsumeReturnType
  ordinal as ``contextCode`` (SUCCESS, EXCEPTION, RETURNNULL or FAILED). A message whose
  ``TRACE_ON`` property is ``false`` is left out, as in 4.9.8.
- An END_TRANSACTION sent by a transactional producer gives an ``EndTransaction`` event.
"""
from __future__ import annotations

import functools
import inspect
import time
from typing import Any, Awaitable, Callable, Sequence

from ..protocol.message import Message, MessageConst, MessageExt
from .message_id import create_uniq_id
from .trace_data import DEFAULT_REGION, ConsumeReturnType, MessageType, TraceBean, TraceContext, TraceType
from .trace_dispatcher import TraceDispatcher

__all__ = ["pub_context", "end_transaction_context", "sub_before", "sub_after", "traced_listener", "now_ms",
           "message_type"]

_SUCCESS_STATUSES = frozenset(("CONSUME_SUCCESS", "SUCCESS"))


def now_ms() -> int:
    return int(time.time() * 1000)


def message_type(msg: Message) -> MessageType:
    """What sendKernelImpl tells the hook: a half, a delayed message, or a normal one."""
    p = msg.properties
    if p.get(MessageConst.TRANSACTION_PREPARED) == "true":
        return MessageType.Trans_Msg_Half
    if p.get(MessageConst.DELAY_TIME_LEVEL):
        return MessageType.Delay_Msg
    return MessageType.Normal_Msg


def pub_context(group: str, msg: Message, msg_id: str, offset_msg_id: str | None, status_ok: bool,
                region_id: str | None, store_host: str | None, begin_ms: int, count: int = 1) -> TraceContext | None:
    """The Pub event of one message sent at ``begin_ms`` and answered now (None: no event).
    ``count``: messages that shared the send (a batch), over which its time is divided."""
    if region_id is None:
        return None
    cost = (now_ms() - begin_ms) // max(1, count)
    bean = TraceBean(topic=msg.topic, msg_id=msg_id, offset_msg_id=offset_msg_id, tags=msg.tags,
                     keys=msg.properties.get(MessageConst.KEYS), store_host=store_host, body_length=len(msg.body),
                     msg_type=message_type(msg), store_time=begin_ms + cost // 2)
    return TraceContext(TraceType.Pub, begin_ms, region_id, group, cost_time=cost, success=status_ok, beans=[bean])


def end_transaction_context(group: str, msg: Message, msg_id: str, store_host: str | None, state: str,
                            transaction_id: str | None, from_check: bool) -> TraceContext:
    """The EndTransaction event of the half ``msg_id`` ended as ``state`` (a LocalTransactionState name)."""
    bean = TraceBean(topic=msg.topic, msg_id=msg_id, tags=msg.tags, keys=msg.properties.get(MessageConst.KEYS),
                     store_host=store_host, msg_type=MessageType.Trans_msg_Commit, transaction_id=transaction_id,
                     transaction_state=state, from_transaction_check=from_check)
    region = msg.properties.get(MessageConst.MSG_REGION) or DEFAULT_REGION
    return TraceContext(TraceType.EndTransaction, now_ms(), region, group, beans=[bean])


def _consumer_msg_id(m: MessageExt) -> str:
    """MessageClientExt.getMsgId: the producer's UNIQ_KEY, else the offset id."""
    return m.properties.get(MessageConst.UNIQ_CLIENT_MESSAGE_ID_KEYIDX) or m.msg_id


def sub_before(group: str, msgs: Sequence[MessageExt]) -> TraceContext:
    """The SubBefore event of a listener call about to start (its beans may be empty)."""
    ctx = TraceContext(TraceType.SubBefore, group_name=group, request_id=create_uniq_id())
    for m in msgs:
        p = m.properties
        if p.get(MessageConst.TRACE_SWITCH) == "false":
            continue
        ctx.region_id = p.get(MessageConst.MSG_REGION)
        ctx.beans.append(TraceBean(topic=m.topic, msg_id=_consumer_msg_id(m), tags=m.tags,
                                   keys=p.get(MessageConst.KEYS), store_time=m.store_timestamp,
                                   body_length=m.store_size, retry_times=m.reconsume_times))
    ctx.time_stamp = now_ms()
    return ctx


def sub_after(before: TraceContext, n: int, success: bool, code: ConsumeReturnType) -> TraceContext:
    """The SubAfter event of the call ``before`` started, over ``n`` messages."""
    cost = (now_ms() - before.time_stamp) // max(1, n)
    return TraceContext(TraceType.SubAfter, before.time_stamp, before.region_id, before.group_name, cost_time=cost,
                        success=success, request_id=before.request_id, context_code=int(code), beans=before.beans)


def _outcome(status: object) -> tuple[bool, ConsumeReturnType]:
    if status is None:
        return False, ConsumeReturnType.RETURNNULL
    if status in _SUCCESS_STATUSES:
        return True, ConsumeReturnType.SUCCESS
    return False, ConsumeReturnType.FAILED


def traced_listener(listener: Callable[[list[MessageExt]], Any], group: str,
                    dispatcher: TraceDispatcher) -> Callable[[list[MessageExt]], Any]:
    """``listener`` with a SubBefore event before each call and a SubAfter after (an ``async
    def`` stays one)."""
    if inspect.iscoroutinefunction(listener):
        alistener: Callable[[list[MessageExt]], Awaitable[Any]] = listener

        @functools.wraps(listener)
        async def traced_async(msgs: list[MessageExt]) -> Any:
            before = _begin(group, msgs, dispatcher)
            try:
                status = await alistener(msgs)
            except BaseException:
                _end(before, msgs, dispatcher, False, ConsumeReturnType.EXCEPTION)
                raise
            _end(before, msgs, dispatcher, *_outcome(status))
            return status
        return traced_async

    @functools.wraps(listener)
    def traced(msgs: list[MessageExt]) -> Any:
        before = _begin(group, msgs, dispatcher)
        try:
            status = listener(msgs)
        except BaseException:
            _end(before, msgs, dispatcher, False, ConsumeReturnType.EXCEPTION)
            raise
        _end(before, msgs, dispatcher, *_outcome(status))
        return status
    return traced


def _begin(group: str, msgs: Sequence[MessageExt], dispatcher: TraceDispatcher) -> TraceContext:
    before = sub_before(group, msgs)
    if before.beans:
        dispatcher.append(before)
    return before


def _end(before: TraceContext, msgs: Sequence[MessageExt], dispatcher: TraceDispatcher, success: bool,
         code: ConsumeReturnType) -> None:
    if before.beans:
        dispatcher.append(sub_after(before, len(msgs), success, code))
