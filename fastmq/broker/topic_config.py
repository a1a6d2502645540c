"""TopicConfigManager: the broker's topics, their queues and permissions, persisted in topics.json.

A broker starts with RocketMQ's reserved topics (TBW102 when auto-creation is on, the schedule
topic, its cluster and broker names...), loads the user topics from ``config/topics.json``, and
creates topics on demand: on a send whose topic is unknown but whose ``defaultTopic`` (TBW102)
inherits permission, and on a consumer's first send-back or heartbeat (the ``%RETRY%`` topics).
Every change bumps the data version, which the NameServer registration compares.
"""
from __future__ import annotations

import dataclasses
import logging
import threading
from pathlib import Path
from typing import Any, Callable

from ..common.json_file import JsonConfigFile, JsonText, PrettyTable, pretty_object
from ..protocol import topic as tv
from ..protocol.bodies import DataVersion, TopicConfig
from .config import BrokerConfig

__all__ = ["TopicConfigManager", "SCHEDULE_TOPIC_QUEUE_NUM"]

log = logging.getLogger("fastmq.broker")

#: One queue per delay level of the default messageDelayLevel.
SCHEDULE_TOPIC_QUEUE_NUM = 18


class TopicConfigManager:
    """The topic table; every mutation bumps the data version and schedules a write.

    Reads happen on the event loop and on executor threads (pull, admin), so mutations take a
    lock; lookups read the dict without one, as a dict read is atomic in CPython. Writes are
    coalesced and done by a background thread (:class:`JsonConfigFile`); :meth:`persist` writes
    at once (shutdown). A topic's config is replaced to change it, never modified in place: the
    file's encoder (:class:`PrettyTable`) re-encodes only entries that are new objects.
    """

    def __init__(self, broker: BrokerConfig, path: str | Path,
                 on_new_topic: Callable[[TopicConfig], None] | None = None) -> None:
        self.broker = broker
        self.path = Path(path)
        self.table: dict[str, TopicConfig] = {}
        self.data_version = DataVersion()
        self._lock = threading.RLock()
        self.file: JsonConfigFile[tuple[dict[str, TopicConfig], DataVersion | None]] = JsonConfigFile(
            self.path, self._snapshot_obj)
        self._pretty: PrettyTable[TopicConfig] = PrettyTable(TopicConfig.to_obj)
        #: Called after a topic is created on demand, so the broker can re-register at once.
        self.on_new_topic = on_new_topic
        self._add_system_topics()

    # ------------------------------------------------------------ set-up

    def _system(self, name: str, queues: int = 16, perm: int = tv.PERM_READ | tv.PERM_WRITE) -> None:
        tv.SYSTEM_TOPICS.add(name)
        self.table[name] = TopicConfig(name, read_queue_nums=queues, write_queue_nums=queues, perm=perm)

    def _add_system_topics(self) -> None:
        b = self.broker
        self._system(tv.SELF_TEST_TOPIC, 1)
        if b.autoCreateTopicEnable:
            self._system(tv.AUTO_CREATE_TOPIC_KEY_TOPIC, b.defaultTopicQueueNums,
                         tv.PERM_INHERIT | tv.PERM_READ | tv.PERM_WRITE)
        self._system(tv.BENCHMARK_TOPIC, 1024)
        rw = tv.PERM_READ | tv.PERM_WRITE
        self._system(b.brokerClusterName, 16, tv.PERM_INHERIT | (rw if b.clusterTopicEnable else 0))
        self._system(b.brokerName, 1, tv.PERM_INHERIT | (rw if b.brokerTopicEnable else 0))
        self._system(tv.OFFSET_MOVED_EVENT, 1)
        self._system(tv.SCHEDULE_TOPIC, SCHEDULE_TOPIC_QUEUE_NUM)
        self._system(tv.TIMER_TOPIC, 1)  # timer messages wait in its queue 0 (RocketMQ 5)
        if b.traceTopicEnable:
            self._system(b.msgTraceTopicName, 1)
        self._system(tv.reply_topic(b.brokerClusterName), 1)  # for request-reply (4.9.8 makes it at start)

    @staticmethod
    def _parse(obj: Any) -> tuple[dict[str, TopicConfig], DataVersion | None]:
        if not isinstance(obj, dict):
            raise ValueError("not a JSON object")
        table = obj.get("topicConfigTable") or {}
        if not isinstance(table, dict):
            raise ValueError("topicConfigTable is not an object")
        version = DataVersion.from_obj(obj["dataVersion"]) if obj.get("dataVersion") else None
        return {str(name): TopicConfig.from_obj(tc) for name, tc in table.items()}, version

    def load(self) -> None:
        """Merge ``topics.json`` (user topics and data version) over the reserved ones; a damaged
        file is read from its ``.bak``.

        Raises:
            ConfigError: the file and its ``.bak`` are both damaged (the broker must not start).
        """
        loaded = self.file.load(self._parse)
        if loaded is None:
            return
        topics, version = loaded
        with self._lock:
            self.table.update(topics)
            if version is not None:
                self.data_version = version
            self._pretty.encode(self.table)  # the whole table once now, not in the first creation's answer
        log.info("loaded %d topics from %s", len(self.table), self.path)

    def _snapshot_obj(self) -> JsonText:
        with self._lock:  # a copy under the lock; the encoding outside it
            table, version = dict(self.table), self.data_version.to_obj()
        return pretty_object({"dataVersion": version, "topicConfigTable": self._pretty.encode(table)})

    def persist(self) -> None:
        """Write ``topics.json`` now, in the caller's thread (shutdown, tests).

        Raises:
            OSError: the write failed.
        """
        self.file.write_now()

    def changed(self) -> None:
        """Schedule a background write of the table (coalesced with other changes)."""
        self.file.changed()

    # ----------------------------------------------------------- queries

    def select(self, topic: str) -> TopicConfig | None:
        return self.table.get(topic)

    def is_order_topic(self, topic: str) -> bool:
        tc = self.table.get(topic)
        return bool(tc and tc.order)

    # --------------------------------------------------------- mutations

    def _put_new(self, tc: TopicConfig) -> TopicConfig:
        self.table[tc.topic_name] = tc
        self.data_version.next_version()
        self.changed()
        if self.on_new_topic is not None:
            self.on_new_topic(tc)
        return tc

    def create_in_send(self, topic: str, default_topic: str, remote: str, client_queue_nums: int,
                       topic_sys_flag: int = 0) -> TopicConfig | None:
        """Auto-create ``topic`` from ``default_topic``'s config on a send, or return None.

        RocketMQ's rule: the default topic must exist and carry PERM_INHERIT; the new topic gets
        ``min(client_queue_nums, default's write queues)`` queues and the default's permission
        minus INHERIT.
        """
        with self._lock:
            existing = self.table.get(topic)
            if existing is not None:
                return existing
            default = self.table.get(default_topic)
            if default is None:
                log.warning("Create new topic failed, because the default topic[%s] not exist. producer:[%s]",
                            default_topic, remote)
                return None
            if default_topic == tv.AUTO_CREATE_TOPIC_KEY_TOPIC and not self.broker.autoCreateTopicEnable:
                default = dataclasses.replace(default, perm=tv.PERM_READ | tv.PERM_WRITE)
                self.table[default_topic] = default  # replaced, not changed in place (see the class)
            if not tv.is_inherited(default.perm):
                log.warning("Create new topic failed, because the default topic[%s] has no perm [%s] producer:[%s]",
                            default_topic, default.perm, remote)
                return None
            # (the default topic's count is bounded by maxTopicQueueNums where it is made or updated;
            # a topics.json edited by hand is clipped here)
            queues = max(0, min(client_queue_nums, default.write_queue_nums, self.broker.maxTopicQueueNums))
            tc = TopicConfig(topic, read_queue_nums=queues, write_queue_nums=queues,
                             perm=default.perm & ~tv.PERM_INHERIT, topic_filter_type=default.topic_filter_type,
                             topic_sys_flag=topic_sys_flag)
            log.info("Create new topic by default topic:[%s] config:[%s] producer:[%s]", default_topic, tc, remote)
            return self._put_new(tc)

    def create_in_send_back(self, topic: str, queue_nums: int, perm: int, topic_sys_flag: int = 0) -> TopicConfig:
        """The retry and DLQ topics, created when a group first needs them."""
        with self._lock:
            existing = self.table.get(topic)
            if existing is not None:
                return existing
            tc = TopicConfig(topic, read_queue_nums=queue_nums, write_queue_nums=queue_nums, perm=perm,
                             topic_sys_flag=topic_sys_flag)
            log.info("create new topic %s", tc)
            return self._put_new(tc)

    def update(self, tc: TopicConfig) -> None:
        """UPDATE_AND_CREATE_TOPIC: insert or replace, persist, bump the version."""
        with self._lock:
            old = self.table.get(tc.topic_name)
            self.table[tc.topic_name] = tc
            log.info("%s topic config, old:[%s] new:[%s]", "update" if old else "create", old, tc)
            self.data_version.next_version()
            self.changed()

    def delete(self, topic: str) -> bool:
        with self._lock:
            old = self.table.pop(topic, None)
            if old is None:
                return False
            log.info("delete topic config OK, topic: %s", old)
            self.data_version.next_version()
            self.changed()
            return True

    def snapshot(self) -> tuple[dict[str, TopicConfig], DataVersion]:
        """A consistent copy of the table and version, for registration with the NameServers."""
        with self._lock:
            return dict(self.table), DataVersion(self.data_version.timestamp, self.data_version.counter)
