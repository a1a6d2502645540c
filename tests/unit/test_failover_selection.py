"""Issue 17: a retry never goes back to the broker whose try just failed while another broker has
a queue, and an unreachable broker is never chosen while a reachable one can take the message;
in every selection step, fallbacks included, for both twins and through the producer's own
``_select`` (which uses whichever twin this run imports)."""
from __future__ import annotations

import importlib
import time

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from fastmq.aio import Producer
from fastmq.client.publish_info import TopicPublishInfo
from fastmq.protocol.bodies import BrokerData, QueueData, TopicRouteData
from tests.support import examples

NOW = 1_000_000


def test_unreachable_flag(fault) -> None:
    t = fault.FaultTable(2)
    assert t.is_reachable(0) and t.is_reachable(99) and t.unreachable_brokers() == []
    t.mark_unreachable(5)                     # grows the table
    assert t.capacity >= 6 and not t.is_reachable(5) and t.unreachable_brokers() == [5]
    t.update(5, 3, True, NOW)
    t.remove(5)                               # dropping the fault item does not make it reachable
    assert not t.is_reachable(5) and t.is_available(5, NOW)
    t.update(9, 3, False, NOW)                # growing again keeps the flag
    assert t.unreachable_brokers() == [5]
    t.mark_reachable(5)
    t.mark_reachable(1000)                    # unknown: nothing to do
    assert t.is_reachable(5) and t.unreachable_brokers() == []


def test_pick_one_at_least_never_the_dead_fast_broker(fault) -> None:
    # The case: broker 0 died (refusals are fast: 2 ms "latency", failed), broker 1 is
    # alive but answered one send in 1.4 s. Both are penalised; by latency alone 0 would win.
    t = fault.FaultTable()
    t.update(0, 2, True, NOW)
    t.update(1, 1400, False, NOW)
    assert {t.pick_one_at_least(NOW) for _ in range(4)} == {0}   # 4.9's rule, before the flag
    t.mark_unreachable(0)
    assert {t.pick_one_at_least(NOW) for _ in range(4)} == {1}
    assert t.pick_one_at_least(NOW, 1) == -1                     # 1 just failed, 0 unreachable: none
    t.mark_reachable(0)
    assert {t.pick_one_at_least(NOW, 0) for _ in range(4)} == {1}  # the one that just failed is avoided


def _matching_fault(selector):
    return importlib.import_module(selector.__name__.replace("selector", "fault"))


def test_select_queue_fault_passes_over_unreachable(selector) -> None:
    fault = _matching_fault(selector)
    qb = np.array([0, 1, 2], dtype=np.int32)
    t = fault.FaultTable(3)
    t.mark_unreachable(1)
    assert selector.select_queue_fault(qb, 1, -1, t.present, t.available_from, NOW, t.unreachable) == 2
    assert selector.select_queue_fault(qb, 1, -1, t.present, t.available_from, NOW) == 1  # no flags given
    assert selector.select_queue_fault(qb, 1, 2, t.present, t.available_from, NOW, t.unreachable) == 0
    qt = selector.QueueTable([0, 1, 2])
    assert qt.select_fault(1, -1, t, NOW) == 2 and qt.select_fault(1, 2, t, NOW) == 0


def test_select_reachable_preference_order(selector) -> None:
    fault = _matching_fault(selector)
    t = fault.FaultTable(2)
    qt = selector.QueueTable([0, 0, 1, 1])
    assert [qt.select_reachable(c, -1, t) for c in range(5)] == [0, 1, 2, 3, 0]   # plain round robin
    assert {qt.select_reachable(c, 0, t) for c in range(4)} == {2, 3}             # not the last failed
    t.mark_unreachable(1)
    assert {qt.select_reachable(c, -1, t) for c in range(4)} == {0, 1}            # not the unreachable
    # 0 just failed but answered; 1 refuses connections: 0 again rather than a known-dead broker
    assert {qt.select_reachable(c, 0, t) for c in range(4)} == {0, 1}
    t.mark_unreachable(0)
    assert {qt.select_reachable(c, 0, t) for c in range(4)} == {2, 3}             # all dead: not the last
    assert {qt.select_reachable(c, -1, t) for c in range(4)} == {0, 1, 2, 3}
    assert selector.QueueTable([]).select_reachable(3, -1, t) == -1
    # broker 2 is past the flags' end (reachable) and just failed; 1 is not: 2 again
    assert selector.select_queue_reachable(np.array([1, 2], dtype=np.int32), 0, 2, t.unreachable) == 1


_tables = st.lists(st.tuples(st.integers(0, 5), st.integers(0, 20000), st.booleans(), st.integers(-700_000, 0)),
                   max_size=10)


@pytest.mark.c_ext
@settings(max_examples=examples(200), deadline=None)
@given(brokers=st.lists(st.integers(0, 5), max_size=12), counter=st.integers(-2**40, 2**40),
       last=st.integers(-1, 6), updates=_tables, dead=st.sets(st.integers(0, 7)), now=st.integers(0, 700_000))
def test_twins_agree_with_unreachable(brokers, counter, last, updates, dead, now) -> None:
    out = []
    for kind in ("py", "c"):
        t = importlib.import_module(f"fastmq._ext.fault_{kind}").FaultTable(2)
        for b, lat, iso, at in updates:
            t.update(b, lat, iso, NOW + at)
        for b in dead:
            t.mark_unreachable(b)
        sel = importlib.import_module(f"fastmq._ext.selector_{kind}")
        qt = sel.QueueTable(brokers)
        qb = np.array(brokers, dtype=np.int32)
        out.append((qt.select_fault(counter, last, t, NOW + now), qt.select_reachable(counter, last, t),
                    sel.select_queue_fault(qb, counter, last, t.present, t.available_from, NOW + now, t.unreachable),
                    sel.select_queue_reachable(qb, counter, last, t.unreachable),
                    [t.pick_one_at_least(NOW + now, last) for _ in range(3)], t.unreachable_brokers()))
    assert out[0] == out[1]


def _producer_and_info(brokers: list[int], fault_enable: bool) -> tuple[Producer, TopicPublishInfo]:
    p = Producer("PG_SELECT", namesrv_addr="127.0.0.1:1", send_latency_fault_enable=fault_enable)
    names = sorted({f"b{b}" for b in brokers})
    for b in range(8):
        p._numbers.number(f"b{b}")  # broker bN is number N
    counts = {n: sum(1 for b in brokers if f"b{b}" == n) for n in names}
    route = TopicRouteData(queue_datas=[QueueData(n, c, c, 6) for n, c in counts.items()],
                           broker_datas=[BrokerData("c", n, {0: f"127.0.0.1:{10000 + int(n[1:])}"}) for n in names])
    return p, TopicPublishInfo.from_route("T", route, p._numbers)


@settings(max_examples=examples(300), deadline=None)
@given(brokers=st.lists(st.integers(0, 5), min_size=1, max_size=12), last=st.integers(-1, 6), updates=_tables,
       dead=st.sets(st.integers(0, 6)), fault_enable=st.booleans(), rounds=st.integers(1, 6))
def test_producer_select_never_last_failed_nor_unreachable(brokers, last, updates, dead, fault_enable,
                                                           rounds) -> None:
    """Whatever the penalties: a reachable broker other than the one that just failed is chosen
    whenever one has a queue; else a reachable one; an unreachable one only when no other is left."""
    p, info = _producer_and_info(brokers, fault_enable)
    now = int(time.time() * 1000)  # the producer reads the wall clock
    for b, lat, iso, at in updates:
        p._faults.update(b, lat, iso, now + at)
    for b in dead:
        p._faults.mark_unreachable(b)
    last_name = f"b{last}" if last >= 0 else None
    have = {int(mq.broker_name[1:]) for mq in info.queues}
    good = {b for b in have if b != last and b not in dead}
    for _ in range(rounds):
        chosen = int(p._select(info, last_name).broker_name[1:])
        if good:
            assert chosen in good
        elif have - dead:
            assert chosen not in dead
        elif have - {last}:
            assert chosen != last


def test_publish_info_skips_a_broker_name_without_master() -> None:
    # what the NameServer answers once broker a's master died and its slave is left
    p = Producer("PG_NO_MASTER", namesrv_addr="127.0.0.1:1")
    route = TopicRouteData(queue_datas=[QueueData("a", 4, 4, 6), QueueData("b", 4, 4, 6)],
                           broker_datas=[BrokerData("c", "a", {1: "127.0.0.1:2"}),
                                         BrokerData("c", "b", {0: "127.0.0.1:3"})])
    info = TopicPublishInfo.from_route("T", route, p._numbers)
    assert {mq.broker_name for mq in info.queues} == {"b"} and info.masters == {"b": "127.0.0.1:3"}
    assert {p._select(info, None).broker_name for _ in range(8)} == {"b"}
    assert p._select(info, "b").broker_name == "b"   # the only broker that can take it
