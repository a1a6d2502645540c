"""Recording stand-ins for the C++ client tests: a stub broker and a NameServer tap.

``RecordingBroker`` answers what a RocketMQ 4.9 broker answers to a producer (SEND_MESSAGE with
``msgId``, ``queueId``, ``queueOffset``, ``MSG_REGION``, ``TRACE_ON``, all strings: the C++ client
ignores numbers and crashes on a SUCCESS without extFields), HEART_BEAT and UNREGISTER_CLIENT, and
records every request. ``RecordingProxy`` sits between a client and a real server (the
``fastmq-namesrv`` process) and records the frames both ways, so a test can see what the client
asked and what it was told without reaching into another process.
"""
from __future__ import annotations

import asyncio
from dataclasses import dataclass

from fastmq._ext.codec import FrameDecoder
from fastmq.protocol.codes import RequestCode, ResponseCode
from fastmq.protocol.command import RemotingCommand, response_for
from fastmq.remoting import Connection, RemotingServer, RequestProcessor

_SEND_CODES = (RequestCode.SEND_MESSAGE, RequestCode.SEND_MESSAGE_V2, RequestCode.SEND_BATCH_MESSAGE)


class RecordingBroker(RequestProcessor):
    def __init__(self) -> None:
        self.requests: list[RemotingCommand] = []
        self._offset = 0
        #: response codes to answer the next sends with, in order (failure injection)
        self.fail_next: list[int] = []
        #: how many of the next sends get no answer at all (a broker that hangs)
        self.silent_next = 0

    def process_request(self, conn: Connection, request: RemotingCommand) -> RemotingCommand:
        self.requests.append(request)
        if request.code in _SEND_CODES:
            if self.silent_next > 0:
                self.silent_next -= 1
                return None
            if self.fail_next:
                return response_for(request, self.fail_next.pop(0), "injected failure")
            fields = request.ext_fields or {}
            queue_id = fields.get("queueId", fields.get("e", "0"))
            self._offset += 1
            port = int(conn.local_addr.rsplit(":", 1)[1])
            # response_for stringifies every value, as a Java broker's header encoder does
            return response_for(request, ResponseCode.SUCCESS, ext_fields={
                # the offset message id layout: store IP, port, commit-log offset
                "msgId": f"7F000001{port:08X}{self._offset:016X}",
                "queueId": queue_id, "queueOffset": self._offset - 1, "MSG_REGION": "DefaultRegion",
                "TRACE_ON": "true"})
        if request.code in (RequestCode.HEART_BEAT, RequestCode.UNREGISTER_CLIENT):
            return response_for(request, ResponseCode.SUCCESS)
        return response_for(request, ResponseCode.REQUEST_CODE_NOT_SUPPORTED,
                            f" request type {request.code} not supported")

    def sends(self) -> list[RemotingCommand]:
        return [r for r in self.requests if r.code in _SEND_CODES]


async def start_stub_broker() -> tuple[RemotingServer, RecordingBroker]:
    rec = RecordingBroker()
    server = RemotingServer("127.0.0.1", 0)
    server.register_default_processor(rec)
    await server.start()
    return server, rec


@dataclass
class Tapped:
    """One frame seen by the proxy; ``direction`` is "client->server" or "server->client"."""

    direction: str
    cmd: RemotingCommand


class RecordingProxy:
    """A loopback TCP relay to ``target`` that decodes and records every frame both ways.

    Bytes are forwarded untouched; decoding is only for the record (a frame the decoder rejects
    ends the recording for that direction, not the relay).
    """

    def __init__(self, target: str) -> None:
        host, port = target.rsplit(":", 1)
        self._target = (host, int(port))
        self.frames: list[Tapped] = []
        self._server: asyncio.Server | None = None
        self._tasks: set[asyncio.Task[None]] = set()
        self.port = 0

    @property
    def addr(self) -> str:
        return f"127.0.0.1:{self.port}"

    async def start(self) -> None:
        self._server = await asyncio.start_server(self._accept, "127.0.0.1", 0)
        self.port = self._server.sockets[0].getsockname()[1]

    async def _accept(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            up_reader, up_writer = await asyncio.wait_for(asyncio.open_connection(*self._target), 5)
        except (OSError, asyncio.TimeoutError):
            writer.close()
            return
        pumps = [asyncio.ensure_future(self._pump(reader, up_writer, "client->server")),
                 asyncio.ensure_future(self._pump(up_reader, writer, "server->client"))]
        self._tasks.update(pumps)
        await asyncio.wait(pumps, return_when=asyncio.FIRST_COMPLETED)
        for t in pumps:
            t.cancel()
        await asyncio.gather(*pumps, return_exceptions=True)
        self._tasks.difference_update(pumps)
        for w in (writer, up_writer):
            w.close()

    async def _pump(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, direction: str) -> None:
        decoder: FrameDecoder | None = FrameDecoder()
        while True:
            try:
                data = await reader.read(65536)
            except OSError:
                return
            if not data:
                return
            if decoder is not None:
                try:
                    self.frames.extend(Tapped(direction, c) for c in decoder.feed(data))
                except ValueError:
                    decoder = None
            writer.write(data)
            try:
                await writer.drain()
            except OSError:
                return

    def requests(self, code: int | None = None) -> list[RemotingCommand]:
        return [f.cmd for f in self.frames
                if f.direction == "client->server" and (code is None or f.cmd.code == code)]

    def response_to(self, request: RemotingCommand) -> RemotingCommand | None:
        """The recorded answer to ``request`` (matched by opaque on the same proxy)."""
        for f in self.frames:
            if f.direction == "server->client" and f.cmd.opaque == request.opaque and f.cmd.is_response:
                return f.cmd
        return None

    async def close(self) -> None:
        if self._server is not None:
            self._server.close()
        for t in list(self._tasks):
            t.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        if self._server is not None:
            await self._server.wait_closed()
