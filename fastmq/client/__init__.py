"""The client library's internals: client instance, producer, consumers, rebalance, offset stores.

The public API is ``fastmq`` (blocking facade) and ``fastmq.aio`` (asyncio core).
"""
