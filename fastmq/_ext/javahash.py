"""Java's String.hashCode() over UTF-8 bytes for the pure twins (``javahash.pxd`` is the compiled
stages' copy): the send stage's tag codes and the record writer's index slots must be bit-exact
with Java's."""
from __future__ import annotations

import struct

__all__ = ["jhash"]


def jhash(data: bytes, h: int = 0) -> int:
    """Continue ``h = 31*h + unit`` over the UTF-16 units of the UTF-8 text ``data``; signed int32."""
    raw = data.decode("utf-8").encode("utf-16-be", "surrogatepass")
    for (u,) in struct.iter_unpack(">H", raw):
        h = (31 * h + u) & 0xFFFFFFFF
    return h - (1 << 32) if h & 0x80000000 else h
