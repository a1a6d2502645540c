"""The asyncio API: use these inside a running event loop.

    import asyncio
    from fastmq.aio import Producer, Message

    async def main():
        async with Producer("my_group", namesrv_addr="127.0.0.1:9876") as producer:
            result = await producer.send(Message("TopicTest", b"hello", properties={"TAGS": "tagA"}))
            print(result.msg_id, result.message_queue, result.queue_offset)

    asyncio.run(main())

For throughput, start many sends and wait for them together: ``send_async`` and
``send_batch_async`` return once the request is queued, with a future of its SendResult::

    futures = [await producer.send_async(Message("TopicTest", b"m%d" % i)) for i in range(1000)]
    results = await asyncio.gather(*futures)
    batch = [Message("TopicTest", b"b%d" % i) for i in range(100)]
    one_result = await (await producer.send_batch_async(batch))

Faster still is the Java client's SendCallback style: a callback per send and no future kept
(``gather`` costs more per future than the send itself; see ``benchmarks/RESULTS.md``)::

    def on_sent(result, error):
        ...  # result is a SendResult, or error says why the send failed
    for i in range(1000):
        await producer.send_async(Message("TopicTest", b"m%d" % i), on_sent)
"""
from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .client.acl import SessionCredentials
    from .client.allocate import (AllocateMachineRoomNearby, AllocateMessageQueueAveragely,
                                  AllocateMessageQueueAveragelyByCircle, AllocateMessageQueueByConfig,
                                  AllocateMessageQueueByMachineRoom, AllocateMessageQueueConsistentHash,
                                  AllocateStrategy)
    from .client.instance import ClientConfig
    from .client.message_selector import MessageSelector
    from .client.producer import Producer, SendResult, SendStatus, split_batch
    from .client.push_consumer import ConsumeStatus, MessageListener, PullConsumer, PushConsumer
    from .client.queue_selector import MessageQueueSelector, hash_selector
    from .client.request_reply import create_reply_message
    from .client.trace_data import TraceContext, TraceType
    from .client.trace_query import TraceRecord, query_trace
    from .client.transaction_producer import (LocalTransactionState, TransactionListener, TransactionProducer,
                                              TransactionSendResult)
    from .protocol.heartbeat import ConsumeFromWhere, MessageModel
    from .protocol.message import Message, MessageExt
    from .protocol.message_queue import MessageQueue

__all__ = ["Producer", "PushConsumer", "PullConsumer", "SendResult", "SendStatus", "Message", "MessageExt",
           "MessageQueue", "MessageQueueSelector", "MessageSelector", "hash_selector", "split_batch",
           # what producers and consumers are configured with, as in :mod:`fastmq`
           "ClientConfig", "SessionCredentials", "MessageModel", "ConsumeFromWhere", "ConsumeStatus",
           "MessageListener", "AllocateStrategy", "AllocateMessageQueueAveragely",
           "AllocateMessageQueueAveragelyByCircle", "AllocateMessageQueueConsistentHash",
           "AllocateMessageQueueByConfig", "AllocateMessageQueueByMachineRoom", "AllocateMachineRoomNearby",
           "TransactionProducer", "LocalTransactionState", "TransactionListener", "TransactionSendResult",
           "create_reply_message", "query_trace", "TraceRecord", "TraceContext", "TraceType"]

# loaded on first use, as in :mod:`fastmq`: ``from fastmq.aio import Message`` needs no client
_SOURCES = {
    "Producer": ".client.producer", "SendResult": ".client.producer", "SendStatus": ".client.producer",
    "split_batch": ".client.producer",
    "MessageQueueSelector": ".client.queue_selector", "hash_selector": ".client.queue_selector",
    "MessageSelector": ".client.message_selector",
    "ClientConfig": ".client.instance", "SessionCredentials": ".client.acl",
    "MessageModel": ".protocol.heartbeat", "ConsumeFromWhere": ".protocol.heartbeat",
    "ConsumeStatus": ".client.push_consumer", "MessageListener": ".client.push_consumer",
    "PullConsumer": ".client.push_consumer", "PushConsumer": ".client.push_consumer",
    **dict.fromkeys(("AllocateStrategy", "AllocateMessageQueueAveragely", "AllocateMessageQueueAveragelyByCircle",
                     "AllocateMessageQueueConsistentHash", "AllocateMessageQueueByConfig",
                     "AllocateMessageQueueByMachineRoom", "AllocateMachineRoomNearby"), ".client.allocate"),
    "Message": ".protocol.message", "MessageExt": ".protocol.message",
    "MessageQueue": ".protocol.message_queue",
    "TransactionProducer": ".client.transaction_producer", "LocalTransactionState": ".client.transaction_producer",
    "TransactionListener": ".client.transaction_producer", "TransactionSendResult": ".client.transaction_producer",
    "create_reply_message": ".client.request_reply",
    "query_trace": ".client.trace_query", "TraceRecord": ".client.trace_query",
    "TraceContext": ".client.trace_data", "TraceType": ".client.trace_data",
}


def __getattr__(name: str) -> Any:
    source = _SOURCES.get(name)
    if source is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(source, "fastmq"), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
