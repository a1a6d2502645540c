"""A recording stand-in for a broker, on fastmq's own RemotingServer.

It answers what a RocketMQ 4.9 broker answers to a producer (SEND_MESSAGE with ``msgId``,
``queueId``, ``queueOffset``, ``MSG_REGION``, ``TRACE_ON``, all strings: the C++ client ignores
numbers and crashes on a SUCCESS without extFields), HEART_BEAT and UNREGISTER_CLIENT, and records
every request. Used by the NameServer acceptance tests until they can use the real broker.
"""
from __future__ import annotations

from fastmq.protocol.codes import RequestCode, ResponseCode
from fastmq.protocol.command import RemotingCommand, response_for
from fastmq.remoting import Connection, RemotingServer, RequestProcessor


class RecordingBroker(RequestProcessor):
    def __init__(self) -> None:
        self.requests: list[RemotingCommand] = []
        self._offset = 0
        #: response codes to answer the next sends with, in order (failure injection)
        self.fail_next: list[int] = []

    def process_request(self, conn: Connection, request: RemotingCommand) -> RemotingCommand:
        self.requests.append(request)
        if request.code in (RequestCode.SEND_MESSAGE, RequestCode.SEND_MESSAGE_V2, RequestCode.SEND_BATCH_MESSAGE):
            if self.fail_next:
                return response_for(request, self.fail_next.pop(0), "injected failure")
            fields = request.ext_fields or {}
            queue_id = fields.get("queueId", fields.get("e", "0"))
            self._offset += 1
            port = int(conn.local_addr.rsplit(":", 1)[1])
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
        return [r for r in self.requests if r.code in (RequestCode.SEND_MESSAGE, RequestCode.SEND_MESSAGE_V2,
                                                          RequestCode.SEND_BATCH_MESSAGE)]


async def start_stub_broker() -> tuple[RemotingServer, RecordingBroker]:
    rec = RecordingBroker()
    server = RemotingServer("127.0.0.1", 0)
    server.register_default_processor(rec)
    await server.start()
    return server, rec
