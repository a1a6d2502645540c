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
    from .blocking import Producer, PullConsumer, PushConsumer, TransactionProducer
    from .client.transaction_producer import LocalTransactionState, TransactionListener, TransactionSendResult
    from .client.producer import SendResult, SendStatus, hash_selector, split_batch
    from .client.push_consumer import ConsumeStatus
    from .errors import (BrokerError, ClientError, FastMQError, MessageValidationError, NoNameServerError,
                         NoRouteError, SendFailedError)
    from .protocol.message import Message, MessageExt
    from .protocol.message_queue import MessageQueue

__version__ = "0.1.0"

__all__ = ["Producer", "PushConsumer", "PullConsumer", "ConsumeStatus", "Message", "MessageExt", "MessageQueue", "SendResult", "SendStatus", "hash_selector", "split_batch",
           "FastMQError", "ClientError", "BrokerError", "NoRouteError", "NoNameServerError", "SendFailedError",
           "MessageValidationError", "TransactionProducer", "LocalTransactionState", "TransactionListener",
           "TransactionSendResult"]

# public name -> the module that defines it
_SOURCES = {
    "Producer": ".blocking", "PushConsumer": ".blocking", "PullConsumer": ".blocking",
    "TransactionProducer": ".blocking", "LocalTransactionState": ".client.transaction_producer",
    "TransactionListener": ".client.transaction_producer", "TransactionSendResult": ".client.transaction_producer",
    "SendResult": ".client.producer", "SendStatus": ".client.producer",
    "hash_selector": ".client.producer", "split_batch": ".client.producer",
    "ConsumeStatus": ".client.push_consumer",
    "Message": ".protocol.message", "MessageExt": ".protocol.message",
    "MessageQueue": ".protocol.message_queue",
    "FastMQError": ".errors", "ClientError": ".errors", "BrokerError": ".errors", "NoRouteError": ".errors",
    "NoNameServerError": ".errors", "SendFailedError": ".errors", "MessageValidationError": ".errors",
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
