"""Pipelined requests on one raw connection: the broker benchmarks' way to time a burst of
pre-encoded frames without a client library in the measurement."""
from __future__ import annotations

import asyncio
import time

from fastmq._ext.codec import FrameDecoder


async def pipelined(port: int, frames: bytes, n: int) -> float:
    """Write ``n`` pre-encoded requests on one connection to 127.0.0.1:``port``, read ``n``
    responses (each must be SUCCESS); seconds taken."""
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    dec = FrameDecoder()
    t0 = time.perf_counter()
    writer.write(frames)
    got = 0
    while got < n:
        chunk = await asyncio.wait_for(reader.read(1 << 20), 30)
        assert chunk, "broker closed the connection"
        for r in dec.feed(chunk):
            assert r.code == 0, (r.code, r.remark)
            got += 1
    elapsed = time.perf_counter() - t0
    writer.close()
    return elapsed
