"""The client's timer-message settings on :class:`fastmq.Message` (shared by the asyncio and
blocking clients) and the broker's check of the three properties, without processes."""
from __future__ import annotations

import time

import pytest

from fastmq import Message, MessageValidationError, TimerMessageError
from fastmq.broker.timer import check_timer_message, timer_precision
from fastmq.protocol.codes import ResponseCode
from fastmq.protocol.message import MessageConst, MessageExt
from fastmq.store.config import MessageStoreConfig


def now_ms() -> int:
    return int(time.time() * 1000)


def test_keywords_set_5x_properties() -> None:
    at = now_ms() + 60_000
    m = Message("T", b"x", deliver_time_ms=at)
    assert m.properties == {"TIMER_DELIVER_MS": str(at)} and m.deliver_time_ms == at
    m = Message("T", b"x", properties={"TAGS": "a"}, delay_time_ms=1500)
    assert m.properties == {"TAGS": "a", "TIMER_DELAY_MS": "1500"} and m.delay_time_ms == 1500
    assert Message("T").deliver_time_ms is None and Message("T").delay_time_ms is None


def test_setters_replace_each_other_and_clear() -> None:
    m = Message("T", b"x")
    m.set_delay_time_ms(2000)
    m.set_deliver_time_ms(now_ms() + 5000)
    assert "TIMER_DELAY_MS" not in m.properties and m.deliver_time_ms is not None
    m.delay_time_ms = 10
    assert "TIMER_DELIVER_MS" not in m.properties
    m.delay_time_ms = None
    assert m.properties == {}


@pytest.mark.parametrize("kwargs", [
    {"deliver_time_ms": 1000},                               # the past
    {"deliver_time_ms": 4 * 86_400_000},                     # long ago (a delay given as a time)
    {"delay_time_ms": 0}, {"delay_time_ms": -5},
    {"delay_time_ms": 3 * 86_400_000 + 1},                   # too far
    {"delay_time_ms": 1.5}, {"delay_time_ms": True}, {"deliver_time_ms": "123"},
])
def test_bad_times_are_refused_typed(kwargs) -> None:
    with pytest.raises(TimerMessageError) as e:
        Message("T", b"x", **kwargs)
    assert isinstance(e.value, MessageValidationError) and isinstance(e.value, ValueError)


def test_far_deliver_time_and_both_refused() -> None:
    with pytest.raises(TimerMessageError, match="beyond"):
        Message("T", deliver_time_ms=now_ms() + 3 * 86_400_000 + 60_000)
    with pytest.raises(TimerMessageError, match="not both"):
        Message("T", deliver_time_ms=now_ms() + 1000, delay_time_ms=1000)


def _msg(props: dict[str, str], sys_flag: int = 0) -> MessageExt:
    return MessageExt(topic="T", body=b"x", properties=dict(props), queue_id=3, sys_flag=sys_flag)


@pytest.mark.parametrize("value,snapped", [(1, 100), (100, 100), (199, 100), (200, 200), (999, 500), (5000, 1000)])
def test_precision_snaps_as_5x(value, snapped) -> None:
    assert timer_precision(value) == snapped


@pytest.mark.parametrize("deliver,slot", [(10_500, 10_000), (11_000, 10_000), (10_001, 10_000)])
def test_rounding(deliver, slot) -> None:
    cfg = MessageStoreConfig()
    m = _msg({"TIMER_DELIVER_MS": str(deliver)})
    assert check_timer_message(m, cfg, now=5_000) is None
    assert (m.topic, m.queue_id) == ("rmq_sys_wheel_timer", 0)
    p = m.properties
    assert (p["TIMER_OUT_MS"], p["REAL_TOPIC"], p["REAL_QID"]) == (str(slot), "T", "3")


def test_switch_off_refuses_with_system_error() -> None:
    cfg = MessageStoreConfig(timerWheelEnable=False)
    assert check_timer_message(_msg({"TIMER_DELAY_SEC": "1"}), cfg, 0) == (
        ResponseCode.SYSTEM_ERROR, "accurate timer message is not enabled, timerWheelEnable is false")
    m = _msg({"TIMER_DELAY_SEC": "1", "DELAY": "2"})  # a level wins even then
    assert check_timer_message(m, cfg, 0) is None and m.properties == {"DELAY": "2"}


def test_halves_and_resent_deliveries_are_left_alone() -> None:
    cfg = MessageStoreConfig()
    half = _msg({"TIMER_DELAY_SEC": "5"}, sys_flag=0x4)
    assert check_timer_message(half, cfg, 0) is None and half.topic == "T"
    again = _msg({"TIMER_DELAY_SEC": "5", MessageConst.TIMER_OUT_MS: "1000"})
    assert check_timer_message(again, cfg, 0) is None and again.topic == "T"
