"""UNIQ_KEY: the id a producer gives each message before sending it (MessageClientIDSetter).

32 uppercase hex digits: the client's IPv4 address, its pid (16 bits), a random per-process
int32 (Java uses the class loader's hash), milliseconds since the start of the month (int32)
and a 16-bit counter. It is what ``SendResult.msg_id`` reports and what consumers see as the
message id, while the broker's offset id is ``offset_msg_id``. The compiled ``_ext.produce``
twin formats them; this module holds the process's one generator.
"""
from __future__ import annotations

import os
import random
import socket

from .._ext.produce import UniqIds
from ..remoting.address import local_address

__all__ = ["UNIQ_IDS", "create_uniq_id", "create_uniq_ids"]


def _prefix() -> str:
    return (socket.inet_aton(local_address()) + (os.getpid() & 0xFFFF).to_bytes(2, "big")
            + random.getrandbits(32).to_bytes(4, "big")).hex().upper()


#: The process's UNIQ_KEY generator (thread-safe; one counter for every producer).
UNIQ_IDS = UniqIds(_prefix())
# A forked child (a pre-forking server's workers, multiprocessing) would otherwise repeat its
# parent's keys: same prefix, same counter, the same millisecond.
os.register_at_fork(after_in_child=lambda: UNIQ_IDS.reseed(_prefix()))


def create_uniq_id() -> str:
    """A new UNIQ_KEY (thread-safe)."""
    return UNIQ_IDS.next()


def create_uniq_ids(n: int) -> list[str]:
    """``n`` new UNIQ_KEYs, as ``n`` calls of :func:`create_uniq_id` would make them, for one clock
    read (a batch send)."""
    return UNIQ_IDS.take(n)
