"""Rebalance strategies: which queues of a topic each member of a consumer group takes.

Every member computes the same answer from the same sorted inputs (all queues, all client ids),
so no coordinator is needed. The strategies and their arithmetic are RocketMQ's, so a fastmq
consumer and a Java consumer in one group split the queues without overlap.
"""
from __future__ import annotations

import bisect
import hashlib
import logging
from typing import Callable, Iterable, Protocol, Sequence

from ..protocol.message_queue import MessageQueue

__all__ = ["AllocateStrategy", "AllocateMessageQueueAveragely", "AllocateMessageQueueAveragelyByCircle",
           "AllocateMessageQueueConsistentHash", "AllocateMessageQueueByConfig",
           "AllocateMessageQueueByMachineRoom", "AllocateMachineRoomNearby", "STRATEGIES"]

log = logging.getLogger("fastmq.client")


class AllocateStrategy(Protocol):
    name: str

    def allocate(self, group: str, current_cid: str, mq_all: Sequence[MessageQueue],
                 cid_all: Sequence[str]) -> list[MessageQueue]: ...


def _check(group: str, current_cid: str, mq_all: Sequence[MessageQueue], cid_all: Sequence[str]) -> bool:
    if not current_cid:
        raise ValueError("currentCID is empty")
    if not mq_all:
        raise ValueError("mqAll is null or mqAll empty")
    if not cid_all:
        raise ValueError("cidAll is null or cidAll empty")
    if current_cid not in cid_all:
        log.info("[BUG] ConsumerGroup: %s The consumerId: %s not in cidAll: %s", group, current_cid, cid_all)
        return False
    return True


class AllocateMessageQueueAveragely:
    """Contiguous ranges: the first ``len(mq) % len(cid)`` members get one queue more."""

    name = "AVG"

    def allocate(self, group: str, current_cid: str, mq_all: Sequence[MessageQueue],
                 cid_all: Sequence[str]) -> list[MessageQueue]:
        if not _check(group, current_cid, mq_all, cid_all):
            return []
        n, c = len(mq_all), len(cid_all)
        index = list(cid_all).index(current_cid)
        mod = n % c
        if n <= c:
            average = 1
        elif mod > 0 and index < mod:
            average = n // c + 1
        else:
            average = n // c
        start = index * average if mod > 0 and index < mod else index * average + mod
        span = min(average, n - start)
        return [mq_all[(start + i) % n] for i in range(max(0, span))]


class AllocateMessageQueueAveragelyByCircle:
    """Round robin: queue i goes to member i mod len(cid)."""

    name = "AVG_BY_CIRCLE"

    def allocate(self, group: str, current_cid: str, mq_all: Sequence[MessageQueue],
                 cid_all: Sequence[str]) -> list[MessageQueue]:
        if not _check(group, current_cid, mq_all, cid_all):
            return []
        index = list(cid_all).index(current_cid)
        return [mq for i, mq in enumerate(mq_all) if i % len(cid_all) == index]


def _md5_hash(key: str) -> int:
    """ConsistentHashRouter's MD5Hash: the digest's first four bytes as an unsigned int."""
    return int.from_bytes(hashlib.md5(key.encode("utf-8")).digest()[:4], "big")


class AllocateMessageQueueConsistentHash:
    """A hash ring of ``virtual_nodes`` points per member; a queue goes to the next point clockwise."""

    name = "CONSISTENT_HASH"

    def __init__(self, virtual_nodes: int = 10, hash_function: Callable[[str], int] = _md5_hash) -> None:
        if virtual_nodes < 0:
            raise ValueError(f"illegal virtualNodeCnt :{virtual_nodes}")
        self.virtual_nodes = virtual_nodes
        self.hash_function = hash_function

    def allocate(self, group: str, current_cid: str, mq_all: Sequence[MessageQueue],
                 cid_all: Sequence[str]) -> list[MessageQueue]:
        if not _check(group, current_cid, mq_all, cid_all):
            return []
        ring: dict[int, str] = {}
        for cid in cid_all:
            for i in range(self.virtual_nodes):
                ring[self.hash_function(f"{cid}-{i}")] = cid  # a later node wins a collision, as in TreeMap.put
        if not ring:
            return []
        points = sorted(ring)
        out = []
        for mq in mq_all:
            pos = bisect.bisect_left(points, self.hash_function(str(mq)))
            if ring[points[pos % len(points)]] == current_cid:
                out.append(mq)
        return out


class AllocateMessageQueueByConfig:
    """A fixed list of queues, whatever the group looks like."""

    name = "CONFIG"

    def __init__(self, queues: Iterable[MessageQueue]) -> None:
        self.queues = list(queues)

    def allocate(self, group: str, current_cid: str, mq_all: Sequence[MessageQueue],
                 cid_all: Sequence[str]) -> list[MessageQueue]:
        return list(self.queues)


class AllocateMessageQueueByMachineRoom:
    """Queues of brokers named ``room@broker`` whose room is one of ``consumer_idcs``, split evenly."""

    name = "MACHINE_ROOM"

    def __init__(self, consumer_idcs: Iterable[str]) -> None:
        self.consumer_idcs = set(consumer_idcs)

    def allocate(self, group: str, current_cid: str, mq_all: Sequence[MessageQueue],
                 cid_all: Sequence[str]) -> list[MessageQueue]:
        if not _check(group, current_cid, mq_all, cid_all):
            return []
        index = list(cid_all).index(current_cid)
        pre = [mq for mq in mq_all if len(p := mq.broker_name.split("@")) == 2 and p[0] in self.consumer_idcs]
        mod, rem = divmod(len(pre), len(cid_all))
        out = pre[mod * index:mod * index + mod]
        if rem > index:
            out.append(pre[index + mod * len(cid_all)])
        return out


class AllocateMachineRoomNearby:
    """Queues go to consumers in their own machine room first; rooms without consumers are shared.

    ``broker_room(mq)`` and ``consumer_room(cid)`` say where each is deployed; ``inner`` splits
    within a room.
    """

    name = "MACHINE_ROOM_NEARBY"

    def __init__(self, inner: AllocateStrategy, broker_room: Callable[[MessageQueue], str],
                 consumer_room: Callable[[str], str]) -> None:
        self.inner, self.broker_room, self.consumer_room = inner, broker_room, consumer_room

    def allocate(self, group: str, current_cid: str, mq_all: Sequence[MessageQueue],
                 cid_all: Sequence[str]) -> list[MessageQueue]:
        if not _check(group, current_cid, mq_all, cid_all):
            return []
        mr2mq: dict[str, list[MessageQueue]] = {}
        for mq in mq_all:
            room = self.broker_room(mq)
            if not room:
                raise ValueError(f"Machine room is null for mq {mq}")
            mr2mq.setdefault(room, []).append(mq)
        mr2c: dict[str, list[str]] = {}
        for cid in cid_all:
            room = self.consumer_room(cid)
            if not room:
                raise ValueError(f"Machine room is null for consumer id {cid}")
            mr2c.setdefault(room, []).append(cid)
        mine = self.consumer_room(current_cid)
        out: list[MessageQueue] = []
        local = mr2mq.pop(mine, None)
        if local:
            out += self.inner.allocate(group, current_cid, local, mr2c[mine])
        for room in sorted(mr2mq):
            if room not in mr2c:
                out += self.inner.allocate(group, current_cid, mr2mq[room], cid_all)
        return out


STRATEGIES: dict[str, Callable[[], AllocateStrategy]] = {
    "AVG": AllocateMessageQueueAveragely,
    "AVG_BY_CIRCLE": AllocateMessageQueueAveragelyByCircle,
    "CONSISTENT_HASH": AllocateMessageQueueConsistentHash,
}
