"""RocketMQ remoting over asyncio: the server, the client, and what they share.

    from fastmq.remoting import RemotingServer, RemotingClient, RequestProcessor, Connection
"""
from .client import RemotingClient
from .connection import Connection, ConnectionGoneListener, ConnectionListener
from .processor import CodeDispatchProcessor, RequestProcessor
from .server import RemotingServer

__all__ = ["RemotingServer", "RemotingClient", "RequestProcessor", "CodeDispatchProcessor", "Connection", "ConnectionListener", "ConnectionGoneListener"]
