"""A connection between frames holds no read buffer (FrameDecoder, both twins).

A frame larger than one socket read is gathered in the decoder's buffer; once it is decoded the
buffer goes, so a broker's idle connections that each once carried a large message do not each
keep up to a megabyte (they did: a 768 KiB message left a 1 MiB buffer behind for the life of
the connection). Checked against a real broker's resident heap, connections kept open.
"""
from __future__ import annotations

import socket
from pathlib import Path

import pytest

from fastmq._ext.codec import FrameDecoder, encode_frames
from fastmq.protocol.codes import RequestCode, ResponseCode
from fastmq.protocol.command import create_request
from fastmq.protocol.headers import SendMessageRequestHeader
from fastmq.testing import broker_process, namesrv_process

CONNECTIONS = 48
BODY = b"m" * (768 * 1024)  # more than one read of the broker's event loop (at most 256 KiB)


def _rss_anon_kib(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("RssAnon:"):
            return int(line.split()[1])
    raise AssertionError("no RssAnon")


def _send_large(port: int) -> socket.socket:
    """A connection that sent one large message and got its SUCCESS; left open."""
    h = SendMessageRequestHeader("PG_CONN_MEM", "ConnMemTopic", "TBW102", 4, 0, 0, 1_700_000_000_000, 0,
                                 None, 0, False, None, False)
    s = socket.create_connection(("127.0.0.1", port), timeout=30)
    s.sendall(encode_frames([create_request(RequestCode.SEND_MESSAGE_V2, h.to_v2_fields(), BODY)]))
    dec = FrameDecoder()
    for _ in range(1000):
        chunk = s.recv(65536)
        assert chunk, "the broker closed the connection"
        got = dec.feed(chunk)
        if got:
            assert got[0].code == ResponseCode.SUCCESS, (got[0].code, got[0].remark)
            return s
    raise AssertionError("no answer")


@pytest.mark.parametrize("twin", [pytest.param("c", marks=pytest.mark.c_ext), "py"])
def test_idle_connections_keep_no_frame_buffer(tmp_path: Path, twin: str) -> None:
    ns = namesrv_process(tmp_path).start()
    broker = broker_process(tmp_path, ns.addr, mappedFileSizeCommitLog=64 * 1024 * 1024)
    if twin == "py":
        broker.env["FASTMQ_NO_EXTENSIONS"] = "1"
    socks: list[socket.socket] = []
    try:
        broker.start()
        assert broker.proc is not None
        socks.append(_send_large(broker.port))  # the topic, the first large frame: one-time costs
        base = _rss_anon_kib(broker.proc.pid)
        for _ in range(CONNECTIONS):
            socks.append(_send_large(broker.port))
        grown = _rss_anon_kib(broker.proc.pid) - base
        # kept buffers would be ~1 MiB each (48 MiB); a few MiB are the decoded bodies' churn
        assert grown < 12 * 1024, f"broker heap grew {grown} KiB over {CONNECTIONS} idle connections"
        socks.append(_send_large(broker.port))  # and the broker still answers
    finally:
        for s in socks:
            s.close()
        broker.stop()
        ns.stop()
