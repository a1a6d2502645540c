"""Repeated errors rate-limited (issue 32, item 7): the first occurrence, then a count per interval."""
from __future__ import annotations

import logging

import pytest

from fastmq.broker.consumer_manager import ClientChannelInfo, ConsumerGroupInfo
from fastmq.common.server_log import RepeatedLog
from fastmq.protocol.heartbeat import ConsumerData


def test_first_then_a_count_per_interval(caplog: pytest.LogCaptureFixture) -> None:
    now = [0.0]
    rl = RepeatedLog(logging.getLogger("t.rl"), 60.0, clock=lambda: now[0])
    with caplog.at_level(logging.WARNING, logger="t.rl"):
        assert rl.error("k", "boom %s", 1)
        for i in range(999):
            now[0] += 0.01
            assert not rl.error("k", "boom %s", i)
        assert rl.error("other", "bang")  # another key has its own window
        now[0] = 61.0
        assert rl.error("k", "boom %s", "late")
    lines = [r.getMessage() for r in caplog.records]
    assert lines == ["boom 1", "bang", "boom late (repeated 999 times in the last 61 s)"]


def test_a_count_left_when_the_flood_stops_is_logged_by_the_next_sweep(caplog: pytest.LogCaptureFixture) -> None:
    now = [0.0]
    rl = RepeatedLog(logging.getLogger("t.rl3"), 60.0, clock=lambda: now[0])
    with caplog.at_level(logging.WARNING, logger="t.rl3"):
        for i in range(5):
            rl.error("flood", "flood %d", i)
        now[0] = 70.0
        rl.warning("else", "something else")  # any line sweeps the counts whose interval is over
        now[0] = 75.0
        rl.error("flood", "flood %d", 99)  # quiet since the sweep: logged as a first occurrence
    assert [r.getMessage() for r in caplog.records] == [
        "flood 0", "flood 4 (repeated 4 times in the last 70 s)", "something else", "flood 99"]
    assert [r.levelname for r in caplog.records] == ["ERROR", "ERROR", "WARNING", "ERROR"]


def test_keys_are_bounded(caplog: pytest.LogCaptureFixture) -> None:
    rl = RepeatedLog(logging.getLogger("t.rl2"), 60.0, max_keys=3, clock=lambda: 0.0)
    with caplog.at_level(logging.WARNING, logger="t.rl2"):
        for i in range(1000):
            rl.warning(i, "bad %d", i)
    assert len(caplog.records) == 4 and len(rl._state) == 4  # three keys and the shared bucket


def test_a_client_changing_its_id_at_every_heartbeat_logs_once_a_minute(caplog: pytest.LogCaptureFixture) -> None:
    g = ConsumerGroupInfo("G")
    data = ConsumerData("G")
    with caplog.at_level(logging.ERROR, logger="fastmq.broker"):
        for i in range(45_000):
            g.update_channel(ClientChannelInfo("conn", f"client-{i}", 0, 0), data)
    lines = [r for r in caplog.records if "clientId not equal" in r.getMessage()]
    assert len(lines) == 1, len(lines)
