"""The ``/metrics`` responder: a small HTTP/1.1 server on the server's own event loop, for
Prometheus scrapes (RocketMQ 5's ``metricsExporterType=PROM`` on ``metricsPromExporterPort``).

It answers ``GET /metrics`` (and ``HEAD``) with what ``render()`` returns, 404 for any other
path, 405 for any other method, and closes the connection after each answer. A scrape is one
short request from a trusted poller, so nothing more of HTTP is needed, and a library would add
a dependency and a thread to both servers for this. What a hostile or broken client can do is
bounded: the request head may be at most :data:`MAX_HEAD_BYTES` (431 past it) and must arrive
within :data:`HEAD_TIMEOUT_S` (slowloris: the connection is closed), at most
:data:`MAX_CONNECTIONS` connections are served at once (more are closed on arrival), and a
request body is never read.
"""
from __future__ import annotations

import asyncio
import logging
from typing import Callable

from ..common.prometheus import CONTENT_TYPE
from ..errors import ConfigError

__all__ = ["MetricsHttpServer", "MAX_HEAD_BYTES", "HEAD_TIMEOUT_S", "MAX_CONNECTIONS", "check_exporter_keys",
           "exporter_type"]

log = logging.getLogger("fastmq.metrics")

MAX_HEAD_BYTES = 8192
HEAD_TIMEOUT_S = 5.0
#: after a 431, how long and how much of what the peer still sends is read and dropped (_linger)
LINGER_S = 1.0
LINGER_BYTES = 4 * 1024 * 1024
WRITE_TIMEOUT_S = 10.0
MAX_CONNECTIONS = 16
_EXPORTER_TYPES = ("DISABLE", "PROM")
#: RocketMQ 5 also takes the type's ordinal (DISABLE 0, OTLP_GRPC 1, PROM 2, LOG 3)
_ORDINALS = {"0": "DISABLE", "1": "OTLP_GRPC", "2": "PROM", "3": "LOG"}


def exporter_type(value: str) -> str:
    """``metricsExporterType`` normalised (upper case, an ordinal as its name)."""
    v = str(value).strip().upper()
    return _ORDINALS.get(v, v)


def check_exporter_keys(cfg: object) -> None:
    """The metrics keys a broker or NameServer config shares. Raises ConfigError naming the key."""
    kind = exporter_type(getattr(cfg, "metricsExporterType"))
    if kind not in _EXPORTER_TYPES:
        if kind in ("OTLP_GRPC", "LOG"):
            raise ConfigError(f"metricsExporterType={kind}: fastmq serves metrics only as PROM "
                              "(Prometheus text on metricsPromExporterPort); use PROM or DISABLE")
        raise ConfigError(f"metricsExporterType={getattr(cfg, 'metricsExporterType')}: expected DISABLE or PROM")
    port = getattr(cfg, "metricsPromExporterPort")
    if not 0 <= port <= 65535:
        raise ConfigError(f"metricsPromExporterPort={port}: not a TCP port")


def _answer(status: str, body: bytes, content_type: str = "text/plain; charset=utf-8", head_only: bool = False) -> bytes:
    head = (f"HTTP/1.1 {status}\r\nContent-Type: {content_type}\r\nContent-Length: {len(body)}\r\n"
            "Connection: close\r\n\r\n").encode("ascii")
    return head if head_only else head + body


class MetricsHttpServer:
    """Serves ``render()`` at ``/metrics`` on ``host:port`` (port 0: a free one, read :attr:`port`)."""

    def __init__(self, host: str, port: int, render: Callable[[], bytes]) -> None:
        self.host = host
        self.port = port
        self.render = render
        self.scrapes = 0
        self._server: asyncio.AbstractServer | None = None
        self._active: set[asyncio.Task[None]] = set()

    async def start(self) -> None:
        self._server = await asyncio.start_server(self._serve, self.host, self.port, limit=MAX_HEAD_BYTES)
        self.port = self._server.sockets[0].getsockname()[1]
        log.info("metrics served at http://%s:%d/metrics", self.host, self.port)

    async def close(self) -> None:
        if self._server is not None:
            self._server.close()
            self._server = None
        for task in list(self._active):
            task.cancel()
        if self._active:
            await asyncio.gather(*self._active, return_exceptions=True)

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        if len(self._active) >= MAX_CONNECTIONS or task is None:
            writer.transport.abort()
            return
        self._active.add(task)
        try:
            try:
                head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), HEAD_TIMEOUT_S)
            except asyncio.LimitOverrunError:
                writer.write(_answer("431 Request Header Fields Too Large", b"request head too large\n"))
                await asyncio.wait_for(writer.drain(), WRITE_TIMEOUT_S)
                await _linger(reader, writer)
                return
            except (asyncio.IncompleteReadError, asyncio.TimeoutError, ConnectionError, ValueError):
                return  # gone, too slow, or too long without a line end: nothing to answer
            writer.write(self._respond(head))
            await asyncio.wait_for(writer.drain(), WRITE_TIMEOUT_S)
        except (asyncio.TimeoutError, ConnectionError):
            pass
        except Exception:  # a collector bug: this scrape fails, the server stays
            log.exception("metrics scrape failed")
        finally:
            self._active.discard(task)
            if writer.transport.get_write_buffer_size():
                writer.transport.abort()  # a peer that does not read: drop what it left
            else:
                writer.close()

    def _respond(self, head: bytes) -> bytes:
        line = head.split(b"\r\n", 1)[0].decode("latin-1")
        parts = line.split(" ")
        if len(parts) != 3 or not parts[2].startswith("HTTP/"):
            return _answer("400 Bad Request", b"bad request line\n")
        method, target = parts[0], parts[1]
        if method not in ("GET", "HEAD"):
            return _answer("405 Method Not Allowed", b"only GET\n")
        if target.split("?", 1)[0] != "/metrics":
            return _answer("404 Not Found", b"not found: the metrics are at /metrics\n")
        try:
            body = self.render()
        except Exception:
            log.exception("collecting metrics failed")
            return _answer("500 Internal Server Error", b"collecting metrics failed\n")
        self.scrapes += 1
        return _answer("200 OK", body, CONTENT_TYPE, head_only=method == "HEAD")


async def _linger(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    """After an answer to a head too large: no more to write, and what the peer still sends read
    and dropped for a moment (at most LINGER_S and LINGER_BYTES). Closing with its bytes unread
    makes the kernel reset the connection, and a reset can discard the answer before the peer
    reads it."""
    try:
        if writer.can_write_eof():
            writer.write_eof()
        left = LINGER_BYTES
        async with asyncio.timeout(LINGER_S):
            while left > 0:
                chunk = await reader.read(65536)
                if not chunk:
                    return
                left -= len(chunk)
    except (TimeoutError, OSError):  # (ConnectionError is an OSError)
        pass
