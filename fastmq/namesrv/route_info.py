"""RouteInfoManager: the NameServer's five tables, and every change made to them.

    topic_queue_table    topic -> {broker name -> QueueData}
    broker_addr_table    broker name -> BrokerData (cluster, {broker id -> address})
    cluster_addr_table   cluster -> {broker names}
    broker_live_table    broker address -> BrokerLiveInfo (last heartbeat, data version, connection, HA address)
    filter_server_table  broker address -> [filter server addresses]

Requests are served on the event loop, but the expiry scan and admin requests may run elsewhere,
so every method takes a lock: shared for reads, exclusive for writes (a reader–writer lock, as
RocketMQ's ReentrantReadWriteLock). A write is applied to all the tables before any reader sees it.

Removal follows RocketMQ 4.9.8's RouteInfoManager: an address goes when its connection closes, it
expires, or it unregisters; a broker name's queue data goes only when no address of that name is
left. A dead master thus leaves its slave routed, and readable: producers pass over a broker name
without a master (TopicPublishInfo), consumers pull from the slave until the master is back.
Clusters and topics left empty are dropped.
"""
from __future__ import annotations

import logging
import threading
import time
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any, Iterator

from ..protocol.bodies import (MASTER_ID, BrokerData, ClusterInfo, DataVersion, QueueData, RegisterBrokerBody,
                               TopicList, TopicRouteData)
from ..protocol.topic import PERM_READ, PERM_WRITE

__all__ = ["RouteInfoManager", "BrokerLiveInfo", "RegisterBrokerResult", "BROKER_CHANNEL_EXPIRED_MS"]

log = logging.getLogger("fastmq.namesrv")

#: A broker silent this long is dropped (RouteInfoManager.BROKER_CHANNEL_EXPIRED_TIME).
BROKER_CHANNEL_EXPIRED_MS = 120_000

#: TopicSysFlag bits.
FLAG_UNIT = 0x1
FLAG_UNIT_SUB = 0x2


def _now_ms() -> int:
    return int(time.time() * 1000)


@dataclass
class BrokerLiveInfo:
    last_update_ms: int
    data_version: DataVersion
    conn: Any = None
    ha_server_addr: str | None = None


@dataclass
class RegisterBrokerResult:
    ha_server_addr: str | None = None
    master_addr: str | None = None
    #: Set when the registration was refused (and nothing changed): the text to answer with.
    refused: str | None = None


class _RWLock:
    """Many readers or one writer; writers are not starved by a stream of readers."""

    def __init__(self) -> None:
        self._cond = threading.Condition(threading.Lock())
        self._readers = 0
        self._writer = False
        self._waiting_writers = 0

    @contextmanager
    def read(self) -> Iterator[None]:
        with self._cond:
            while self._writer or self._waiting_writers:
                self._cond.wait()
            self._readers += 1
        try:
            yield
        finally:
            with self._cond:
                self._readers -= 1
                if not self._readers:
                    self._cond.notify_all()

    @contextmanager
    def write(self) -> Iterator[None]:
        with self._cond:
            self._waiting_writers += 1
            while self._writer or self._readers:
                self._cond.wait()
            self._waiting_writers -= 1
            self._writer = True
        try:
            yield
        finally:
            with self._cond:
                self._writer = False
                self._cond.notify_all()


@dataclass
class RouteInfoManager:
    topic_queue_table: dict[str, dict[str, QueueData]] = field(default_factory=dict)
    broker_addr_table: dict[str, BrokerData] = field(default_factory=dict)
    cluster_addr_table: dict[str, set[str]] = field(default_factory=dict)
    broker_live_table: dict[str, BrokerLiveInfo] = field(default_factory=dict)
    filter_server_table: dict[str, list[str]] = field(default_factory=dict)

    #: The largest read or write queue count a registered topic may have; a topic above it (or
    #: below 0) is left out of the routes, because every client that read it would try to
    #: build that many queues.
    max_topic_queue_nums: int = 1024

    def __post_init__(self) -> None:
        self._lock = _RWLock()

    def _queue_nums_ok(self, broker_addr: str, tc: Any) -> bool:
        hi = self.max_topic_queue_nums
        if 0 <= tc.read_queue_nums <= hi and 0 <= tc.write_queue_nums <= hi:
            return True
        log.error("broker %s registers topic %s with %d read and %d write queues, outside 0..%d "
                  "(maxTopicQueueNums): the topic's queues on this broker are left out of the routes",
                  broker_addr, tc.topic_name[:200], tc.read_queue_nums, tc.write_queue_nums, hi)
        return False

    # --------------------------------------------------------- register

    def register_broker(self, cluster: str, broker_addr: str, broker_name: str, broker_id: int,
                        ha_server_addr: str | None, body: RegisterBrokerBody | None,
                        filter_server_list: list[str] | None = None, conn: Any = None,
                        now_ms: int | None = None) -> RegisterBrokerResult:
        """Record a broker's (re-)registration; a slave learns its master's address and HA address."""
        now = _now_ms() if now_ms is None else now_ms
        result = RegisterBrokerResult()
        with self._lock.write():
            bd = self.broker_addr_table.get(broker_name)
            holder = self._live_other_master_locked(bd, broker_addr, broker_id, now)
            if holder is not None:
                result.refused = (
                    f"brokerName [{broker_name}] brokerId 0 of cluster [{cluster}] is held by the live master "
                    f"{holder}, so the master {broker_addr} claiming it too is refused: two brokers must not "
                    f"share a brokerName and brokerId=0 (a copied config file?). Give {broker_addr} its own "
                    f"brokerName, or a brokerId > 0 to make it a slave, or stop {holder} first")
                log.error("registerBroker refused: %s", result.refused)
                return result
            self.cluster_addr_table.setdefault(cluster, set()).add(broker_name)
            register_first = bd is None
            if bd is None:
                bd = self.broker_addr_table[broker_name] = BrokerData(cluster, broker_name, {})
            # One address, one id: a slave promoted to master must not stay listed as a slave.
            for bid in [b for b, a in bd.broker_addrs.items() if a == broker_addr and b != broker_id]:
                del bd.broker_addrs[bid]
            old_addr = bd.broker_addrs.get(broker_id)
            bd.broker_addrs[broker_id] = broker_addr
            if broker_id == MASTER_ID and old_addr != broker_addr:
                log.info("cluster [%s] brokerName [%s] master address change from %s to %s", cluster,
                         broker_name, old_addr, broker_addr)
            register_first = register_first or old_addr is None
            version = body.data_version if body is not None else DataVersion(0, 0)
            if body is not None and broker_id == MASTER_ID:
                prev = self.broker_live_table.get(broker_addr)
                if register_first or prev is None or prev.data_version != version:
                    for tc in body.topic_config_table.values():
                        if not self._queue_nums_ok(broker_addr, tc):
                            qmap = self.topic_queue_table.get(tc.topic_name)
                            if qmap is not None:  # an earlier, sane registration is stale now
                                qmap.pop(broker_name, None)
                                if not qmap:
                                    del self.topic_queue_table[tc.topic_name]
                            continue
                        qd = QueueData(broker_name, tc.read_queue_nums, tc.write_queue_nums, tc.perm,
                                       tc.topic_sys_flag)
                        qmap = self.topic_queue_table.setdefault(tc.topic_name, {})
                        old = qmap.get(broker_name)
                        qmap[broker_name] = qd
                        if old is None:
                            log.info("new topic registered, %s %s", tc.topic_name, qd)
                        elif old != qd:
                            log.info("topic changed, %s OLD: %s NEW: %s", tc.topic_name, old, qd)
            prev_live = self.broker_live_table.get(broker_addr)
            self.broker_live_table[broker_addr] = BrokerLiveInfo(now, version, conn, ha_server_addr)
            if prev_live is None:
                log.info("new broker registered, %s HAServer: %s", broker_addr, ha_server_addr)
            if filter_server_list is not None:
                if filter_server_list:
                    self.filter_server_table[broker_addr] = list(filter_server_list)
                else:
                    self.filter_server_table.pop(broker_addr, None)
            if broker_id != MASTER_ID:
                master = bd.broker_addrs.get(MASTER_ID)
                if master is not None:
                    live = self.broker_live_table.get(master)
                    if live is not None:
                        result.ha_server_addr = live.ha_server_addr
                        result.master_addr = master
        return result

    def _live_other_master_locked(self, bd: BrokerData | None, broker_addr: str, broker_id: int,
                                  now: int) -> str | None:
        """The address of another live master of ``bd``'s name, when ``broker_addr`` claims id 0.

        4.9.8 lets the newcomer overwrite the master address, and two live masters of one name
        then take turns at every registration: producers split sends across both and a consumer
        group's offsets, kept per broker name, skip what the other one stored. The holder counts
        as live until its connection closes, it unregisters or it expires, so a broker restarted
        on another address and a replacement after a clean stop are taken at once.
        """
        if broker_id != MASTER_ID or bd is None:
            return None
        held = bd.broker_addrs.get(MASTER_ID)
        if held is None or held == broker_addr:
            return None
        live = self.broker_live_table.get(held)
        if live is None or live.last_update_ms + BROKER_CHANNEL_EXPIRED_MS < now:
            return None
        return held

    def is_broker_topic_config_changed(self, broker_addr: str, version: DataVersion) -> bool:
        with self._lock.read():
            prev = self.broker_live_table.get(broker_addr)
            return prev is None or prev.data_version != version

    def query_broker_topic_config(self, broker_addr: str) -> DataVersion | None:
        with self._lock.read():
            prev = self.broker_live_table.get(broker_addr)
            return prev.data_version if prev else None

    def update_broker_timestamp(self, broker_addr: str, now_ms: int | None = None) -> None:
        """A QUERY_DATA_VERSION counts as a heartbeat, as in RocketMQ."""
        with self._lock.write():
            prev = self.broker_live_table.get(broker_addr)
            if prev is not None:
                prev.last_update_ms = _now_ms() if now_ms is None else now_ms

    # ---------------------------------------------------------- removal

    def _remove_addr_locked(self, broker_addr: str, broker_name: str | None = None,
                            broker_id: int | None = None) -> None:
        self.broker_live_table.pop(broker_addr, None)
        self.filter_server_table.pop(broker_addr, None)
        for name, bd in list(self.broker_addr_table.items()):
            if broker_name is not None and name != broker_name:
                continue
            if broker_id is not None:
                # UNREGISTER_BROKER names the id: RocketMQ removes that id whatever address it holds.
                ids = [broker_id] if broker_id in bd.broker_addrs else []
            else:
                ids = [bid for bid, a in bd.broker_addrs.items() if a == broker_addr]
            if not ids:
                continue
            for bid in ids:
                del bd.broker_addrs[bid]
                log.info("remove brokerAddr[%s, %s] from brokerAddrTable", bid, broker_addr)
            gone = not bd.broker_addrs
            if gone:
                del self.broker_addr_table[name]
                log.info("remove brokerName[%s] from brokerAddrTable", name)
                for cluster, names in list(self.cluster_addr_table.items()):
                    if name in names:
                        names.discard(name)
                        if not names:
                            del self.cluster_addr_table[cluster]
                            log.info("remove cluster[%s] from clusterAddrTable, because no broker", cluster)
            if gone:
                self._remove_topics_of_broker_locked(name)
            break

    def _remove_topics_of_broker_locked(self, broker_name: str) -> None:
        for topic in list(self.topic_queue_table):
            qmap = self.topic_queue_table[topic]
            if qmap.pop(broker_name, None) is not None:
                log.info("removeTopicByBrokerName, remove one broker's topic %s %s", topic, broker_name)
            if not qmap:
                del self.topic_queue_table[topic]
                log.info("removeTopicByBrokerName, remove the topic all queue %s", topic)

    def unregister_broker(self, cluster: str, broker_addr: str, broker_name: str, broker_id: int) -> None:
        with self._lock.write():
            if self.broker_live_table.pop(broker_addr, None) is not None:
                log.info("unregisterBroker, remove from brokerLiveTable OK, %s", broker_addr)
            bd = self.broker_addr_table.get(broker_name)
            held = bd.broker_addrs.get(broker_id) if bd is not None else None
            if held is not None and held != broker_addr and held in self.broker_live_table:
                # A broker whose registration was refused (its name and id held by another live
                # broker) stopping: removing the id, as 4.9.8 does whatever address holds it,
                # would unroute the live holder.
                log.warning("unregisterBroker from %s ignored: brokerName [%s] brokerId %d is held by the live "
                            "broker %s", broker_addr, broker_name, broker_id, held)
                return
            self._remove_addr_locked(broker_addr, broker_name, broker_id)

    def on_channel_destroy(self, remote_addr: str | None, conn: Any = None) -> str | None:
        """A connection closed: drop the broker it belonged to, at once. Returns its address."""
        with self._lock.write():
            found = None
            if conn is not None:
                for addr, live in self.broker_live_table.items():
                    if live.conn is conn:
                        found = addr
                        break
            if found is None and remote_addr and remote_addr in self.broker_live_table:
                found = remote_addr
            if found is None:
                return None
            log.info("the broker's channel destroyed, %s, clean it's data structure at once", found)
            self._remove_addr_locked(found)
            return found

    def scan_not_active_broker(self, expire_ms: int = BROKER_CHANNEL_EXPIRED_MS,
                               now_ms: int | None = None) -> list[Any]:
        """Drop brokers silent for ``expire_ms``; returns their connections for the caller to close."""
        now = _now_ms() if now_ms is None else now_ms
        conns = []
        with self._lock.write():
            for addr, live in list(self.broker_live_table.items()):
                if live.last_update_ms + expire_ms < now:
                    log.warning("The broker channel expired, %s %dms", addr, expire_ms)
                    conns.append(live.conn)
                    self._remove_addr_locked(addr)
        return [c for c in conns if c is not None]

    # ------------------------------------------------------------ route

    def pickup_topic_route_data(self, topic: str) -> TopicRouteData | None:
        """The route of ``topic``, or None when no broker serves it."""
        with self._lock.read():
            qmap = self.topic_queue_table.get(topic)
            if not qmap:
                return None
            route = TopicRouteData(queue_datas=[QueueData(q.broker_name, q.read_queue_nums, q.write_queue_nums,
                                                          q.perm, q.topic_sys_flag) for q in qmap.values()])
            for name in qmap:
                bd = self.broker_addr_table.get(name)
                if bd is None:
                    continue
                route.broker_datas.append(BrokerData(bd.cluster, bd.broker_name, dict(bd.broker_addrs)))
                for addr in bd.broker_addrs.values():
                    fs = self.filter_server_table.get(addr)
                    if fs is not None:
                        route.filter_server_table[addr] = list(fs)
            return route if route.broker_datas else None

    def wipe_write_perm_of_broker(self, broker_name: str) -> int:
        """Clear the write bit of every queue of ``broker_name``; returns how many topics changed."""
        return self._change_write_perm(broker_name, wipe=True)

    def add_write_perm_of_broker(self, broker_name: str) -> int:
        return self._change_write_perm(broker_name, wipe=False)

    def _change_write_perm(self, broker_name: str, wipe: bool) -> int:
        count = 0
        with self._lock.write():
            for qmap in self.topic_queue_table.values():
                qd = qmap.get(broker_name)
                if qd is not None:
                    qd.perm = qd.perm & ~PERM_WRITE if wipe else PERM_READ | PERM_WRITE
                    count += 1
        return count

    def delete_topic(self, topic: str, cluster: str | None = None) -> None:
        with self._lock.write():
            if cluster is None:
                self.topic_queue_table.pop(topic, None)
                return
            qmap = self.topic_queue_table.get(topic)
            if qmap is None:
                return
            for name in self.cluster_addr_table.get(cluster, ()):
                qmap.pop(name, None)
            if not qmap:
                del self.topic_queue_table[topic]

    # ---------------------------------------------------------- listing

    def get_all_cluster_info(self) -> ClusterInfo:
        with self._lock.read():
            return ClusterInfo({k: BrokerData(v.cluster, v.broker_name, dict(v.broker_addrs))
                                for k, v in self.broker_addr_table.items()},
                               {k: set(v) for k, v in self.cluster_addr_table.items()})

    def get_all_topic_list(self) -> TopicList:
        with self._lock.read():
            return TopicList(set(self.topic_queue_table))

    def get_topics_by_cluster(self, cluster: str) -> TopicList:
        with self._lock.read():
            names = self.cluster_addr_table.get(cluster, set())
            return TopicList({t for t, qmap in self.topic_queue_table.items() if names & qmap.keys()})

    def get_system_topic_list(self) -> TopicList:
        """Cluster and broker names (RocketMQ uses them as topics), plus one broker address."""
        with self._lock.read():
            tl = TopicList()
            for cluster, names in self.cluster_addr_table.items():
                tl.topic_list.add(cluster)
                tl.topic_list.update(names)
            for bd in self.broker_addr_table.values():
                if bd.broker_addrs:
                    # Java's HashMap<Long, String> iterates id 0 first: the master when there is one.
                    tl.broker_addr = bd.broker_addrs[min(bd.broker_addrs)]
                    break
            return tl

    def _topics_where(self, pred: Any) -> TopicList:
        with self._lock.read():
            # RocketMQ looks at one queue data per topic: the flags are the topic's, not the broker's.
            return TopicList({t for t, qmap in self.topic_queue_table.items()
                              if qmap and pred(next(iter(qmap.values())).topic_sys_flag)})

    def get_unit_topics(self) -> TopicList:
        return self._topics_where(lambda f: f & FLAG_UNIT)

    def get_has_unit_sub_topic_list(self) -> TopicList:
        return self._topics_where(lambda f: f & FLAG_UNIT_SUB)

    def get_has_unit_sub_ununit_topic_list(self) -> TopicList:
        return self._topics_where(lambda f: not f & FLAG_UNIT and f & FLAG_UNIT_SUB)

    def snapshot_text(self) -> str:
        """All tables, for the periodic log line."""
        with self._lock.read():
            return (f"topicQueueTable={self.topic_queue_table} brokerAddrTable={self.broker_addr_table} "
                    f"brokerLiveTable={ {k: v.last_update_ms for k, v in self.broker_live_table.items()} } "
                    f"clusterAddrTable={self.cluster_addr_table}")
