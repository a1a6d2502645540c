"""fastmq: Apache RocketMQ's architecture in Python, wire-compatible with RocketMQ 4.x.

The blocking API (:mod:`fastmq.blocking`) drives the asyncio core (:mod:`fastmq.aio`) on a background loop::

    from fastmq import Producer, Message

    producer = Producer("my_group", namesrv_addr="127.0.0.1:9876")
    producer.start()
    try:
        result = producer.send(Message("TopicTest", b"hello", properties={"TAGS": "tagA"}))
        print(result.msg_id, result.message_queue, result.queue_offset)
    finally:
        producer.shutdown()

The public names load on first use (PEP 562): the servers and the protocol import this package
as a parent of theirs, and must not drag the client and its loop thread in with it.
"""
from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .blocking import Producer, PullConsumer, PushConsumer, TransactionProducer, query_trace
    from .client.acl import SessionCredentials
    from .client.allocate import (AllocateMachineRoomNearby, AllocateMessageQueueAveragely,
                                  AllocateMessageQueueAveragelyByCircle, AllocateMessageQueueByConfig,
                                  AllocateMessageQueueByMachineRoom, AllocateMessageQueueConsistentHash,
                                  AllocateStrategy)
    from .client.instance import ClientConfig
    from .client.message_selector import MessageSelector
    from .client.producer import SendResult, SendStatus, split_batch
    from .client.push_consumer import ConsumeStatus, MessageListener
    from .client.queue_selector import MessageQueueSelector, hash_selector
    from .client.transaction_producer import LocalTransactionState, TransactionListener, TransactionSendResult
    from .client.request_reply import create_reply_message
    from .client.trace_data import TraceContext, TraceType
    from .client.trace_query import TraceRecord
    from .errors import (BrokerError, ClientError, FastMQError, FilterRefusedError, MessageValidationError,
                         NoNameServerError, NoRouteError, RequestSendError, RequestTimeoutError, SendFailedError,
                         TimerMessageError)
    from .protocol.heartbeat import ConsumeFromWhere, MessageModel
    from .protocol.message import Message, MessageExt
    from .protocol.message_queue import MessageQueue
    from .version import __version__


__all__ = ["Producer", "PushConsumer", "PullConsumer", "Message", "MessageExt", "MessageQueue", "SendResult",
           "SendStatus", "hash_selector", "split_batch", "MessageQueueSelector", "MessageSelector",
           # what producers and consumers are configured with
           "ClientConfig", "SessionCredentials", "MessageModel", "ConsumeFromWhere", "ConsumeStatus",
           "MessageListener", "AllocateStrategy", "AllocateMessageQueueAveragely",
           "AllocateMessageQueueAveragelyByCircle", "AllocateMessageQueueConsistentHash",
           "AllocateMessageQueueByConfig", "AllocateMessageQueueByMachineRoom", "AllocateMachineRoomNearby",
           "FastMQError", "ClientError", "BrokerError", "NoRouteError", "NoNameServerError", "SendFailedError",
           "MessageValidationError", "FilterRefusedError", "TransactionProducer", "LocalTransactionState",
           "TransactionListener", "TransactionSendResult", "create_reply_message", "RequestTimeoutError",
           "RequestSendError", "query_trace", "TraceRecord", "TraceContext", "TraceType", "TimerMessageError"]

# public name -> the module that defines it
_SOURCES = {
    "__version__": ".version",
    "Producer": ".blocking", "PushConsumer": ".blocking", "PullConsumer": ".blocking",
    "TransactionProducer": ".blocking", "LocalTransactionState": ".client.transaction_producer",
    "TransactionListener": ".client.transaction_producer", "TransactionSendResult": ".client.transaction_producer",
    "SendResult": ".client.producer", "SendStatus": ".client.producer", "split_batch": ".client.producer",
    "hash_selector": ".client.queue_selector", "MessageQueueSelector": ".client.queue_selector",
    "MessageSelector": ".client.message_selector",
    "ClientConfig": ".client.instance", "SessionCredentials": ".client.acl",
    "MessageModel": ".protocol.heartbeat", "ConsumeFromWhere": ".protocol.heartbeat",
    "ConsumeStatus": ".client.push_consumer", "MessageListener": ".client.push_consumer",
    **dict.fromkeys(("AllocateStrategy", "AllocateMessageQueueAveragely", "AllocateMessageQueueAveragelyByCircle",
                     "AllocateMessageQueueConsistentHash", "AllocateMessageQueueByConfig",
                     "AllocateMessageQueueByMachineRoom", "AllocateMachineRoomNearby"), ".client.allocate"),
    "Message": ".protocol.message", "MessageExt": ".protocol.message",
    "MessageQueue": ".protocol.message_queue",
    "FastMQError": ".errors", "ClientError": ".errors", "BrokerError": ".errors", "NoRouteError": ".errors",
    "NoNameServerError": ".errors", "SendFailedError": ".errors", "MessageValidationError": ".errors",
    "RequestTimeoutError": ".errors", "RequestSendError": ".errors",
    "create_reply_message": ".client.request_reply",
    "FilterRefusedError": ".errors", "TimerMessageError": ".errors",
    "query_trace": ".blocking", "TraceRecord": ".client.trace_query",
    "TraceContext": ".client.trace_data", "TraceType": ".client.trace_data",
}


def __getattr__(name: str) -> Any:
    source = _SOURCES.get(name)
    if source is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(source, __name__), name)
    globals()[name] = value  # later lookups skip this function
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
