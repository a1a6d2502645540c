"""Rebalance strategies: RocketMQ's arithmetic, and that every group splits its queues exactly."""
from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from fastmq.client.allocate import (AllocateMachineRoomNearby, AllocateMessageQueueAveragely,
                                    AllocateMessageQueueAveragelyByCircle, AllocateMessageQueueByConfig,
                                    AllocateMessageQueueByMachineRoom, AllocateMessageQueueConsistentHash)
from fastmq.protocol.message_queue import MessageQueue
from tests.support import examples


def _mqs(n: int, broker: str = "b") -> list[MessageQueue]:
    return [MessageQueue("T", broker, i) for i in range(n)]


def test_averagely_matches_rocketmq() -> None:
    mqs, cids = _mqs(10), ["c0", "c1", "c2", "c3"]
    got = [[mq.queue_id for mq in AllocateMessageQueueAveragely().allocate("G", c, mqs, cids)] for c in cids]
    assert got == [[0, 1, 2], [3, 4, 5], [6, 7], [8, 9]]
    # more consumers than queues: one each, the rest idle
    got = [[mq.queue_id for mq in AllocateMessageQueueAveragely().allocate("G", c, _mqs(2), cids)] for c in cids]
    assert got == [[0], [1], [], []]


def test_by_circle() -> None:
    got = [[mq.queue_id for mq in AllocateMessageQueueAveragelyByCircle().allocate("G", c, _mqs(5), ["a", "b"])]
           for c in ("a", "b")]
    assert got == [[0, 2, 4], [1, 3]]


@pytest.mark.parametrize("strategy", [AllocateMessageQueueAveragely(), AllocateMessageQueueAveragelyByCircle(),
                                      AllocateMessageQueueConsistentHash()])
@settings(max_examples=examples(60), deadline=None)
@given(nq=st.integers(1, 40), nc=st.integers(1, 12))
def test_every_queue_exactly_once(strategy, nq: int, nc: int) -> None:
    mqs, cids = _mqs(nq), [f"10.0.0.{i}@{i}" for i in range(nc)]
    taken = [mq for c in cids for mq in strategy.allocate("G", c, mqs, cids)]
    assert sorted(taken) == mqs


def test_consistent_hash_moves_few_queues() -> None:
    mqs = _mqs(64)
    s = AllocateMessageQueueConsistentHash(virtual_nodes=10)
    before = {mq: c for c in ["a", "b", "c"] for mq in s.allocate("G", c, mqs, ["a", "b", "c"])}
    after = {mq: c for c in ["a", "b", "c", "d"] for mq in s.allocate("G", c, mqs, ["a", "b", "c", "d"])}
    moved = [mq for mq in mqs if before[mq] != after[mq]]
    assert all(after[mq] == "d" for mq in moved)  # a new member only takes queues; nobody else swaps


def test_machine_room_strategies() -> None:
    mqs = [MessageQueue("T", f"{room}@b{i}", q) for room in ("hz", "sh") for i in range(2) for q in range(2)]
    by_room = AllocateMessageQueueByMachineRoom({"hz"})
    got = {c: by_room.allocate("G", c, mqs, ["c1", "c2"]) for c in ("c1", "c2")}
    assert sorted(got["c1"] + got["c2"]) == sorted(mq for mq in mqs if mq.broker_name.startswith("hz"))
    nearby = AllocateMachineRoomNearby(AllocateMessageQueueAveragely(), lambda mq: mq.broker_name.split("@")[0],
                                       lambda cid: cid.split("-")[0])
    cids = ["hz-1", "hz-2"]  # nobody in sh: its queues are shared by everyone
    got = {c: nearby.allocate("G", c, mqs, cids) for c in cids}
    assert sorted(got["hz-1"] + got["hz-2"]) == sorted(mqs)
    assert AllocateMessageQueueByConfig(mqs[:1]).allocate("G", "x", mqs, ["x"]) == mqs[:1]


@pytest.mark.parametrize("cid, mqs, cids, msg", [("", _mqs(1), ["a"], "currentCID is empty"),
                                                 ("a", [], ["a"], "mqAll is null or mqAll empty"),
                                                 ("a", _mqs(1), [], "cidAll is null or cidAll empty")])
def test_bad_input(cid, mqs, cids, msg) -> None:
    with pytest.raises(ValueError, match=msg):
        AllocateMessageQueueAveragely().allocate("G", cid, mqs, cids)


def test_unknown_member_gets_nothing() -> None:
    assert AllocateMessageQueueAveragely().allocate("G", "ghost", _mqs(4), ["a", "b"]) == []


def test_message_queue_text_and_order() -> None:
    mq = MessageQueue("T", "b", 3)
    assert str(mq) == "MessageQueue [topic=T, brokerName=b, queueId=3]"
    assert sorted([MessageQueue("T", "b", 2), MessageQueue("S", "z", 9), MessageQueue("T", "a", 5)]) == [
        MessageQueue("S", "z", 9), MessageQueue("T", "a", 5), MessageQueue("T", "b", 2)]
    assert MessageQueue.from_obj(mq.to_obj()) == mq


def test_message_queue_hash_is_the_fields_and_stays_behind_in_a_pickle() -> None:
    import copy
    import dataclasses
    import pickle
    mq = MessageQueue("T", "b", 3)
    assert hash(mq) == hash(mq) == hash(("T", "b", 3)) == hash(MessageQueue("T", "b", 3))  # (cached after the first)
    assert {mq: 1}[MessageQueue("T", "b", 3)] == 1
    assert [f.name for f in dataclasses.fields(mq)] == ["topic", "broker_name", "queue_id"]
    assert dataclasses.asdict(mq) == {"topic": "T", "broker_name": "b", "queue_id": 3}
    back = pickle.loads(pickle.dumps(mq))
    assert back == mq and "_hash" not in vars(back)  # another process hashes str differently
    assert copy.deepcopy(mq) == mq and dataclasses.replace(mq, queue_id=4) == MessageQueue("T", "b", 4)
