"""RouteInfoManager, in process (the tables and their rules)."""
from __future__ import annotations

import time

from fastmq.namesrv.route_info import RouteInfoManager
from fastmq.protocol.bodies import DataVersion, RegisterBrokerBody, TopicConfig

M, S = "10.0.0.1:10911", "10.0.0.2:10911"


def _body(*topics: str, version: DataVersion | None = None, sys_flag: int = 0) -> RegisterBrokerBody:
    return RegisterBrokerBody({t: TopicConfig(t, 4, 4, 6, topic_sys_flag=sys_flag) for t in topics},
                              version or DataVersion(1, 1))


def test_master_and_slave_registration() -> None:
    ri = RouteInfoManager()
    r = ri.register_broker("c1", M, "b1", 0, "10.0.0.1:10912", _body("T"), None, conn="m")
    assert r.master_addr is None and r.ha_server_addr is None
    r = ri.register_broker("c1", S, "b1", 1, "10.0.0.2:10912", _body("T"), None, conn="s")
    assert (r.master_addr, r.ha_server_addr) == (M, "10.0.0.1:10912")
    route = ri.pickup_topic_route_data("T")
    assert route.broker_datas[0].broker_addrs == {0: M, 1: S}
    assert [(q.broker_name, q.write_queue_nums) for q in route.queue_datas] == [("b1", 4)]
    assert ri.pickup_topic_route_data("unknown") is None
    assert ri.get_all_cluster_info().cluster_addr_table == {"c1": {"b1"}}


def test_data_version_gates_topic_updates() -> None:
    ri = RouteInfoManager()
    v1 = DataVersion(1, 1)
    ri.register_broker("c", M, "b", 0, None, _body("A", version=v1), None)
    # Same version: a changed topic table is not re-read (RocketMQ trusts the version).
    ri.register_broker("c", M, "b", 0, None, _body("A", "B", version=DataVersion(1, 1)), None)
    assert ri.pickup_topic_route_data("B") is None
    assert not ri.is_broker_topic_config_changed(M, v1)
    ri.register_broker("c", M, "b", 0, None, _body("A", "B", version=DataVersion(2, 2)), None)
    assert ri.pickup_topic_route_data("B") is not None


def test_expiry_and_cleanup() -> None:
    ri = RouteInfoManager()
    ri.register_broker("c", M, "b", 0, None, _body("T"), None, conn="mc", now_ms=1000)
    ri.register_broker("c2", "10.0.0.9:10911", "b9", 0, None, _body("T", "U"), None, now_ms=100_000)
    closed = ri.scan_not_active_broker(120_000, now_ms=121_001)
    assert closed == ["mc"]
    route = ri.pickup_topic_route_data("T")
    assert [b.broker_name for b in route.broker_datas] == ["b9"]
    assert "c" not in ri.cluster_addr_table  # the cluster left empty is gone
    ri.scan_not_active_broker(120_000, now_ms=300_000)
    assert ri.topic_queue_table == {} and ri.cluster_addr_table == {} and ri.broker_addr_table == {}


def test_connection_close_removes_at_once_and_the_slave_keeps_queue_data() -> None:
    ri = RouteInfoManager()
    ri.register_broker("c", M, "b", 0, None, _body("T"), None, conn="mc")
    ri.register_broker("c", S, "b", 1, None, _body("T"), None, conn="sc")
    assert ri.on_channel_destroy("1.2.3.4:5", "mc") == M
    # As RocketMQ 4.9.8: the queue data stays while an address of the broker name is left, so
    # consumers read the dead master's messages from its slave (producers skip a name without master).
    route = ri.pickup_topic_route_data("T")
    assert route is not None and [q.broker_name for q in route.queue_datas] == ["b"]
    assert [b.broker_addrs for b in route.broker_datas] == [{1: S}]
    assert ri.on_channel_destroy(S, None) == S               # found by address as well
    assert ri.pickup_topic_route_data("T") is None           # no address left: the queues go
    assert ri.broker_addr_table == {} and ri.cluster_addr_table == {} and ri.topic_queue_table == {}
    # the same when the master unregisters (a clean shutdown), and when it expires
    ri.register_broker("c", M, "b", 0, None, _body("T"), None, conn="mc")
    ri.register_broker("c", S, "b", 1, None, _body("T"), None, conn="sc")
    ri.unregister_broker("c", M, "b", 0)
    assert [b.broker_addrs for b in ri.pickup_topic_route_data("T").broker_datas] == [{1: S}]
    ri.register_broker("c", M, "b", 0, None, _body("T"), None, conn="mc")
    t = int(time.time() * 1000)
    ri.update_broker_timestamp(S, now_ms=t + 150_000)
    ri.scan_not_active_broker(120_000, now_ms=t + 200_000)     # the master silent, the slave not
    assert [b.broker_addrs for b in ri.pickup_topic_route_data("T").broker_datas] == [{1: S}]
    assert ri.on_channel_destroy("nobody:1", "x") is None


def test_unregister_and_wipe_perm() -> None:
    ri = RouteInfoManager()
    ri.register_broker("c", M, "b", 0, None, _body("T", "U"), None)
    assert ri.wipe_write_perm_of_broker("b") == 2
    assert ri.pickup_topic_route_data("T").queue_datas[0].perm == 4
    assert ri.add_write_perm_of_broker("b") == 2
    ri.unregister_broker("c", M, "b", 0)
    assert ri.get_all_topic_list().topic_list == set()


def test_topic_lists() -> None:
    ri = RouteInfoManager()
    ri.register_broker("c", M, "b", 0, None, _body("T"), None)
    ri.register_broker("c", "10.0.0.3:1", "u", 0, None, _body("UNIT", sys_flag=1), None)
    ri.register_broker("d", "10.0.0.4:1", "s", 0, None, _body("SUB", sys_flag=2), None)
    assert ri.get_topics_by_cluster("c").topic_list == {"T", "UNIT"}
    assert ri.get_unit_topics().topic_list == {"UNIT"}
    assert ri.get_has_unit_sub_topic_list().topic_list == {"SUB"}
    assert ri.get_has_unit_sub_ununit_topic_list().topic_list == {"SUB"}
    sys_topics = ri.get_system_topic_list()
    assert {"c", "d", "b", "u", "s"} <= sys_topics.topic_list and sys_topics.broker_addr
    ri.delete_topic("T", "c")
    assert ri.pickup_topic_route_data("T") is None


def test_slave_address_reused_as_master() -> None:
    ri = RouteInfoManager()
    ri.register_broker("c", S, "b", 1, None, _body("T"), None)
    ri.register_broker("c", S, "b", 0, None, _body("T"), None)  # promoted: one record per address
    assert ri.broker_addr_table["b"].broker_addrs == {0: S}


def test_unregister_removes_the_named_id_and_slave_keeps_topics() -> None:
    ri = RouteInfoManager()
    ri.register_broker("c", M, "b", 0, "10.0.0.1:10912", _body("T"), None)
    ri.register_broker("c", S, "b", 1, None, _body("T"), None)
    ri.unregister_broker("c", S, "b", 1)
    assert ri.broker_addr_table["b"].broker_addrs == {0: M} and S not in ri.broker_live_table
    assert ri.pickup_topic_route_data("T") is not None      # a slave leaving keeps the queues
    ri.unregister_broker("c", M, "b", 0)
    assert ri.topic_queue_table == {} and ri.cluster_addr_table == {} and ri.broker_addr_table == {}
    ri.unregister_broker("c", M, "b", 0)                     # twice is harmless


def test_slave_before_master_gets_no_master_then_does() -> None:
    ri = RouteInfoManager()
    r = ri.register_broker("c", S, "b", 1, None, _body("T"), None)
    assert (r.master_addr, r.ha_server_addr) == (None, None)
    assert ri.pickup_topic_route_data("T") is None          # a slave's topics are not routed
    ri.register_broker("c", M, "b", 0, "10.0.0.1:10912", _body("T"), None)
    r = ri.register_broker("c", S, "b", 1, None, _body("T"), None)
    assert (r.master_addr, r.ha_server_addr) == (M, "10.0.0.1:10912")


def test_first_registration_reads_topics_whatever_the_version() -> None:
    ri = RouteInfoManager()
    ri.register_broker("c", M, "b", 0, None, _body("A", version=DataVersion(5, 5)), None)
    ri.on_channel_destroy(M, None)
    # Same data version as before the broker left: it is a first registration again.
    ri.register_broker("c", M, "b", 0, None, _body("A", version=DataVersion(5, 5)), None)
    assert ri.pickup_topic_route_data("A") is not None
    assert ri.query_broker_topic_config(M) == DataVersion(5, 5)
    assert ri.query_broker_topic_config("nobody:1") is None


def test_heartbeat_timestamp_postpones_expiry() -> None:
    ri = RouteInfoManager()
    ri.register_broker("c", M, "b", 0, None, _body("T"), None, now_ms=0)
    ri.update_broker_timestamp(M, now_ms=100_000)
    assert ri.scan_not_active_broker(120_000, now_ms=200_000) == []
    assert ri.pickup_topic_route_data("T") is not None
    ri.scan_not_active_broker(120_000, now_ms=220_001)
    assert ri.pickup_topic_route_data("T") is None


def test_filter_servers_follow_registration() -> None:
    ri = RouteInfoManager()
    ri.register_broker("c", M, "b", 0, None, _body("T"), ["10.0.0.1:30000"])
    assert ri.pickup_topic_route_data("T").filter_server_table == {M: ["10.0.0.1:30000"]}
    ri.register_broker("c", M, "b", 0, None, _body("T"), None)   # None: left alone
    assert ri.filter_server_table == {M: ["10.0.0.1:30000"]}
    ri.register_broker("c", M, "b", 0, None, _body("T"), [])     # empty: removed
    assert ri.filter_server_table == {}


def test_system_topic_list_names_a_master_and_delete_topic_everywhere() -> None:
    ri = RouteInfoManager()
    ri.register_broker("c", S, "b", 1, None, _body("T"), None)
    ri.register_broker("c", M, "b", 0, None, _body("T"), None)
    tl = ri.get_system_topic_list()
    assert tl.topic_list == {"c", "b"} and tl.broker_addr == M
    assert ri.get_system_topic_list().to_json()  # serialisable as sent
    ri.delete_topic("T")
    assert ri.get_all_topic_list().topic_list == set()
    ri.delete_topic("T")
    ri.delete_topic("T", "no-such-cluster")


def test_unit_sub_ununit_excludes_unit_topics() -> None:
    ri = RouteInfoManager()
    ri.register_broker("c", M, "b", 0, None, _body("BOTH", sys_flag=3), None)
    assert ri.get_unit_topics().topic_list == {"BOTH"}
    assert ri.get_has_unit_sub_topic_list().topic_list == {"BOTH"}
    assert ri.get_has_unit_sub_ununit_topic_list().topic_list == set()


def test_a_second_live_master_of_a_name_is_refused(caplog) -> None:
    """Issue 32, item 1: a copied config file (same brokerName, brokerId=0) must not flip the
    master address; the newcomer is refused, with an ERROR naming both, and nothing changes."""
    other = "10.0.0.3:10911"
    ri = RouteInfoManager()
    ri.register_broker("c", M, "b", 0, "10.0.0.1:10912", _body("T"), None, conn="mc", now_ms=1000)
    ri.register_broker("c", S, "b", 1, None, _body("T"), None, conn="sc", now_ms=1000)
    with caplog.at_level("ERROR", logger="fastmq.namesrv"):
        r = ri.register_broker("c", other, "b", 0, None, _body("T", "Only"), None, conn="oc", now_ms=2000)
    assert r.refused is not None and M in r.refused and other in r.refused
    assert [rec for rec in caplog.records if rec.levelname == "ERROR" and M in rec.getMessage()
            and other in rec.getMessage()]
    assert ri.pickup_topic_route_data("T").broker_datas[0].broker_addrs == {0: M, 1: S}
    assert ri.pickup_topic_route_data("Only") is None and other not in ri.broker_live_table
    # Its stop (UNREGISTER_BROKER names the id) leaves the live holder routed.
    ri.unregister_broker("c", other, "b", 0)
    assert ri.pickup_topic_route_data("T").broker_datas[0].broker_addrs == {0: M, 1: S}
    # The holder re-registering, and the slave, are unaffected.
    assert ri.register_broker("c", M, "b", 0, None, _body("T"), None, conn="mc", now_ms=3000).refused is None
    r = ri.register_broker("c", S, "b", 1, None, _body("T"), None, conn="sc", now_ms=3000)
    assert r.refused is None and r.master_addr == M


def test_the_name_is_free_once_its_master_is_gone() -> None:
    """A restart on another address after the first's connection closed, a replacement after a
    clean stop, and one after the holder expired are all taken at once."""
    a, b, c = "10.0.0.3:1", "10.0.0.4:1", "10.0.0.5:1"
    ri = RouteInfoManager()
    ri.register_broker("c", M, "b", 0, None, _body("T"), None, conn="mc", now_ms=1000)
    assert ri.on_channel_destroy("x", "mc") == M
    assert ri.register_broker("c", a, "b", 0, None, _body("T"), None, conn="ac", now_ms=1000).refused is None
    ri.unregister_broker("c", a, "b", 0)
    assert ri.register_broker("c", b, "b", 0, None, _body("T"), None, conn="bc", now_ms=1000).refused is None
    assert ri.register_broker("c", c, "b", 0, None, _body("T"), None, conn="cc", now_ms=100_000).refused is not None
    assert ri.register_broker("c", c, "b", 0, None, _body("T"), None, conn="cc", now_ms=121_001).refused is None
    assert ri.pickup_topic_route_data("T").broker_datas[0].broker_addrs == {0: c}
    # A slave promoted in place (the master gone) takes id 0 and leaves its slave id.
    ri.register_broker("c", S, "b", 1, None, _body("T"), None, conn="sc", now_ms=121_001)
    ri.on_channel_destroy("x", "cc")
    assert ri.register_broker("c", S, "b", 0, None, _body("T"), None, conn="sc", now_ms=121_002).refused is None
    assert ri.pickup_topic_route_data("T").broker_datas[0].broker_addrs == {0: S}
