"""SEND_REPLY_MESSAGE (324) and SEND_REPLY_MESSAGE_V2 (325): a responder's reply to a request.

Request-reply (RocketMQ 4.9.8's ReplyMessageProcessor): a requester sends an ordinary message
carrying ``CORRELATION_ID``, ``REPLY_TO_CLIENT`` (its client id) and ``TTL``; the broker stores
it with ``CLUSTER`` (every send does, see :mod:`.send`); a responder consumes it and sends a reply
to ``<CLUSTER>_REPLY_TOPIC`` with ``MSG_TYPE=reply``, which its client sends with code 324/325.
This processor checks the reply as a send is checked, finds the requester's connection by the
``REPLY_TO_CLIENT`` client id among the producers' heartbeats, and pushes the reply there with
PUSH_REPLY_MESSAGE_TO_CLIENT (326), waiting up to 10 s for the requester's answer. Then, with
``storeReplyMessageEnable``, it stores the reply in the reply topic as well.

The answers are 4.9.8's: SUCCESS with ``msgId`` "0" and ``queueOffset`` 0 once the push is
acknowledged (the stored copy's id and offset when it is stored); SYSTEM_ERROR "push reply message
fail, channel of <id> not found." when the requester has no connection here, "reply message
properties[REPLY_TO_CLIENT] is null" without the property, and "push reply message to <id>fail."
when the push failed or was refused. The reply is stored in all three cases (as 4.9.8 stores it).
"""
from __future__ import annotations

import logging
import random
import time
from typing import TYPE_CHECKING

from ...errors import FastMQError, RemotingCommandError
from ...protocol.codes import RequestCode, ResponseCode
from ...protocol.command import RemotingCommand, create_request, response_for
from ...protocol.headers import SEND_V2_NAMES, ReplyMessageRequestHeader, SendMessageRequestHeader
from ...protocol.message import MessageConst, MessageExt, MessageFormatError, decode_properties, encode_properties
from ...remoting import Connection
from .base import BrokerCodeDispatchProcessor
from .send import SendMessageProcessor, _Reject, parse_addr

if TYPE_CHECKING:
    from .base import BrokerContext

__all__ = ["ReplyMessageProcessor", "PUSH_REPLY_TIMEOUT_S"]

log = logging.getLogger("fastmq.broker")

#: Broker2Client.callClient's wait for the requester's answer to a push.
PUSH_REPLY_TIMEOUT_S = 10.0


class ReplyMessageProcessor(BrokerCodeDispatchProcessor):
    """Codes 324 and 325; the checks are the send processor's (``msgCheck``)."""

    def __init__(self, broker: "BrokerContext", send: SendMessageProcessor) -> None:
        super().__init__(broker)
        self.send = send
        self.handlers = {RequestCode.SEND_REPLY_MESSAGE: self.send_reply_message,
                         RequestCode.SEND_REPLY_MESSAGE_V2: self.send_reply_message}

    def answer_fields(self, request: RemotingCommand) -> dict[str, str] | None:
        return self.send._region_fields()

    async def send_reply_message(self, conn: Connection, request: RemotingCommand) -> RemotingCommand:
        region = self.send._region_fields()
        try:
            if request.code == RequestCode.SEND_REPLY_MESSAGE_V2:
                h = SendMessageRequestHeader.from_fields(request.ext_fields, SEND_V2_NAMES)
            else:
                h = SendMessageRequestHeader.from_fields(request.ext_fields)
        except RemotingCommandError as exc:
            return response_for(request, ResponseCode.SYSTEM_ERROR, str(exc), region)
        try:
            tc = self.send._msg_check(conn, h)
            props = decode_properties(h.properties or "")
        except _Reject as rej:
            return response_for(request, rej.code, rej.remark, region)
        except MessageFormatError as exc:
            return response_for(request, ResponseCode.MESSAGE_ILLEGAL,
                                f"the message properties are malformed: {exc}", region)
        qid = h.queueId
        if qid < 0:
            qid = random.randrange(max(1, tc.write_queue_nums))
        body = request.body or b""
        msg = MessageExt(topic=h.topic, body=body, flag=h.flag, properties=dict(props), queue_id=qid,
                         sys_flag=h.sysFlag, born_timestamp=h.bornTimestamp, born_host=parse_addr(conn.remote_addr),
                         reconsume_times=h.reconsumeTimes or 0)
        ok, remark = await self._push(conn, h, props, body)
        fields = dict(region)
        if ok:  # (4.9.8 sets these so that a client's decoding of the answer does not fail)
            fields.update(msgId="0", queueId=str(qid), queueOffset="0")
        b = self.broker
        if b.config.storeReplyMessageEnable:
            res = await b.store.put_messages([msg])
            if res.ok:
                b.stats.topic_put(msg.topic, 1)
                fields.update(msgId=res.msg_id, queueId=str(qid), queueOffset=str(res.queue_offset))
            else:
                log.warning("process reply message, store refused it: %s %s", res.status.value, res.remark or "")
        if ok:
            return response_for(request, ResponseCode.SUCCESS, None, fields)
        return response_for(request, ResponseCode.SYSTEM_ERROR, remark, fields)

    async def _push(self, conn: Connection, h: SendMessageRequestHeader, props: dict[str, str],
                    body: bytes) -> tuple[bool, str]:
        """pushReplyMessage: (pushed and acknowledged, remark of the failure)."""
        sender = props.get(MessageConst.REPLY_TO_CLIENT)
        if sender is None:
            log.warning("%s is null, can not reply message", MessageConst.REPLY_TO_CLIENT)
            return False, f"reply message properties[{MessageConst.REPLY_TO_CLIENT}] is null"
        target = self.broker.producer_manager.find_channel(sender)
        if target is None:
            remark = f"push reply message fail, channel of <{sender}> not found."
            log.warning(remark)
            return False, remark
        pushed = dict(props)
        pushed[MessageConst.PUSH_REPLY_TIME] = str(int(time.time() * 1000))
        header = ReplyMessageRequestHeader(
            producerGroup=h.producerGroup, topic=h.topic, defaultTopic=h.defaultTopic,
            defaultTopicQueueNums=h.defaultTopicQueueNums, queueId=h.queueId, sysFlag=h.sysFlag,
            bornTimestamp=h.bornTimestamp, flag=h.flag, bornHost=conn.remote_addr,
            storeHost=self.broker.config.broker_addr, storeTimestamp=int(time.time() * 1000),
            properties=encode_properties(pushed).decode("utf-8"), reconsumeTimes=h.reconsumeTimes,
            unitMode=h.unitMode)
        push = create_request(RequestCode.PUSH_REPLY_MESSAGE_TO_CLIENT, header.to_fields(), body)
        try:
            answer = await target.invoke(push, PUSH_REPLY_TIMEOUT_S)
        except FastMQError as exc:
            log.warning("push reply message to <%s> fail. %s: %s", sender, type(exc).__name__, exc)
            return False, f"push reply message to {sender}fail."
        if answer.code != ResponseCode.SUCCESS:
            log.warning("push reply message to <%s> return fail, response remark: %s", sender, answer.remark)
            return False, f"push reply message to {sender}fail."
        return True, ""
