"""Request-reply over the broker: RocketMQ 4.9.8's RequestResponseFuture, RequestFutureHolder,
ClientRemotingProcessor.receiveReplyMessage and MessageUtil.createReplyMessage.

A requester (:meth:`Producer.request <fastmq.client.producer.Producer.request>`) marks its
message with ``CORRELATION_ID`` (a new UUID), ``REPLY_TO_CLIENT`` (its client id) and ``TTL``
(the timeout in ms), registers a :class:`PendingRequest` under the correlation id in its client
instance's :class:`RequestTable`, and sends the message as any other. A responder consumes it and
sends :func:`create_reply_message`'s reply; the broker pushes the reply to the requester's
connection (PUSH_REPLY_MESSAGE_TO_CLIENT, 326), where :meth:`RequestTable.receive` completes the
pending request.

A request ends exactly once, in one of three ways: the reply; :class:`RequestSendError` (the
send failed: no reply will come); :class:`RequestTimeoutError` (no reply in time; ``sent`` says
whether the broker had taken the request). A reply that finds no pending request (a second reply,
or one after the timeout) is logged and acknowledged, as 4.9.8 does.
"""
from __future__ import annotations

import asyncio
import logging
import time
import zlib
from typing import Callable

from ..errors import FAQ_SUFFIX, ClientError, RemotingCommandError, RequestSendError, RequestTimeoutError
from ..protocol.codes import ClientErrorCode, ResponseCode
from ..protocol.command import RemotingCommand, response_for
from ..protocol.headers import ReplyMessageRequestHeader
from ..protocol.message import (Message, MessageConst, MessageExt, MessageFormatError, MessageSysFlag, decode_properties,
                                inflate_body)
from ..protocol.topic import reply_topic

__all__ = ["PendingRequest", "RequestCallback", "RequestTable", "create_reply_message"]

log = logging.getLogger("fastmq.client")

#: ``callback(reply, error)``: the reply and None; or None and a RequestSendError or a RequestTimeoutError.
RequestCallback = Callable[[MessageExt | None, BaseException | None], None]


def create_reply_message(request: Message, body: bytes) -> Message:
    """The reply to ``request`` (a request message as consumed), carrying ``body``: RocketMQ's
    ``MessageUtil.createReplyMessage``. Its topic is ``<CLUSTER>_REPLY_TOPIC``, its ``MSG_TYPE``
    ``reply``; it copies the request's ``CORRELATION_ID``, ``REPLY_TO_CLIENT`` and ``TTL``. Send
    it with any producer's ``send``: the producer sends a reply with SEND_REPLY_MESSAGE_V2.

    Raises:
        ClientError: the request has no ``CLUSTER`` property (code 10007,
            CREATE_REPLY_MESSAGE_EXCEPTION): it was not read from a broker.
    """
    if request is None:
        raise ClientError("create reply message fail, requestMessage cannot be null.",
                          ClientErrorCode.CREATE_REPLY_MESSAGE_EXCEPTION)
    props = request.properties
    cluster = props.get(MessageConst.CLUSTER)
    if cluster is None:
        raise ClientError(f"create reply message fail, requestMessage error, property[{MessageConst.CLUSTER}] "
                          "is null.", ClientErrorCode.CREATE_REPLY_MESSAGE_EXCEPTION)
    out = {MessageConst.MESSAGE_TYPE: MessageConst.REPLY_MESSAGE_FLAG}
    for key in (MessageConst.CORRELATION_ID, MessageConst.REPLY_TO_CLIENT, MessageConst.MESSAGE_TTL):
        value = props.get(key)
        if value is not None:  # (Java stores a null and writes nothing for it)
            out[key] = value
    return Message(reply_topic(cluster), bytes(body), properties=out)


class PendingRequest:
    """One request waiting for its reply: RequestResponseFuture. Ends once, through :meth:`finish`."""

    __slots__ = ("correlation_id", "topic", "timeout_ms", "future", "callback", "sent", "timer", "done")

    def __init__(self, correlation_id: str, topic: str, timeout_ms: int,
                 future: "asyncio.Future[MessageExt] | None", callback: RequestCallback | None) -> None:
        self.correlation_id = correlation_id
        self.topic = topic
        self.timeout_ms = timeout_ms
        self.future = future
        self.callback = callback
        self.sent = False  # the broker answered the send with success
        self.timer: asyncio.TimerHandle | None = None
        self.done = False

    def finish(self, reply: MessageExt | None, error: BaseException | None) -> None:
        if self.done:
            return
        self.done = True
        if self.timer is not None:
            self.timer.cancel()
        fut = self.future
        if fut is not None and not fut.done():
            if error is None:
                fut.set_result(reply)  # type: ignore[arg-type]
            else:
                fut.set_exception(error)
        if self.callback is not None:
            try:
                self.callback(reply, error)
            except Exception:  # a user's callback must not break the connection that read the reply
                log.exception("request callback of %s raised", self.correlation_id)


class RequestTable:
    """The requests of one client instance waiting for their replies, by correlation id
    (RocketMQ's RequestFutureHolder; the replies come to this instance's client id)."""

    def __init__(self) -> None:
        self.pending: dict[str, PendingRequest] = {}
        #: replies that found no pending request (a second reply, or one after its timeout)
        self.unmatched = 0

    def add(self, req: PendingRequest, loop: asyncio.AbstractEventLoop, after_ms: int) -> None:
        """Register ``req``; it times out ``after_ms`` from now (what is left of its timeout)."""
        self.pending[req.correlation_id] = req
        req.timer = loop.call_later(after_ms / 1000, self._expire, req.correlation_id)

    def _expire(self, correlation_id: str) -> None:
        req = self.pending.pop(correlation_id, None)
        if req is None:
            return
        if req.sent:
            text = (f"send request message to <{req.topic}> OK, but wait reply message timeout, "
                    f"{req.timeout_ms} ms.")
        else:
            text = (f"send request message to <{req.topic}> not answered by the broker, and no reply message, "
                    f"timeout {req.timeout_ms} ms.")
        log.warning("remove timeout request, CorrelationId=%s", correlation_id)
        req.timer = None
        req.finish(None, RequestTimeoutError(text, req.sent, ClientErrorCode.REQUEST_TIMEOUT_EXCEPTION))

    def sent(self, correlation_id: str, error: BaseException | None) -> None:
        """The request's send ended: taken by the broker, or failed (the request ends now)."""
        req = self.pending.get(correlation_id)
        if req is None:
            return
        if error is None:
            req.sent = True
            return
        del self.pending[correlation_id]
        failed = RequestSendError(f"send request message to <{req.topic}> fail: {error}{FAQ_SUFFIX}",
                                  getattr(error, "code", None))
        failed.__cause__ = error
        req.finish(None, failed)

    def cancel(self, correlation_id: str) -> None:
        """Forget a request whose caller stopped waiting (a cancelled ``await``)."""
        req = self.pending.pop(correlation_id, None)
        if req is not None:
            req.done = True
            if req.timer is not None:
                req.timer.cancel()

    def fail_all(self, error_text: str) -> None:
        """End every pending request (the instance shuts down)."""
        for cid in list(self.pending):
            req = self.pending.pop(cid)
            req.finish(None, RequestTimeoutError(f"{error_text}: no reply to the request to <{req.topic}>",
                                                 req.sent, ClientErrorCode.REQUEST_TIMEOUT_EXCEPTION))

    def receive(self, request: RemotingCommand) -> RemotingCommand:
        """PUSH_REPLY_MESSAGE_TO_CLIENT (326): the reply, rebuilt as a MessageExt, ends the
        request of its CORRELATION_ID; the broker is answered SUCCESS (even when no request
        waits for it), SYSTEM_ERROR "process reply message fail" when the push is unreadable."""
        arrived = int(time.time() * 1000)
        try:
            h = ReplyMessageRequestHeader.decode(request)
            body = request.body or b""
            if h.sysFlag & MessageSysFlag.COMPRESSED:
                try:
                    body = inflate_body(body)
                except (zlib.error, ValueError) as exc:  # 4.9.8 logs it and keeps the compressed body
                    log.warning("err when uncompress constant: %s", exc)
            props = decode_properties(h.properties or "")
            props[MessageConst.REPLY_MESSAGE_ARRIVE_TIME] = str(arrived)
            msg = MessageExt(topic=h.topic, body=body, flag=h.flag, properties=props, queue_id=h.queueId,
                             sys_flag=h.sysFlag, born_timestamp=h.bornTimestamp, born_host=_host(h.bornHost),
                             store_timestamp=h.storeTimestamp, store_host=_host(h.storeHost),
                             reconsume_times=h.reconsumeTimes or 0)
        except (RemotingCommandError, MessageFormatError) as exc:
            log.warning("unknown err when receiveReplyMsg: %s", exc)
            return response_for(request, ResponseCode.SYSTEM_ERROR, "process reply message fail")
        cid = props.get(MessageConst.CORRELATION_ID, "")
        req = self.pending.pop(cid, None)
        if req is None:
            self.unmatched += 1
            log.warning("receive reply message, but not matched any request, CorrelationId: %s , reply from host: %s",
                        cid, h.bornHost)
        else:
            req.finish(msg, None)
        return response_for(request, ResponseCode.SUCCESS)


def _host(addr: str) -> tuple[str, int]:
    host, _, port = addr.rpartition(":")
    try:
        return host.strip("[]"), int(port)
    except ValueError:
        return addr, 0
