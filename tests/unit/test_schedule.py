"""ScheduleMessageService: delayed messages wait in SCHEDULE_TOPIC_XXXX, then reach their topic."""
from __future__ import annotations

import asyncio
import json
import time
from pathlib import Path

import pytest

from fastmq.errors import ConfigError
from fastmq.broker.schedule import ScheduleMessageService, message_timeup
from fastmq.protocol.message import MessageExt, decode_records
from fastmq.store.config import MessageStoreConfig
from fastmq.store.message_store import SCHEDULE_TOPIC, GetStatus, MessageStore

LEVELS = "200ms 400ms 1s"


def open_store(root: Path) -> MessageStore:
    c = MessageStoreConfig(storePathRootDir=str(root), mappedFileSizeCommitLog=64 * 1024,
                           mappedFileSizeConsumeQueue=20 * 64, preloadMappedFile=False)
    c.messageDelayLevel = LEVELS  # type: ignore[attr-defined]
    s = MessageStore(c, "127.0.0.1:10911")
    s.load()
    s.start()
    return s


def delayed(body: bytes, level: int = 1, topic: str = "Real", qid: int = 1) -> MessageExt:
    return MessageExt(topic=topic, body=body, queue_id=qid,
                      properties={"TAGS": "TagA", "KEYS": "k1", "DELAY": str(level), "u": "v"},
                      born_timestamp=int(time.time() * 1000), born_host=("10.1.2.3", 4000))


def read_all(s: MessageStore, topic: str = "Real", qid: int = 1) -> list[MessageExt]:
    g = s.get_message("g", topic, qid, 0, 32)
    if g.status is not GetStatus.FOUND:
        return []
    return decode_records(b"".join(g.buffers))


async def wait_for(pred, timeout: float = 5.0) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if pred():
            return True
        await asyncio.sleep(0.02)
    return pred()


async def test_level_one_arrives_after_its_delay(tmp_path: Path) -> None:
    s = open_store(tmp_path)
    svc = ScheduleMessageService(s, poll_interval=0.02, flush_interval=0.05)
    await svc.start()
    try:
        t0 = time.time()
        r = await s.put_messages([delayed(b"later")])
        assert r.ok
        await asyncio.sleep(0.05)
        assert read_all(s) == []  # not before its time
        assert await wait_for(lambda: len(read_all(s)) == 1)
        elapsed = time.time() - t0
        assert elapsed >= 0.19
        m = read_all(s)[0]
        assert m.body == b"later" and m.topic == "Real" and m.queue_id == 1
        assert "DELAY" not in m.properties
        assert m.properties["TAGS"] == "TagA" and m.properties["KEYS"] == "k1" and m.properties["u"] == "v"
        assert m.properties["REAL_TOPIC"] == "Real"
        assert m.born_host == ("10.1.2.3", 4000)
        assert svc.delivered == 1
        stats: dict[str, str] = {}
        svc.build_running_stats(stats)
        assert stats["scheduleMessageOffset_1"] == "1,1"
        assert await wait_for(lambda: Path(svc.path).exists())
    finally:
        await svc.stop()
        s.shutdown()
    data = json.loads(Path(svc.path).read_text())
    assert data["offsetTable"]["1"] == 1


async def test_levels_keep_their_order_and_delay(tmp_path: Path) -> None:
    s = open_store(tmp_path)
    svc = ScheduleMessageService(s, poll_interval=0.02)
    await svc.start()
    try:
        await s.put_messages([delayed(b"two", level=2)])
        await s.put_messages([delayed(b"one-a", level=1), delayed(b"one-b", level=1)])
        assert await wait_for(lambda: len(read_all(s)) == 2, 3)
        assert [m.body for m in read_all(s)] == [b"one-a", b"one-b"]
        assert await wait_for(lambda: len(read_all(s)) == 3, 3)
        assert read_all(s)[2].body == b"two"
    finally:
        await svc.stop()
        s.shutdown()


async def test_delayed_message_survives_restart(tmp_path: Path) -> None:
    s = open_store(tmp_path)
    svc = ScheduleMessageService(s, poll_interval=0.02)
    await svc.start()
    await s.put_messages([delayed(b"first", level=1)])
    assert await wait_for(lambda: len(read_all(s)) == 1)
    await s.put_messages([delayed(b"second", level=3)])  # 1 s: still waiting at the restart
    await svc.stop()
    s.shutdown()
    assert json.loads(Path(svc.path).read_text())["offsetTable"]["1"] == 1

    s2 = open_store(tmp_path)
    svc2 = ScheduleMessageService(s2, poll_interval=0.02)
    await svc2.start()
    try:
        assert svc2.offset_table[1] == 1 and svc2.offset_table[3] == 0
        assert await wait_for(lambda: len(read_all(s2)) == 2, 5)
        assert [m.body for m in read_all(s2)] == [b"first", b"second"]  # first not delivered twice
    finally:
        await svc2.stop()
        s2.shutdown()


async def test_bad_offsets_file_and_fastjson_keys(tmp_path: Path) -> None:
    s = open_store(tmp_path)
    try:
        await s.put_messages([delayed(b"x", level=1)])
        path = Path(tmp_path) / "config" / "delayOffset.json"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text('{"offsetTable":{1:5,2:0}}')  # fastjson style, offset past the end
        svc = ScheduleMessageService(s)
        svc.load()
        assert svc.offset_table == {1: 1, 2: 0, 3: 0}
        # damaged with no backup: an error naming the file, not every level from its start
        path.write_text("not json")
        with pytest.raises(ConfigError, match="delayOffset.json"):
            svc.load()
        # damaged with a good backup: RocketMQ's ConfigManager reads the backup
        path.with_name("delayOffset.json.bak").write_text('{"offsetTable":{"1":1,"2":0}}')
        svc.load()
        assert svc.offset_table == {1: 1, 2: 0, 3: 0}
    finally:
        s.shutdown()


def test_message_timeup_requires_real_topic() -> None:
    m = MessageExt(topic=SCHEDULE_TOPIC, body=b"b", properties={"DELAY": "1"})
    assert message_timeup(m) is None
    m.properties.update(REAL_TOPIC="X", REAL_QID="3")
    inner = message_timeup(m)
    assert inner is not None and (inner.topic, inner.queue_id) == ("X", 3)
    assert "DELAY" not in inner.properties and inner.properties["WAIT"] == "false"


async def test_a_message_that_can_never_be_re_put_is_skipped_and_the_level_goes_on(tmp_path: Path) -> None:
    """Guards: a parked message whose real topic the store refuses (a %RETRY% topic over 127
    characters, parked by a broker before the send-back check) was retried for ever and held
    every later message of its level."""
    s = open_store(tmp_path)
    svc = ScheduleMessageService(s, poll_interval=0.02, flush_interval=0.05)
    try:
        # what an older broker parked: already on the schedule topic, level 1, real topic too long
        stuck = MessageExt(topic=SCHEDULE_TOPIC, body=b"stuck", queue_id=0,
                           properties={"REAL_TOPIC": "%RETRY%" + "L" * 200, "REAL_QID": "0"},
                           born_timestamp=int(time.time() * 1000), born_host=("10.1.2.3", 4000))
        assert (await s.put_messages([stuck])).ok
        assert (await s.put_messages([delayed(b"behind")])).ok
        await svc.start()
        assert await wait_for(lambda: [m.body for m in read_all(s)] == [b"behind"])
        assert svc.skipped == 1 and svc.delivered == 1
    finally:
        await svc.stop()
        s.shutdown()


async def test_the_store_refuses_an_unstorable_topic_before_parking_it(tmp_path: Path) -> None:
    """4.9's checkMessage order: the real topic is checked before a delay moves it aside."""
    s = open_store(tmp_path)
    try:
        for topic in ("T" * 128, "../escape", "a b"):
            r = await s.put_messages([delayed(b"x", topic=topic)])
            assert r.status.name == "MESSAGE_ILLEGAL" and "cannot be stored" in r.remark
        assert s.max_offset_in_queue(SCHEDULE_TOPIC, 0) == 0
    finally:
        s.shutdown()
