"""Request-reply without servers: ``create_reply_message`` (MessageUtil.createReplyMessage), the
RequestTable's outcomes (reply, send failure, timeout: each once) and its reading of a push
(PUSH_REPLY_MESSAGE_TO_CLIENT), and the code a reply is sent with."""
from __future__ import annotations

import asyncio
import zlib
from typing import Any

import pytest

from fastmq.client.api import send_request
from fastmq.client.request_reply import PendingRequest, RequestTable, create_reply_message
from fastmq.errors import ClientError, RequestSendError, RequestTimeoutError, SendFailedError
from fastmq.protocol.codes import RequestCode, ResponseCode
from fastmq.protocol.command import create_request
from fastmq.protocol.headers import ReplyMessageRequestHeader
from fastmq.protocol.message import Message, MessageConst, encode_properties
from fastmq.protocol.message_queue import MessageQueue

def test_create_reply_message() -> None:
    req = Message("T", b"q", properties={MessageConst.CLUSTER: "C1", MessageConst.CORRELATION_ID: "cid",
                                          MessageConst.REPLY_TO_CLIENT: "1.2.3.4@x", MessageConst.MESSAGE_TTL: "3000",
                                          "other": "not copied"})
    reply = create_reply_message(req, b"a")
    assert reply.topic == "C1_REPLY_TOPIC" and reply.body == b"a"
    assert reply.properties == {"MSG_TYPE": "reply", "CORRELATION_ID": "cid", "REPLY_TO_CLIENT": "1.2.3.4@x",
                                "TTL": "3000"}
    with pytest.raises(ClientError) as info:
        create_reply_message(Message("T", b"q"), b"a")
    assert info.value.code == 10007
    assert str(info.value) == "create reply message fail, requestMessage error, property[CLUSTER] is null."




def test_a_reply_is_sent_with_its_own_code() -> None:
    req = Message("T", b"q", properties={MessageConst.CLUSTER: "C1", MessageConst.CORRELATION_ID: "cid",
                                          MessageConst.REPLY_TO_CLIENT: "me"})
    mq = MessageQueue("C1_REPLY_TOPIC", "b", 0)
    assert send_request(create_reply_message(req, b"a"), mq, "G", 4, 4096).code == RequestCode.SEND_REPLY_MESSAGE_V2
    assert send_request(req, mq, "G", 4, 4096).code == RequestCode.SEND_MESSAGE_V2


def _push(props: dict[str, str], body: bytes = b"reply", sys_flag: int = 0) -> Any:
    h = ReplyMessageRequestHeader(producerGroup="G", topic="C_REPLY_TOPIC", defaultTopic="TBW102",
                                  defaultTopicQueueNums=4, queueId=0, sysFlag=sys_flag, bornTimestamp=5, flag=0,
                                  bornHost="1.2.3.4:5", storeHost="6.7.8.9:10911", storeTimestamp=6,
                                  properties=encode_properties(props).decode())
    return create_request(RequestCode.PUSH_REPLY_MESSAGE_TO_CLIENT, h.to_fields(), body)


async def test_outcomes_each_once() -> None:
    loop = asyncio.get_running_loop()
    table = RequestTable()
    seen: list[tuple[str, Any, Any]] = []

    def add(cid: str, ms: int) -> PendingRequest:
        req = PendingRequest(cid, "T", ms, loop.create_future(), lambda r, e: seen.append((cid, r, e)))
        table.add(req, loop, ms)
        return req

    replied, failed, timed, unsent = add("a", 5000), add("b", 5000), add("c", 50), add("d", 50)
    table.sent("a", None)
    resp = table.receive(_push({MessageConst.CORRELATION_ID: "a"}, zlib.compress(b"big"), sys_flag=1))
    assert resp.code == ResponseCode.SUCCESS
    assert (await replied.future).body == b"big"
    assert replied.future.result().properties[MessageConst.REPLY_MESSAGE_ARRIVE_TIME]
    assert replied.future.result().born_host == ("1.2.3.4", 5)
    table.sent("b", SendFailedError("Send [3] times, still failed", 13))
    with pytest.raises(RequestSendError) as info:
        await failed.future
    assert info.value.code == 13 and isinstance(info.value.__cause__, SendFailedError)
    table.sent("c", None)
    with pytest.raises(RequestTimeoutError) as t:
        await timed.future
    assert t.value.sent and t.value.code == 10006
    assert str(t.value) == "send request message to <T> OK, but wait reply message timeout, 50 ms."
    with pytest.raises(RequestTimeoutError) as t:
        await unsent.future
    assert not t.value.sent
    # a second reply, and a late one: acknowledged, counted, dropped
    assert table.receive(_push({MessageConst.CORRELATION_ID: "a"})).code == ResponseCode.SUCCESS
    assert table.receive(_push({MessageConst.CORRELATION_ID: "c"})).code == ResponseCode.SUCCESS
    assert table.unmatched == 2 and not table.pending
    assert sorted(cid for cid, _, _ in seen) == ["a", "b", "c", "d"]


def test_an_unreadable_push_is_refused() -> None:
    bad = create_request(RequestCode.PUSH_REPLY_MESSAGE_TO_CLIENT, {"topic": "T"}, b"x")
    resp = RequestTable().receive(bad)
    assert (resp.code, resp.remark) == (ResponseCode.SYSTEM_ERROR, "process reply message fail")
