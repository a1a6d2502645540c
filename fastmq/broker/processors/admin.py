"""Admin and query requests: topics, subscription groups, offsets, stats, locks, runtime info.

RocketMQ's admin tools read some bodies that are not standard JSON: fastjson writes a map keyed by
MessageQueue objects with the object itself as the key (``{{"brokerName":..}:{...}}``). The Java
tools parse only that form, so the stats bodies here are written the same way.
"""
from __future__ import annotations

import asyncio
import logging
import time
from typing import TYPE_CHECKING, Any, Sequence

from ...common.properties import parse_properties_body
from ...errors import ConfigError, FastMQError, RemotingCommandError, RemotingTimeoutError
from ...protocol import topic as tv
from ...protocol.bodies import KVTable, TopicConfig, compact_json, loads_lenient, mq_map_json
from ...protocol.codes import LANGUAGE_NAMES, LanguageCode, RequestCode, ResponseCode
from ...protocol.command import VERSION, RemotingCommand, create_request, response_for
from ...protocol.headers import (ConsumeMessageDirectlyResultRequestHeader, CreateTopicRequestHeader,
                                 DeleteSubscriptionGroupRequestHeader, GetConsumerRunningInfoRequestHeader,
                                 DeleteTopicRequestHeader, GetConsumeStatsInBrokerHeader, GetConsumeStatsRequestHeader,
                                 GetProducerConnectionListRequestHeader, ResetOffsetRequestHeader,
                                 ViewBrokerStatsDataRequestHeader,
                                 GetConsumerConnectionListRequestHeader, GetEarliestMsgStoretimeRequestHeader,
                                 GetMaxOffsetRequestHeader, GetMinOffsetRequestHeader, GetTopicStatsInfoRequestHeader,
                                 QueryConsumeQueueRequestHeader, QueryMessageRequestHeader, SearchOffsetRequestHeader,
                                 ViewMessageRequestHeader)
from ...protocol.java_number import JavaNumberFormatError, json_int
from ...protocol.message import MessageFormatError, decode_offset_msg_id
from ...protocol.message_queue import MessageQueue
from ...remoting import Connection
from ..stats import GROUP_GET_NUMS
from ..subscription_group import SubscriptionGroupConfig
from .base import BrokerCodeDispatchProcessor

if TYPE_CHECKING:
    from ...common.json_file import JsonConfigFile
    from .base import BrokerContext

log = logging.getLogger("fastmq.broker")

__all__ = ["AdminBrokerProcessor", "mq_keyed_json"]

_V3_0_7_SNAPSHOT = 28  # MQVersion's ordinal: older clients cannot take an offset reset
_V3_1_8_SNAPSHOT = 62  # ... nor answer GET_CONSUMER_RUNNING_INFO or CONSUME_MESSAGE_DIRECTLY
_CALL_CLIENT_TIMEOUT_S = 10.0  # Broker2Client.callClient
#: Index entries a QUERY_MESSAGE walks per turn of the event loop (well under a millisecond).
INDEX_SLICE = 256


def mq_keyed_json(entries: Sequence[tuple[tuple[str, str, int], Any]], **top: Any) -> bytes:
    """A body whose ``offsetTable`` is fastjson's ``Map<MessageQueue, X>`` (see ``mq_map_json``)."""
    table = mq_map_json((MessageQueue(t, b, q), v) for (t, b, q), v in entries)
    head = "".join(f"{compact_json(k)}:{compact_json(v)}," for k, v in top.items())
    return ("{" + head + '"offsetTable":' + table + "}").encode("utf-8")


def _lang_name(code: int) -> str:
    """LanguageCode's name, as connection listings print it."""
    return LANGUAGE_NAMES[code] if 0 <= code < len(LANGUAGE_NAMES) else "OTHER"


class AdminBrokerProcessor(BrokerCodeDispatchProcessor):
    def __init__(self, broker: "BrokerContext") -> None:
        super().__init__(broker)
        self._index_turn = asyncio.Lock()  # one QUERY_MESSAGE slice at a time, in arrival order
        self.handlers = {
            RequestCode.UPDATE_AND_CREATE_TOPIC: self.update_and_create_topic,
            RequestCode.DELETE_TOPIC_IN_BROKER: self.delete_topic,
            RequestCode.GET_ALL_TOPIC_CONFIG: self.get_all_topic_config,
            RequestCode.UPDATE_AND_CREATE_SUBSCRIPTIONGROUP: self.update_and_create_subscription_group,
            RequestCode.DELETE_SUBSCRIPTIONGROUP: self.delete_subscription_group,
            RequestCode.GET_BROKER_RUNTIME_INFO: self.get_broker_runtime_info,
            RequestCode.GET_BROKER_CONFIG: self.get_broker_config,
            RequestCode.UPDATE_BROKER_CONFIG: self.update_broker_config,
            RequestCode.GET_MAX_OFFSET: self.get_max_offset,
            RequestCode.GET_MIN_OFFSET: self.get_min_offset,
            RequestCode.SEARCH_OFFSET_BY_TIMESTAMP: self.search_offset_by_timestamp,
            RequestCode.GET_EARLIEST_MSG_STORETIME: self.get_earliest_msg_storetime,
            RequestCode.GET_CONSUMER_CONNECTION_LIST: self.get_consumer_connection_list,
            RequestCode.GET_PRODUCER_CONNECTION_LIST: self.get_producer_connection_list,
            RequestCode.INVOKE_BROKER_TO_RESET_OFFSET: self.reset_offset,
            RequestCode.VIEW_BROKER_STATS_DATA: self.view_broker_stats_data,
            RequestCode.QUERY_TOPIC_CONSUME_BY_WHO: self.query_topic_consume_by_who,
            RequestCode.GET_TOPIC_STATS_INFO: self.get_topic_stats_info,
            RequestCode.GET_CONSUME_STATS: self.get_consume_stats,
            RequestCode.VIEW_MESSAGE_BY_ID: self.view_message_by_id,
            RequestCode.GET_BROKER_CONSUME_STATS: self.get_broker_consume_stats,
            RequestCode.GET_ALL_PRODUCER_INFO: self.get_all_producer_info,
            RequestCode.CLEAN_EXPIRED_CONSUMEQUEUE: self.clean_expired_consume_queue,
            RequestCode.CLEAN_UNUSED_TOPIC: self.clean_unused_topic,
            RequestCode.DELETE_EXPIRED_COMMITLOG: self.delete_expired_commit_log,
            RequestCode.QUERY_CONSUME_QUEUE: self.query_consume_queue,
            RequestCode.GET_CONSUMER_RUNNING_INFO: self.get_consumer_running_info,
            RequestCode.CONSUME_MESSAGE_DIRECTLY: self.consume_message_directly,
            RequestCode.QUERY_MESSAGE: self.query_message,
            RequestCode.LOCK_BATCH_MQ: self.lock_batch_mq,
            RequestCode.UNLOCK_BATCH_MQ: self.unlock_batch_mq,
        }

    # ------------------------------------------------------------ topics

    async def _on_disk(self, file: JsonConfigFile[Any]) -> None:
        """Wait until ``file`` holds the change just made, written by the files' thread (not the
        event loop). Admin changes are answered once on disk, as 4.9 persists inside the request:
        a topic created and acknowledged must survive a kill -9 that follows at once. Concurrent
        changes share one write. A failed write is logged and retried by the background writer."""
        try:
            await file.durable()
        except OSError as exc:
            log.error("persist %s failed: %s; retrying in the background", file.path, exc)
            file.changed()

    async def update_and_create_topic(self, conn: Connection, request: RemotingCommand) -> RemotingCommand:
        h = CreateTopicRequestHeader.decode(request)
        if h.topic == self.broker.config.brokerClusterName:
            return response_for(request, ResponseCode.SYSTEM_ERROR,
                                f"the topic[{h.topic}] is conflict with system reserved words.")
        problem = tv.validate_topic(h.topic) or self._system_topic(h.topic) or self._queue_nums_problem(h)
        if problem:
            return response_for(request, ResponseCode.SYSTEM_ERROR, problem)
        tc = TopicConfig(h.topic, read_queue_nums=h.readQueueNums, write_queue_nums=h.writeQueueNums, perm=h.perm,
                         topic_filter_type=h.topicFilterType, topic_sys_flag=h.topicSysFlag or 0, order=h.order)
        self.broker.topic_config.update(tc)
        await self._on_disk(self.broker.topic_config.file)
        # That topic alone (4.9.8's registerIncrementBrokerData), answered once the NameServers
        # have it, as 4.9.8 registers inside the request: a producer that looks the route up right
        # after the answer must not get TBW102's default route and send to a queue id the new topic
        # lacks (bounded by the register timeout; a NameServer down does not block the answer).
        self.broker.schedule_register(topic=tc)
        await self.broker.registered()
        return response_for(request, ResponseCode.SUCCESS)

    def _system_topic(self, topic: str) -> str | None:
        """4.9's TopicValidator.isSystemTopic refusal for UPDATE_AND_CREATE_TOPIC and DELETE_TOPIC."""
        return f"The topic[{topic}] is conflict with system topic." if tv.is_system_topic(topic) else None

    def _queue_nums_problem(self, h: CreateTopicRequestHeader) -> str | None:
        hi = self.broker.config.maxTopicQueueNums
        for what, n in (("readQueueNums", h.readQueueNums), ("writeQueueNums", h.writeQueueNums)):
            if not 1 <= n <= hi:
                return (f"the topic[{h.topic}] {what} {n} is out of range, allowing only 1..{hi} "
                        "(the broker's maxTopicQueueNums)")
        return None

    async def delete_topic(self, conn: Connection, request: RemotingCommand) -> RemotingCommand:
        h = DeleteTopicRequestHeader.decode(request)
        problem = tv.validate_topic(h.topic) or self._system_topic(h.topic)
        if problem:
            return response_for(request, ResponseCode.SYSTEM_ERROR, problem)
        self.broker.topic_config.delete(h.topic)
        self.broker.offsets.remove_topic(h.topic)
        self.broker.store.delete_topics({h.topic})
        await self._on_disk(self.broker.topic_config.file)
        return response_for(request, ResponseCode.SUCCESS)

    def get_all_topic_config(self, conn: Connection, request: RemotingCommand) -> RemotingCommand:
        table, version = self.broker.topic_config.snapshot()
        body = {"dataVersion": version.to_obj(), "topicConfigTable": {k: v.to_obj() for k, v in table.items()}}
        return response_for(request, ResponseCode.SUCCESS, body=compact_json(body).encode("utf-8"))

    async def update_and_create_subscription_group(self, conn: Connection,
                                                   request: RemotingCommand) -> RemotingCommand:
        sgc = SubscriptionGroupConfig.from_obj(loads_lenient(request.body or b""))
        problem = tv.validate_group(sgc.group_name)
        if problem:
            return response_for(request, ResponseCode.SYSTEM_ERROR, problem)
        self.broker.subscription_groups.update(sgc)
        await self._on_disk(self.broker.subscription_groups.file)
        return response_for(request, ResponseCode.SUCCESS)

    async def delete_subscription_group(self, conn: Connection, request: RemotingCommand) -> RemotingCommand:
        """DELETE_SUBSCRIPTIONGROUP: the group's config, and its offsets when ``removeOffset``;
        SUCCESS for an unknown group too, as 4.9.8 answers."""
        h = DeleteSubscriptionGroupRequestHeader.decode(request)
        log.info("deleteSubscriptionGroup %s called by %s", h.groupName, conn.remote_addr)
        self.broker.subscription_groups.delete(h.groupName)
        if h.removeOffset:
            self.broker.offsets.remove_group(h.groupName)
        await self._on_disk(self.broker.subscription_groups.file)
        return response_for(request, ResponseCode.SUCCESS)

    # ----------------------------------------------------------- offsets

    def get_max_offset(self, conn: Connection, request: RemotingCommand) -> RemotingCommand:
        h = GetMaxOffsetRequestHeader.decode(request)
        return response_for(request, ResponseCode.SUCCESS,
                            ext_fields={"offset": self.broker.store.max_offset_in_queue(h.topic, h.queueId)})

    def get_min_offset(self, conn: Connection, request: RemotingCommand) -> RemotingCommand:
        h = GetMinOffsetRequestHeader.decode(request)
        return response_for(request, ResponseCode.SUCCESS,
                            ext_fields={"offset": self.broker.store.min_offset_in_queue(h.topic, h.queueId)})

    def search_offset_by_timestamp(self, conn: Connection, request: RemotingCommand) -> RemotingCommand:
        h = SearchOffsetRequestHeader.decode(request)
        off = self.broker.store.offset_in_queue_by_time(h.topic, h.queueId, h.timestamp)
        return response_for(request, ResponseCode.SUCCESS, ext_fields={"offset": off})

    def get_earliest_msg_storetime(self, conn: Connection, request: RemotingCommand) -> RemotingCommand:
        h = GetEarliestMsgStoretimeRequestHeader.decode(request)
        ts = self.broker.store.earliest_message_time(h.topic, h.queueId)
        return response_for(request, ResponseCode.SUCCESS, ext_fields={"timestamp": ts})

    # ------------------------------------------------------------- stats

    def _queue_ids(self, topic: str) -> range:
        tc = self.broker.topic_config.select(topic)
        return range(tc.write_queue_nums if tc else 0)

    def get_topic_stats_info(self, conn: Connection, request: RemotingCommand) -> RemotingCommand:
        h = GetTopicStatsInfoRequestHeader.decode(request)
        if self.broker.topic_config.select(h.topic) is None:
            return response_for(request, ResponseCode.TOPIC_NOT_EXIST, f"topic[{h.topic}] not exist")
        store, name = self.broker.store, self.broker.config.brokerName
        entries = []
        for q in self._queue_ids(h.topic):
            mx = store.max_offset_in_queue(h.topic, q)
            last = store.message_store_time_stamp(h.topic, q, mx - 1) if mx > 0 else 0
            entries.append(((h.topic, name, q), {"lastUpdateTimestamp": last, "maxOffset": mx,
                                                 "minOffset": store.min_offset_in_queue(h.topic, q)}))
        return response_for(request, ResponseCode.SUCCESS, body=mq_keyed_json(entries))

    def get_consume_stats(self, conn: Connection, request: RemotingCommand) -> RemotingCommand:
        """GET_CONSUME_STATS (``mqadmin consumerProgress``): one ConsumeStats over the group's
        topics (or the one asked for), each over its read queues."""
        h = GetConsumeStatsRequestHeader.decode(request)
        topics = [h.topic] if h.topic else sorted(self.broker.offsets.topics_of_group(h.consumerGroup))
        entries: list[tuple[tuple[str, str, int], Any]] = []
        tps = 0.0
        for topic in topics:
            stats = self._topic_consume_stats(h.consumerGroup, topic, write_queues=False)
            if stats is not None:
                entries += stats[0]
                tps += stats[1]
        return response_for(request, ResponseCode.SUCCESS, body=mq_keyed_json(entries, consumeTps=tps))

    def get_broker_consume_stats(self, conn: Connection, request: RemotingCommand) -> RemotingCommand:
        """GET_BROKER_CONSUME_STATS (``mqadmin brokerConsumeStats``): a ConsumeStats per topic of
        every subscription group, over its write queues; ``isOrder``: order topics only."""
        h = GetConsumeStatsInBrokerHeader.decode(request)
        b = self.broker
        groups: list[str] = []
        total_diff = 0
        for group in list(b.subscription_groups.table):
            stats = []
            for topic in sorted(b.offsets.topics_of_group(group)):
                one = self._topic_consume_stats(group, topic, write_queues=True, order_only=h.isOrder)
                if one is None:
                    continue
                entries, tps = one
                total_diff += sum(w["brokerOffset"] - w["consumerOffset"] for _, w in entries)
                stats.append(mq_keyed_json(entries, consumeTps=tps).decode("utf-8"))
            groups.append("{" + compact_json(group) + ":[" + ",".join(stats) + "]}")
        body = (f'{{"brokerAddr":{compact_json(b.config.broker_addr)},"consumeStatsList":[{",".join(groups)}],'
                f'"totalDiff":{total_diff}}}')
        return response_for(request, ResponseCode.SUCCESS, body=body.encode("utf-8"))

    def _topic_consume_stats(self, group: str, topic: str, *, write_queues: bool, order_only: bool = False
                             ) -> tuple[list[tuple[tuple[str, str, int], Any]], float] | None:
        """One topic's ConsumeStats for ``group``: its queues' OffsetWrappers and the group's
        consume TPS over the last minute. None for a topic skipped as 4.9.8 skips it: unknown,
        not an order topic when only those are asked for, or not among the subscriptions of the
        group while it is online."""
        b = self.broker
        tc = b.topic_config.select(topic)
        if tc is None or (order_only and not tc.order):
            return None
        if b.consumer_manager.find_subscription(group, topic) is None and self._subscription_count(group) > 0:
            return None
        entries: list[tuple[tuple[str, str, int], Any]] = []
        for q in range(tc.write_queue_nums if write_queues else tc.read_queue_nums):
            broker_off = max(b.store.max_offset_in_queue(topic, q), 0)
            consumer_off = max(b.offsets.query(group, topic, q), 0)
            last = b.store.message_store_time_stamp(topic, q, consumer_off - 1) if consumer_off > 0 else 0
            entries.append(((topic, b.config.brokerName, q), {"brokerOffset": broker_off,
                                                              "consumerOffset": consumer_off,
                                                              "lastTimestamp": max(last, 0)}))
        return entries, float(b.stats.figures(GROUP_GET_NUMS, f"{topic}@{group}", "minute")["tps"])

    def _subscription_count(self, group: str) -> int:
        g = self.broker.consumer_manager.find(group)
        return len(g.subscriptions) if g is not None else 0

    def query_consume_queue(self, conn: Connection, request: RemotingCommand) -> RemotingCommand:
        """QUERY_CONSUME_QUEUE (``mqadmin queryCq``): up to ``count`` consume-queue entries from
        ``index``, within the file holding it, with the queue's bounds and, for a named group, its
        subscription here."""
        h = QueryConsumeQueueRequestHeader.decode(request)
        b = self.broker
        cq = b.store.queues.get(h.topic, h.queueId)
        if cq is None:
            return response_for(request, ResponseCode.SYSTEM_ERROR, f"{h.queueId}@{h.topic} is not exist!")
        body: dict[str, Any] = {"maxQueueIndex": cq.max_offset, "minQueueIndex": cq.min_offset}
        if h.consumerGroup is not None:
            sub = b.consumer_manager.find_subscription(h.consumerGroup, h.topic)
            if sub is None:
                body["filterData"] = f"{h.consumerGroup}@{h.topic} is not online!"
            else:
                body["subscriptionData"] = sub.to_obj()
                body["filterData"] = "null"  # (4.9.8 prints a TAG subscription's absent filter data so)
        entries = cq.get_entries(h.index, h.count) if h.count > 0 else None
        if entries is None or not len(entries):
            # 4.9.8 answers SUCCESS with this remark and no body
            return response_for(request, ResponseCode.SUCCESS,
                                f"Index {h.index} of {h.queueId}@{h.topic} is not exist!")
        body["queueData"] = [{"eval": False, "physicOffset": int(e["offset"]), "physicSize": int(e["size"]),
                              "tagsCode": int(e["tags_code"])} for e in entries]
        return response_for(request, ResponseCode.SUCCESS, body=compact_json(dict(sorted(body.items()))).encode("utf-8"))

    @staticmethod
    def _connections(channels: Any) -> list[dict[str, Any]]:
        return [{"clientAddr": c.conn.remote_addr, "clientId": c.client_id,
                 "language": _lang_name(c.language),
                 "version": c.version} for c in channels]

    def get_consumer_connection_list(self, conn: Connection, request: RemotingCommand) -> RemotingCommand:
        h = GetConsumerConnectionListRequestHeader.decode(request)
        g = self.broker.consumer_manager.find(h.consumerGroup)
        if g is None:
            return response_for(request, ResponseCode.CONSUMER_NOT_ONLINE,
                                f"the consumer group[{h.consumerGroup}] not online")
        body = {"connectionSet": self._connections(g.channels.values()),
                "consumeFromWhere": g.consume_from_where, "consumeType": g.consume_type,
                "messageModel": g.message_model,
                "subscriptionTable": {t: s.to_obj() for t, s in g.subscriptions.items()}}
        return response_for(request, ResponseCode.SUCCESS, body=compact_json(body).encode("utf-8"))

    def get_all_producer_info(self, conn: Connection, request: RemotingCommand) -> RemotingCommand:
        """GET_ALL_PRODUCER_INFO (``mqadmin producer``): every producer group's connected clients."""
        data = {group: [{"clientId": c.client_id,
                         "language": _lang_name(c.language),
                         "lastUpdateTimestamp": c.last_update_ms, "remoteIP": f"/{c.conn.remote_addr}",
                         "version": c.version} for c in list(chans.values())]
                for group, chans in list(self.broker.producer_manager.groups.items())}
        return response_for(request, ResponseCode.SUCCESS, body=compact_json({"data": data}).encode("utf-8"))

    def clean_expired_consume_queue(self, conn: Connection, request: RemotingCommand) -> RemotingCommand:
        """CLEAN_EXPIRED_CONSUMEQUEUE (``mqadmin cleanExpiredCQ``)."""
        log.warning("invoke cleanExpiredConsumeQueue start.")
        self.broker.store.clean_expired_consume_queues()
        log.warning("invoke cleanExpiredConsumeQueue end.")
        return response_for(request, ResponseCode.SUCCESS)

    def clean_unused_topic(self, conn: Connection, request: RemotingCommand) -> RemotingCommand:
        """CLEAN_UNUSED_TOPIC (``mqadmin cleanUnusedTopic``): consume queues of topics the broker
        no longer has."""
        log.warning("invoke cleanUnusedTopic start.")
        table, _ = self.broker.topic_config.snapshot()
        self.broker.store.clean_unused_topics(table)
        log.warning("invoke cleanUnusedTopic end.")
        return response_for(request, ResponseCode.SUCCESS)

    def delete_expired_commit_log(self, conn: Connection, request: RemotingCommand) -> RemotingCommand:
        """DELETE_EXPIRED_COMMITLOG (``mqadmin deleteExpiredCommitLog``): a retention round now,
        whatever the hour: commit-log files past fileReservedTime go (RocketMQ's manual delete)."""
        log.warning("invoke deleteExpiredCommitLog start.")
        self.broker.store.retention.run_once(manual=True)
        log.warning("invoke deleteExpiredCommitLog end.")
        return response_for(request, ResponseCode.SUCCESS)

    def get_producer_connection_list(self, conn: Connection, request: RemotingCommand) -> RemotingCommand:
        h = GetProducerConnectionListRequestHeader.decode(request)
        channels = self.broker.producer_manager.groups.get(h.producerGroup)
        if channels is None:
            return response_for(request, ResponseCode.SYSTEM_ERROR, f"the producer group[{h.producerGroup}] not exist")
        body = {"connectionSet": self._connections(list(channels.values()))}
        return response_for(request, ResponseCode.SUCCESS, body=compact_json(body).encode("utf-8"))

    def get_broker_config(self, conn: Connection, request: RemotingCommand) -> RemotingCommand:
        """GET_BROKER_CONFIG: every key=value of the broker and store configs, as the config file
        holds them; ``version`` the configuration's data version (mqadmin getBrokerConfig)."""
        b = self.broker
        version = b.config_version.to_json().decode("utf-8")
        return response_for(request, ResponseCode.SUCCESS, ext_fields={"version": version},
                            body=b.config_text().encode("utf-8"))

    def update_broker_config(self, conn: Connection, request: RemotingCommand) -> RemotingCommand:
        """UPDATE_BROKER_CONFIG (mqadmin updateBrokerConfig): properties in the body."""
        log.info("updateBrokerConfig called by %s", conn.remote_addr)
        if request.body:
            try:
                props = parse_properties_body(request.body)
            except ConfigError as exc:
                return response_for(request, ResponseCode.SYSTEM_ERROR, f"string2Properties error: {exc}")
            try:
                self.broker.update_config(props)
            except ConfigError as exc:
                return response_for(request, ResponseCode.SYSTEM_ERROR, str(exc))
        return response_for(request, ResponseCode.SUCCESS)

    def reset_offset(self, conn: Connection, request: RemotingCommand) -> RemotingCommand:
        """INVOKE_BROKER_TO_RESET_OFFSET (mqadmin resetOffsetByTime), 4.9.8's Broker2Client.resetOffset:
        each queue's offset at ``timestamp`` (-1: the end), kept where the group already is
        earlier unless ``isForce``, pushed to every online member (RESET_CONSUMER_CLIENT_OFFSET,
        oneway), which moves and then commits it. The broker's own table is left to them."""
        h = ResetOffsetRequestHeader.decode(request)
        b = self.broker
        log.info("[reset-offset] reset offset started by %s. topic=%s, group=%s, timestamp=%d, isForce=%s",
                 conn.remote_addr, h.topic, h.group, h.timestamp, h.isForce)
        tc = b.topic_config.select(h.topic)
        if tc is None:
            return response_for(request, ResponseCode.SYSTEM_ERROR,
                                f"[reset-offset] reset offset failed, no topic in this broker. topic={h.topic}")
        table: list[tuple[tuple[str, str, int], int]] = []
        for q in range(tc.write_queue_nums):
            current = b.offsets.query(h.group, h.topic, q)
            if current == -1:
                return response_for(request, ResponseCode.SYSTEM_ERROR, f"THe consumer group <{h.group}> not exist")
            at = (b.store.max_offset_in_queue(h.topic, q) if h.timestamp == -1
                  else b.store.offset_in_queue_by_time(h.topic, q, h.timestamp))
            at = max(at, 0)
            table.append(((h.topic, b.config.brokerName, q), at if h.isForce or at < current else current))
        if request.language == LanguageCode.CPP:  # (the requester's language decides, as in 4.9.8)
            body = compact_json({"offsetTable": [{"brokerName": bn, "offset": o, "queueId": q, "topic": t}
                                             for (t, bn, q), o in table]}).encode("utf-8")
        else:
            body = mq_keyed_json(table)
        push = create_request(RequestCode.RESET_CONSUMER_CLIENT_OFFSET,
                              {"topic": h.topic, "group": h.group, "timestamp": h.timestamp, "isForce": False}, body)
        push.flag |= 2  # oneway
        g = b.consumer_manager.find(h.group)
        if g is None or not g.channels:
            return response_for(request, ResponseCode.CONSUMER_NOT_ONLINE,
                                f"Consumer not online, so can not reset offset, Group: {h.group} Topic: {h.topic} "
                                f"Timestamp: {h.timestamp}")
        for info in list(g.channels.values()):
            if info.version < _V3_0_7_SNAPSHOT:
                return response_for(request, ResponseCode.SYSTEM_ERROR,
                                    f"the client does not support this feature. version={info.version}")
            try:
                info.conn.send(push)
                log.info("[reset-offset] reset offset success. topic=%s, group=%s, clientId=%s",
                         h.topic, h.group, info.client_id)
            except Exception as exc:  # a closing channel: the others still get theirs
                log.error("[reset-offset] reset offset exception. topic=%s, group=%s, error=%s", h.topic, h.group, exc)
        return response_for(request, ResponseCode.SUCCESS, body=mq_keyed_json(table))

    def query_topic_consume_by_who(self, conn: Connection, request: RemotingCommand) -> RemotingCommand:
        """QUERY_TOPIC_CONSUME_BY_WHO: the groups online with a subscription to the topic, and those
        with offsets on it ({"groupList": [...]})."""
        h = GetTopicStatsInfoRequestHeader.decode(request)  # (the same one field: topic)
        b = self.broker
        groups = {g for g, info in list(b.consumer_manager.groups.items()) if h.topic in info.subscriptions}
        groups |= b.offsets.groups_of_topic(h.topic)
        return response_for(request, ResponseCode.SUCCESS, body=compact_json({"groupList": sorted(groups)}).encode("utf-8"))

    def view_broker_stats_data(self, conn: Connection, request: RemotingCommand) -> RemotingCommand:
        """VIEW_BROKER_STATS_DATA (mqadmin statsAll): one stats item's last minute, hour and day."""
        h = ViewBrokerStatsDataRequestHeader.decode(request)
        data = self.broker.stats.stats_data(h.statsName, h.statsKey)
        if data is None:  # an item read from the store may not have been fed yet (it is, each snapshot)
            self.broker.stats.feed()
            data = self.broker.stats.stats_data(h.statsName, h.statsKey)
        if data is None:
            return response_for(request, ResponseCode.SYSTEM_ERROR,
                                f"The stats <{h.statsName}> <{h.statsKey}> not exist")
        return response_for(request, ResponseCode.SUCCESS, body=compact_json(data).encode("utf-8"))

    def get_broker_runtime_info(self, conn: Connection, request: RemotingCommand) -> RemotingCommand:
        b = self.broker
        puts, gets = b.daily_totals()
        info: dict[str, object] = {"brokerVersionDesc": "V4_9_8", "brokerVersion": str(VERSION),
                "bootTimestamp": str(b.boot_timestamp), "runtime": _runtime(b.boot_timestamp),
                "brokerActive": "true",
                "msgPutTotalYesterdayMorning": puts[0], "msgPutTotalTodayMorning": puts[1],
                "msgPutTotalTodayNow": puts[2], "msgGetTotalYesterdayMorning": gets[0],
                "msgGetTotalTodayMorning": gets[1], "msgGetTotalTodayNow": gets[2],
                # requests run on the event loop, not on Java's bounded pools: nothing queues there
                "sendThreadPoolQueueSize": 0, "sendThreadPoolQueueCapacity": 0,
                "pullThreadPoolQueueSize": 0, "pullThreadPoolQueueCapacity": 0,
                "queryThreadPoolQueueSize": 0, "queryThreadPoolQueueCapacity": 0,
                "EndTransactionQueueSize": 0,
                "EndTransactionThreadPoolQueueCapacity": b.config.endTransactionPoolQueueCapacity,
                "sendThreadPoolQueueHeadWaitTimeMills": 0, "pullThreadPoolQueueHeadWaitTimeMills": 0,
                "queryThreadPoolQueueHeadWaitTimeMills": 0,
                "startAcceptSendRequestTimeStamp": 0}  # (a key fastmq does not take: sends are never held)
        info.update(b.store.runtime_info())
        return response_for(request, ResponseCode.SUCCESS, body=KVTable({k: str(v) for k, v in info.items()}).to_json())

    def view_message_by_id(self, conn: Connection, request: RemotingCommand) -> RemotingCommand:
        """VIEW_MESSAGE_BY_ID: the record at the commit-log offset an offset message id names."""
        h = ViewMessageRequestHeader.decode(request)
        record = self.broker.store.select_one_message_by_offset(h.offset)
        if record is None:
            return response_for(request, ResponseCode.SYSTEM_ERROR, f"can not find message by the offset, {h.offset}")
        return response_for(request, ResponseCode.SUCCESS, body=record)

    # ------------------------------------------------- requests passed on to a consumer

    def get_consumer_running_info(self, conn: Connection, request: RemotingCommand) -> Any:
        """GET_CONSUMER_RUNNING_INFO (``mqadmin consumerStatus``): asked of the named client, whose
        answer is passed back as it is."""
        h = GetConsumerRunningInfoRequestHeader.decode(request)
        return self._call_consumer(request, h.consumerGroup, h.clientId, request.body, dict(request.ext_fields or {}))

    def consume_message_directly(self, conn: Connection, request: RemotingCommand) -> Any:
        """CONSUME_MESSAGE_DIRECTLY (``mqadmin queryMsgById -g -d``): the record an offset message
        id names goes to the named client, with this broker's name, to be consumed at once."""
        h = ConsumeMessageDirectlyResultRequestHeader.decode(request)
        try:
            _, _, offset = decode_offset_msg_id(h.msgId or "")
        except MessageFormatError as exc:
            return response_for(request, ResponseCode.SYSTEM_ERROR, str(exc))
        record = self.broker.store.select_one_message_by_offset(offset)
        if record is None:
            return response_for(request, ResponseCode.SYSTEM_ERROR, f"can not find message by the offset, {offset}")
        fields = dict(request.ext_fields or {}, brokerName=self.broker.config.brokerName)
        return self._call_consumer(request, h.consumerGroup, h.clientId, record, fields)

    async def _call_consumer(self, request: RemotingCommand, group: str, client_id: str | None,
                             body: bytes | None, fields: dict[str, str]) -> RemotingCommand:
        """Broker2Client.callClient: the same code and fields to the client's connection, waited
        for up to 10 s; its response (whatever its code) is the answer."""
        g = self.broker.consumer_manager.find(group)
        info = next((c for c in (g.channels.values() if g else ()) if c.client_id == client_id), None)
        if info is None:
            return response_for(request, ResponseCode.SYSTEM_ERROR, f"The Consumer <{group}> <{client_id}> not online")
        if info.version < _V3_1_8_SNAPSHOT:
            return response_for(request, ResponseCode.SYSTEM_ERROR,
                                f"The Consumer <{client_id}> Version <{info.version}> too low to finish, "
                                "please upgrade it to V3_1_8_SNAPSHOT")  # (4.9 names the version; we give its number)
        conn: Connection = info.conn
        try:
            return await conn.invoke(create_request(request.code, fields, body), _CALL_CLIENT_TIMEOUT_S)
        except RemotingTimeoutError as exc:
            return response_for(request, ResponseCode.CONSUME_MSG_TIMEOUT,
                                f"consumer <{group}> <{client_id}> Timeout: {type(exc).__name__}: {exc}")
        except FastMQError as exc:
            return response_for(request, ResponseCode.SYSTEM_ERROR,
                                f"invoke consumer <{group}> <{client_id}> Exception: {type(exc).__name__}: {exc}")

    async def query_message(self, conn: Connection, request: RemotingCommand) -> RemotingCommand:
        """QUERY_MESSAGE: messages of a topic by key (KEYS or UNIQ_KEY), through the index file.

        A key's chain in the index can be as long as the file, and the client picks the key and
        the time window, so the walk runs in slices of INDEX_SLICE entries, one slice of one query
        per turn of the event loop (``_index_turn`` is FIFO): every other request waits at most
        about one slice, however many such queries run.
        """
        h = QueryMessageRequestHeader.decode(request)
        store = self.broker.store
        max_num = min(h.maxNum, self.broker.store_config.maxMsgsNumBatch) if h.maxNum > 0 else 64
        records: list[bytes] = []
        if store.index is not None:
            walk = store.index.walk(h.topic, h.key, max_num, h.beginTimestamp, h.endTimestamp)
            done = walk.step(INDEX_SLICE)  # most keys are short: answered in this first slice
            while not done:
                async with self._index_turn:
                    done = walk.step(INDEX_SLICE)
                    await asyncio.sleep(0)  # the turn is held over one loop turn: I/O runs, not another slice
            records = [rec for phy in walk.found if (rec := store.select_one_message_by_offset(phy)) is not None]
        if not records:  # 4.9 fills the index fields in only when something was found
            return response_for(request, ResponseCode.QUERY_NOT_FOUND,
                                "can not find message, maybe time range not correct",
                                ext_fields={"indexLastUpdateTimestamp": 0, "indexLastUpdatePhyoffset": 0})
        ts, phy = store.index.last_update if store.index is not None else (0, 0)
        fields = {"indexLastUpdateTimestamp": ts, "indexLastUpdatePhyoffset": phy}
        return response_for(request, ResponseCode.SUCCESS, ext_fields=fields, body=b"".join(records))

    # ------------------------------------------------------------- locks

    def _mq_set(self, request: RemotingCommand) -> tuple[str, str, list[tuple[str, str, int]]]:
        obj = loads_lenient(request.body or b"")
        if not isinstance(obj, dict) or not isinstance(obj.get("consumerGroup"), str) \
                or not isinstance(obj.get("clientId"), str) or not isinstance(obj.get("mqSet"), list):
            raise RemotingCommandError("lock body needs consumerGroup, clientId and mqSet")
        mqs = []
        for mq in obj["mqSet"]:
            if not isinstance(mq, dict):
                raise RemotingCommandError("mqSet entries must be objects")
            try:
                qid = json_int(mq.get("queueId", -1))
            except JavaNumberFormatError as exc:
                raise RemotingCommandError(f"mqSet queueId must be a Java int: {exc.java_text}") from None
            mqs.append((str(mq.get("topic")), str(mq.get("brokerName")), qid))
        # the body's names pass the same rules as a header's (the name gate sees headers only)
        problem = tv.validate_group(obj["consumerGroup"]) or next(
            (r for r in (tv.validate_topic_ref(t) for t, _, _ in mqs) if r is not None), None)
        if problem is not None:
            raise RemotingCommandError(problem)
        return obj["consumerGroup"], obj["clientId"], mqs

    def lock_batch_mq(self, conn: Connection, request: RemotingCommand) -> RemotingCommand:
        group, client, mqs = self._mq_set(request)
        got = self.broker.rebalance_locks.try_lock_batch(group, mqs, client)
        body = {"lockOKMQSet": [{"brokerName": b, "queueId": q, "topic": t} for t, b, q in sorted(got)]}
        return response_for(request, ResponseCode.SUCCESS, body=compact_json(body).encode("utf-8"))

    def unlock_batch_mq(self, conn: Connection, request: RemotingCommand) -> RemotingCommand:
        group, client, mqs = self._mq_set(request)
        self.broker.rebalance_locks.unlock_batch(group, mqs, client)
        return response_for(request, ResponseCode.SUCCESS)


def _runtime(boot_ms: int) -> str:
    secs = int(time.time() - boot_ms / 1000)
    d, rem = divmod(secs, 86400)
    h, rem = divmod(rem, 3600)
    m, s = divmod(rem, 60)
    return f"[ {d} days, {h} hours, {m} minutes, {s} seconds ]"
