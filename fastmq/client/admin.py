"""Admin (RocketMQ's DefaultMQAdminExt): what ``mqadmin`` asks of the NameServer and the brokers.

One asyncio class; :class:`fastmq.blocking.Admin` runs it on the facade's loop and ``fastmq-admin``
(:mod:`fastmq.admin_cli`) prints its answers. Every request goes through :class:`ClientAPI`'s one
way out (its RPC hooks, its refusals turned into typed errors) with the request codes, headers and
bodies of 4.9.8's admin tool:

- NameServer: GET_BROKER_CLUSTER_INFO (clusterList), GET_ALL_TOPIC_LIST_FROM_NAMESERVER
  (topicList), GET_ROUTEINFO_BY_TOPIC (topicRoute), DELETE_TOPIC_IN_NAMESRV (deleteTopic);
- every NameServer of the list: WIPE_WRITE_PERM_OF_BROKER / ADD_WRITE_PERM_OF_BROKER;
- brokers: GET_TOPIC_STATS_INFO (topicStatus), UPDATE_AND_CREATE_TOPIC / DELETE_TOPIC_IN_BROKER,
  UPDATE_AND_CREATE_SUBSCRIPTIONGROUP / DELETE_SUBSCRIPTIONGROUP, GET_CONSUME_STATS
  (consumerProgress), GET_CONSUMER_CONNECTION_LIST / GET_PRODUCER_CONNECTION_LIST (consumerConnection,
  producerConnection), GET_BROKER_RUNTIME_INFO (brokerStatus), GET_BROKER_CONFIG /
  UPDATE_BROKER_CONFIG, INVOKE_BROKER_TO_RESET_OFFSET (resetOffsetByTime; with no consumer online,
  SEARCH_OFFSET_BY_TIMESTAMP and UPDATE_CONSUMER_OFFSET as mqadmin's fallback), QUERY_CONSUME_QUEUE
  then VIEW_MESSAGE_BY_ID (queryMsgByOffset: mqadmin pulls one message instead),
  CONSUME_MESSAGE_DIRECTLY (queryMsgById -g -d), VIEW_MESSAGE_BY_ID
  (queryMsgById) and QUERY_MESSAGE (queryMsgByKey); sendMessage sends with a :class:`Producer`;
  GET_MIN_OFFSET / GET_MAX_OFFSET / SEARCH_OFFSET_BY_TIMESTAMP and PULL_MESSAGE as
  DefaultMQPullConsumer's (consumeMessage, printMsg);
- every NameServer of the list: GET_NAMESRV_CONFIG / UPDATE_NAMESRV_CONFIG (getNamesrvConfig,
  updateNamesrvConfig), PUT_KV_CONFIG / GET_KV_CONFIG / DELETE_KV_CONFIG (updateKvConfig,
  deleteKvConfig).
"""
from __future__ import annotations

import json
import time
from dataclasses import dataclass
from typing import Any, Callable, Sequence

from ..common.properties import dump_properties, parse_properties_body
from ..errors import BrokerError, ClientError, ConsumerNotOnlineError, QueryNotFoundError
from ..protocol.bodies import (MASTER_ID, ClusterInfo, KVTable, SubscriptionGroupConfig, TopicList, TopicRouteData,
                               loads_mq_keyed)
from ..protocol.codes import RequestCode, ResponseCode
from ..protocol.command import ext_int
from ..protocol.headers import (ConsumeMessageDirectlyResultRequestHeader, CreateTopicRequestHeader,
                                DeleteSubscriptionGroupRequestHeader,
                                DeleteTopicRequestHeader, GetConsumerConnectionListRequestHeader,
                                GetConsumeStatsRequestHeader, GetProducerConnectionListRequestHeader,
                                GetTopicStatsInfoRequestHeader, QueryConsumeQueueRequestHeader,
                                PullMessageRequestHeader, QueryMessageRequestHeader, ResetOffsetRequestHeader,
                                UpdateConsumerOffsetRequestHeader, ViewMessageRequestHeader)
from ..protocol.message import (Message, MessageConst, MessageExt, MessageSysFlag, decode_offset_msg_id,
                                decode_records, inflate_body)
from ..protocol.heartbeat import build_subscription
from ..protocol.message_queue import MessageQueue
from ..protocol.topic import AUTO_CREATE_TOPIC_KEY_TOPIC, is_readable
from ..remoting import RemotingClient
from .acl import AclClientRPCHook, SessionCredentials
from .api import ClientAPI, RPCHook
from .pull_body import decode_pull_body
from .producer import Producer, SendResult
from .trace_data import DEFAULT_TRACE_TOPIC
from .trace_query import MAX_NUM, TraceRecord, trace_records

__all__ = ["Admin", "TopicNotFoundError", "QueueOffsets", "QueueProgress", "PullAnswer", "SubscriptionGroupConfig",
           "message_obj", "trace_obj", "TOOLS_CONSUMER_GROUP"]

#: the group the admin tool pulls as unless told (MixAll.TOOLS_CONSUMER_GROUP)
TOOLS_CONSUMER_GROUP = "TOOLS_CONSUMER"
#: The most messages a query by topic and time returns (rocketmq-dashboard's bound).
MESSAGES_BY_TIME_MAX = 2000
_PULL_STATUS: dict[int, str] = {ResponseCode.SUCCESS: "FOUND", ResponseCode.PULL_NOT_FOUND: "NO_NEW_MSG",
                               ResponseCode.PULL_RETRY_IMMEDIATELY: "NO_MATCHED_MSG", ResponseCode.PULL_OFFSET_MOVED: "OFFSET_ILLEGAL"}
_SYSFLAG_SUBSCRIPTION = 4  # PullSysFlag: a pull that carries its subscription, neither commit nor suspend


class TopicNotFoundError(ClientError):
    """The NameServer has no route for the topic (TOPIC_NOT_EXIST): it is on no broker."""

    def __init__(self, topic: str) -> None:
        super().__init__(f"topic[{topic}] not exist")
        self.topic = topic


@dataclass
class QueueOffsets:
    """One queue of ``topicStatus``: TopicOffset (minOffset, maxOffset, lastUpdateTimestamp)."""
    queue: MessageQueue
    min_offset: int
    max_offset: int
    last_update_timestamp: int


@dataclass
class QueueProgress:
    """One queue of ``consumerProgress``: OffsetWrapper, and the lag it means."""
    queue: MessageQueue
    broker_offset: int
    consumer_offset: int
    last_timestamp: int

    @property
    def diff(self) -> int:
        """Messages the group has still to consume there (brokerOffset - consumerOffset)."""
        return self.broker_offset - self.consumer_offset


def message_obj(m: MessageExt) -> dict[str, Any]:
    """A stored message as the JSON that ``fastmq-admin --json`` prints and the console shows (the
    body decoded as UTF-8, bad bytes replaced)."""
    return {"msgId": m.msg_id, "topic": m.topic, "tags": m.tags, "keys": m.keys, "queueId": m.queue_id,
            "queueOffset": m.queue_offset, "commitLogOffset": m.commit_log_offset,
            "reconsumeTimes": m.reconsume_times, "bornTimestamp": m.born_timestamp,
            "storeTimestamp": m.store_timestamp, "bornHost": "%s:%d" % m.born_host,
            "storeHost": "%s:%d" % m.store_host, "sysFlag": m.sys_flag, "properties": m.properties,
            "body": bytes(m.body).decode("utf-8", "replace")}


def trace_obj(r: TraceRecord) -> dict[str, Any]:
    """One trace record as the JSON ``fastmq-admin queryMsgTraceById --json`` prints."""
    c, bean = r.context, r.context.beans[0]
    return {"type": r.trace_type, "group": c.group_name, "clientHost": r.client_host,
            "traceStoreHost": r.trace_store_host, "timeStamp": c.time_stamp, "costTime": c.cost_time,
            "success": c.success, "requestId": c.request_id, "contextCode": c.context_code,
            "topic": bean.topic, "tags": bean.tags, "keys": bean.keys, "storeHost": bean.store_host}


@dataclass
class PullAnswer:
    """One PULL_MESSAGE's answer, as DefaultMQPullConsumer.pull gives it (a PullResult)."""

    status: str  #: FOUND, NO_NEW_MSG, NO_MATCHED_MSG or OFFSET_ILLEGAL
    next_begin_offset: int
    min_offset: int
    max_offset: int
    messages: list[MessageExt]


class Admin:
    """The admin requests of ``mqadmin``, over one NameServer list.

    Args:
        namesrv_addr: ``"host:port"``, ``"a:9876;b:9876"`` or a list.
        timeout: seconds each request may take (mqadmin's 3 s is too short for a slow disk: 5).
        credentials: ACL credentials to sign every request with.
        hooks: further RPC hooks, applied after the signer.

    Use ``async with Admin(...) as admin`` or call :meth:`close`.
    """

    def __init__(self, namesrv_addr: str | Sequence[str], *, timeout: float = 5.0,
                 credentials: SessionCredentials | None = None, hooks: Sequence[RPCHook] = ()) -> None:
        addrs = ([a.strip() for a in namesrv_addr.split(";") if a.strip()] if isinstance(namesrv_addr, str)
                 else list(namesrv_addr))
        self.remoting = RemotingClient(namesrv_addrs=addrs, idle_timeout=0)
        all_hooks: list[RPCHook] = []
        if credentials is not None:
            all_hooks.append(AclClientRPCHook(credentials))
        all_hooks.extend(hooks)
        self.api = ClientAPI(self.remoting, timeout, all_hooks)
        self.timeout = timeout

    async def __aenter__(self) -> Admin:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    async def close(self) -> None:
        await self.remoting.close()

    # ------------------------------------------------------------ the one way out

    async def _namesrv(self, code: int, fields: dict[str, str] | None = None) -> bytes:
        return await self.api.admin_namesrv(code, fields)

    async def _broker(self, addr: str, code: int, fields: dict[str, str] | None = None,
                      body: bytes | None = None) -> Any:
        return await self.api.admin_broker(addr, code, fields, body)

    # ------------------------------------------------------------ NameServer

    async def cluster_info(self) -> ClusterInfo:
        """clusterList: every cluster, its brokers and their addresses by broker id."""
        return ClusterInfo.from_json(await self._namesrv(RequestCode.GET_BROKER_CLUSTER_INFO))

    async def topic_list(self) -> list[str]:
        """topicList: every topic the NameServer has a route for, sorted."""
        return sorted(TopicList.from_json(await self._namesrv(RequestCode.GET_ALL_TOPIC_LIST_FROM_NAMESERVER))
                      .topic_list)

    async def topic_route(self, topic: str) -> TopicRouteData:
        """topicRoute: the topic's queues per broker and the brokers' addresses.

        Raises:
            TopicNotFoundError: no broker has the topic.
        """
        route = await self.api.get_route_info(topic)
        if route is None:
            raise TopicNotFoundError(topic)
        return route

    # ------------------------------------------------------------ topics

    async def topic_status(self, topic: str) -> list[QueueOffsets]:
        """topicStatus: min and max offset and last store time of every queue, on every master."""
        route = await self.topic_route(topic)
        out: list[QueueOffsets] = []
        for bd in route.broker_datas:
            addr = bd.broker_addrs.get(MASTER_ID)
            if addr is None:
                continue
            resp = await self._broker(addr, RequestCode.GET_TOPIC_STATS_INFO,
                                      GetTopicStatsInfoRequestHeader(topic).to_fields())
            table = loads_mq_keyed(resp.body or b"{}").get("offsetTable") or {}
            for mq, w in table.items():
                out.append(QueueOffsets(mq, int(w["minOffset"]), int(w["maxOffset"]),
                                        int(w.get("lastUpdateTimestamp") or 0)))
        return sorted(out, key=lambda q: (q.queue.broker_name, q.queue.queue_id))

    async def master_addrs(self, *, broker_addr: str | None = None, cluster: str | None = None) -> list[str]:
        """The brokers a ``-b`` / ``-c`` option names: the address itself, or the cluster's masters.

        Raises:
            ClientError: neither given, or an unknown cluster.
        """
        if broker_addr:
            return [broker_addr]
        if not cluster:
            raise ClientError("give a broker address (-b) or a cluster name (-c)")
        info = await self.cluster_info()
        names = info.cluster_addr_table.get(cluster)
        if names is None:
            raise ClientError(f"cluster[{cluster}] not exist")
        return [addr for n in sorted(names) if (bd := info.broker_addr_table.get(n)) is not None
                and (addr := bd.broker_addrs.get(MASTER_ID)) is not None]

    async def _all_addrs(self, broker_addr: str | None, cluster: str | None) -> list[str]:
        """``-b`` itself, or every broker (masters and slaves) of cluster ``-c``: where mqadmin's
        ACL write commands go (CommandUtil.fetchMasterAndSlaveAddrByClusterName)."""
        if broker_addr or not cluster:
            return await self.master_addrs(broker_addr=broker_addr, cluster=cluster)
        info = await self.cluster_info()
        names = info.cluster_addr_table.get(cluster)
        if names is None:
            raise ClientError(f"cluster[{cluster}] not exist")
        return [addr for n in sorted(names) if (bd := info.broker_addr_table.get(n)) is not None
                for _id, addr in sorted(bd.broker_addrs.items())]

    # ------------------------------------------------------------ ACL (the broker's plain_acl.yml)

    async def update_acl_config(self, access_key: str, secret_key: str, *, broker_addr: str | None = None,
                                cluster: str | None = None, white_remote_address: str | None = None,
                                default_topic_perm: str | None = None, default_group_perm: str | None = None,
                                topic_perms: Sequence[str] = (), group_perms: Sequence[str] = (),
                                admin: bool = False) -> list[str]:
        """updateAclConfig: create or replace account ``access_key`` on ``-b`` or every broker of ``-c``.

        Returns the addresses changed. Raises BrokerError (UPDATE_AND_CREATE_ACL_CONFIG_FAILED, or
        SYSTEM_ERROR when ACL is off or the signing account is not an admin).
        """
        fields = {"accessKey": access_key, "secretKey": secret_key, "admin": "true" if admin else "false"}
        for key, value in (("whiteRemoteAddress", white_remote_address), ("defaultTopicPerm", default_topic_perm),
                           ("defaultGroupPerm", default_group_perm), ("topicPerms", ",".join(topic_perms)),
                           ("groupPerms", ",".join(group_perms))):
            if value:
                fields[key] = value
        addrs = await self._all_addrs(broker_addr, cluster)
        for addr in addrs:
            await self._broker(addr, RequestCode.UPDATE_AND_CREATE_ACL_CONFIG, fields)
        return addrs

    async def delete_acl_config(self, access_key: str, *, broker_addr: str | None = None,
                                cluster: str | None = None) -> list[str]:
        """deleteAclConfig: remove account ``access_key``; returns the addresses changed."""
        addrs = await self._all_addrs(broker_addr, cluster)
        for addr in addrs:
            await self._broker(addr, RequestCode.DELETE_ACL_CONFIG, {"accessKey": access_key})
        return addrs

    async def update_global_white_addrs(self, addresses: str, *, broker_addr: str | None = None,
                                        cluster: str | None = None, acl_file: str | None = None) -> list[str]:
        """updateGlobalWhiteAddr: set the globalWhiteRemoteAddresses list (comma separated)."""
        fields = {"globalWhiteAddrs": addresses}
        if acl_file:
            fields["aclFileFullPath"] = acl_file
        addrs = await self._all_addrs(broker_addr, cluster)
        for addr in addrs:
            await self._broker(addr, RequestCode.UPDATE_GLOBAL_WHITE_ADDRS_CONFIG, fields)
        return addrs

    async def acl_config_versions(self, *, broker_addr: str | None = None,
                                  cluster: str | None = None) -> list[dict[str, Any]]:
        """clusterAclConfigVersion: per master of ``-c`` (or broker ``-b``), its cluster, name,
        address and ``{acl file: {"counter", "timestamp"}}``."""
        out = []
        for addr in await self.master_addrs(broker_addr=broker_addr, cluster=cluster):
            ext = (await self._broker(addr, RequestCode.GET_BROKER_CLUSTER_ACL_INFO)).ext_fields or {}
            out.append({"clusterName": ext.get("clusterName"), "brokerName": ext.get("brokerName"),
                        "brokerAddr": ext.get("brokerAddr") or addr,
                        "versions": json.loads(ext.get("allAclFileVersion") or "{}")})
        return out

    async def update_topic(self, topic: str, *, broker_addr: str | None = None, cluster: str | None = None,
                           read_queue_nums: int = 8, write_queue_nums: int = 8, perm: int = 6,
                           order: bool = False) -> list[str]:
        """updateTopic: create or change the topic on one broker or every master of a cluster.

        Returns the addresses changed.
        """
        header = CreateTopicRequestHeader(topic, AUTO_CREATE_TOPIC_KEY_TOPIC, read_queue_nums, write_queue_nums,
                                          perm, "SINGLE_TAG", 0, order)
        addrs = await self.master_addrs(broker_addr=broker_addr, cluster=cluster)
        for addr in addrs:
            await self._broker(addr, RequestCode.UPDATE_AND_CREATE_TOPIC, header.to_fields())
        return addrs

    async def delete_topic(self, topic: str, cluster: str) -> list[str]:
        """deleteTopic: off every master of the cluster, then off the NameServer.

        Returns the broker addresses it was deleted on.
        """
        addrs = await self.master_addrs(cluster=cluster)
        for addr in addrs:
            await self._broker(addr, RequestCode.DELETE_TOPIC_IN_BROKER, DeleteTopicRequestHeader(topic).to_fields())
        await self._namesrv(RequestCode.DELETE_TOPIC_IN_NAMESRV, {"topic": topic, "clusterName": cluster})
        return addrs

    # ------------------------------------------------------------ subscription groups

    async def update_sub_group(self, group: SubscriptionGroupConfig, *, broker_addr: str | None = None,
                               cluster: str | None = None) -> list[str]:
        """updateSubGroup: create or change a subscription group; returns the addresses changed."""
        body = json.dumps(group.to_obj()).encode("utf-8")
        addrs = await self.master_addrs(broker_addr=broker_addr, cluster=cluster)
        for addr in addrs:
            await self._broker(addr, RequestCode.UPDATE_AND_CREATE_SUBSCRIPTIONGROUP, body=body)
        return addrs

    async def delete_sub_group(self, group: str, *, broker_addr: str | None = None, cluster: str | None = None,
                               remove_offset: bool = False) -> list[str]:
        """deleteSubGroup: remove a subscription group (and its offsets with ``remove_offset``)."""
        header = DeleteSubscriptionGroupRequestHeader(group, remove_offset)
        addrs = await self.master_addrs(broker_addr=broker_addr, cluster=cluster)
        for addr in addrs:
            await self._broker(addr, RequestCode.DELETE_SUBSCRIPTIONGROUP, header.to_fields())
        return addrs

    async def consumer_progress(self, group: str, topic: str | None = None) -> list[QueueProgress]:
        """consumerProgress: per queue, the broker's max offset, the group's offset and the lag,
        over every master of the group's retry topic's route (as examineConsumeStats)."""
        return (await self.consume_stats(group, topic))[0]

    async def consumer_groups(self, progress: Callable[[int, int], None] | None = None) -> list[dict[str, Any]]:
        """consumerProgress with no group: every group with a retry topic, its online clients
        (count, lowest version, consume type, message model), consume TPS and total lag.
        ``progress(done, total)`` is called before each group and once all are done (for a
        progress line: a cluster may have thousands of groups, each asked of every broker)."""
        out: list[dict[str, Any]] = []
        groups = [t[len("%RETRY%"):] for t in await self.topic_list() if t.startswith("%RETRY%")]
        for done, group in enumerate(groups):
            if progress is not None:
                progress(done, len(groups))
            row: dict[str, Any] = {"group": group, "count": 0, "version": None, "consumeType": None,
                                   "messageModel": None, "consumeTps": 0, "diffTotal": 0}
            try:  # as mqadmin: a group whose stats or connections fail is shown with what is known
                queues, tps = await self.consume_stats(group)
                row["consumeTps"], row["diffTotal"] = int(tps), sum(q.diff for q in queues)
            except (BrokerError, ClientError):
                pass
            try:
                cc = await self.consumer_connection(group)
                conns = cc.get("connectionSet") or []
                row.update(count=len(conns), consumeType=cc.get("consumeType"), messageModel=cc.get("messageModel"),
                           version=min((int(c.get("version") or 0) for c in conns), default=None))
            except (BrokerError, ClientError):
                pass
            out.append(row)
        if progress is not None:
            progress(len(groups), len(groups))
        return out

    async def consume_stats(self, group: str, topic: str | None = None) -> tuple[list[QueueProgress], float]:
        """:meth:`consumer_progress`'s queues and the group's consume TPS (ConsumeStats)."""
        tps = 0.0
        try:
            route = await self.topic_route(f"%RETRY%{group}")
        except TopicNotFoundError:
            route = None
        addrs: list[str] = []
        if route is not None:
            addrs = [a for bd in route.broker_datas if (a := bd.broker_addrs.get(MASTER_ID)) is not None]
        if not addrs:  # no retry topic yet (a group that never pulled): ask every master known
            info = await self.cluster_info()
            addrs = [a for bd in info.broker_addr_table.values() if (a := bd.broker_addrs.get(MASTER_ID)) is not None]
        out: list[QueueProgress] = []
        header = GetConsumeStatsRequestHeader(group, topic)
        for addr in sorted(addrs):
            resp = await self._broker(addr, RequestCode.GET_CONSUME_STATS, header.to_fields())
            stats = loads_mq_keyed(resp.body or b"{}")
            tps += float(stats.get("consumeTps") or 0)
            for mq, w in (stats.get("offsetTable") or {}).items():
                out.append(QueueProgress(mq, int(w["brokerOffset"]), int(w["consumerOffset"]),
                                         int(w.get("lastTimestamp") or 0)))
        return sorted(out, key=lambda p: (p.queue.topic, p.queue.broker_name, p.queue.queue_id)), tps

    async def reset_offset_by_time(self, group: str, topic: str, timestamp_ms: int,
                                   force: bool = True) -> list[tuple[MessageQueue, int]]:
        """resetOffsetByTime: move the group's offsets on ``topic`` to the first message stored
        at or after ``timestamp_ms`` (-1: the end), on every master of the topic's route. Online
        consumers are told by their broker; with none online the offsets are changed in the
        brokers directly (mqadmin's resetOffsetByTimeOld). ``force=False`` only moves an offset
        back. Returns each queue's new offset.
        """
        route = await self.topic_route(topic)
        out: list[tuple[MessageQueue, int]] = []
        header = ResetOffsetRequestHeader(topic, group, timestamp_ms, force)
        for bd in sorted(route.broker_datas, key=lambda bd: bd.broker_name):
            addr = bd.broker_addrs.get(MASTER_ID)
            if addr is None:
                continue
            try:
                resp = await self._broker(addr, RequestCode.INVOKE_BROKER_TO_RESET_OFFSET, header.to_fields())
            except ConsumerNotOnlineError:
                out += await self._reset_in_broker(addr, group, topic, timestamp_ms, force)
                continue
            table = loads_mq_keyed(resp.body or b"{}").get("offsetTable") or {}
            out += [(mq, int(off)) for mq, off in table.items()]
        return sorted(out, key=lambda e: (e[0].broker_name, e[0].queue_id))

    async def _reset_in_broker(self, addr: str, group: str, topic: str, timestamp_ms: int,
                               force: bool) -> list[tuple[MessageQueue, int]]:
        resp = await self._broker(addr, RequestCode.GET_CONSUME_STATS,
                                  GetConsumeStatsRequestHeader(group, topic).to_fields())
        out: list[tuple[MessageQueue, int]] = []
        for mq, w in (loads_mq_keyed(resp.body or b"{}").get("offsetTable") or {}).items():
            at = (await self.api.get_max_offset(addr, mq) if timestamp_ms == -1
                  else await self.api.search_offset(addr, mq, timestamp_ms))
            current = int(w["consumerOffset"])
            if force or at < current:
                header = UpdateConsumerOffsetRequestHeader(group, mq.topic, mq.queue_id, at)
                await self._broker(addr, RequestCode.UPDATE_CONSUMER_OFFSET, header.to_fields())
                current = at
            out.append((mq, current))
        return out

    # ------------------------------------------------------------ brokers

    async def broker_runtime_info(self, broker_addr: str) -> dict[str, str]:
        """brokerStatus: the broker's runtime table (GET_BROKER_RUNTIME_INFO's KVTable)."""
        resp = await self._broker(broker_addr, RequestCode.GET_BROKER_RUNTIME_INFO)
        return dict(sorted(KVTable.from_json(resp.body or b"{}").table.items()))

    async def broker_config(self, broker_addr: str) -> dict[str, str]:
        """getBrokerConfig: every key of the broker's configuration, as the broker prints it."""
        resp = await self._broker(broker_addr, RequestCode.GET_BROKER_CONFIG)
        out: dict[str, str] = {}
        for line in bytes(resp.body or b"").decode("utf-8").splitlines():
            key, sep, value = line.partition("=")
            if sep:
                out[key.strip()] = value.strip()
        return dict(sorted(out.items()))

    async def consumer_connection(self, group: str) -> dict[str, Any]:
        """consumerConnection: the group's online clients, subscriptions and settings (the
        ConsumerConnection body of the first broker of its retry topic's route).

        Raises:
            ConsumerNotOnlineError: no client of the group is connected.
        """
        route = await self.topic_route(f"%RETRY%{group}")
        for bd in route.broker_datas:
            addr = bd.select_broker_addr()
            if addr is not None:
                resp = await self._broker(addr, RequestCode.GET_CONSUMER_CONNECTION_LIST,
                                          GetConsumerConnectionListRequestHeader(group).to_fields())
                body: dict[str, Any] = json.loads(resp.body or b"{}")
                return body
        raise ClientError(f"no broker serves %RETRY%{group}")

    async def producer_connection(self, group: str, topic: str) -> list[dict[str, Any]]:
        """producerConnection: the group's connected producers, from a broker of ``topic``."""
        route = await self.topic_route(topic)
        for bd in route.broker_datas:
            addr = bd.select_broker_addr()
            if addr is not None:
                resp = await self._broker(addr, RequestCode.GET_PRODUCER_CONNECTION_LIST,
                                          GetProducerConnectionListRequestHeader(group).to_fields())
                return list(json.loads(resp.body or b"{}").get("connectionSet") or [])
        raise ClientError(f"no broker serves {topic}")

    async def update_broker_config(self, key: str, value: str, *, broker_addr: str | None = None,
                                   cluster: str | None = None) -> list[str]:
        """updateBrokerConfig: set one key on one broker or every master of a cluster."""
        if not key or "=" in key or "\n" in key or "\n" in value:
            raise ClientError(f"bad config key or value: {key!r}={value!r}")
        body = f"{key}={value}\n".encode("utf-8")
        addrs = await self.master_addrs(broker_addr=broker_addr, cluster=cluster)
        for addr in addrs:
            await self._broker(addr, RequestCode.UPDATE_BROKER_CONFIG, body=body)
        return addrs

    async def _write_perm(self, code: int, broker_name: str, count_key: str) -> dict[str, int]:
        out: dict[str, int] = {}
        for ns in self.remoting.namesrv_addrs:
            resp = await self._broker(ns, code, {"brokerName": broker_name})
            out[ns] = int((resp.ext_fields or {}).get(count_key) or 0)
        return out

    async def wipe_write_perm(self, broker_name: str) -> dict[str, int]:
        """wipeWritePerm: every NameServer stops routing sends to the broker; per NameServer, the
        count of topics changed."""
        return await self._write_perm(RequestCode.WIPE_WRITE_PERM_OF_BROKER, broker_name, "wipeTopicCount")

    async def add_write_perm(self, broker_name: str) -> dict[str, int]:
        """addWritePerm: undo :meth:`wipe_write_perm` on every NameServer."""
        return await self._write_perm(RequestCode.ADD_WRITE_PERM_OF_BROKER, broker_name, "addTopicCount")

    # ------------------------------------------------------------ messages

    async def view_message(self, msg_id: str) -> MessageExt:
        """queryMsgById: the message an offset message id names, from the broker that stored it.

        Raises:
            ClientError: not an offset message id.
            BrokerError: the broker has no record there.
        """
        try:
            host, port, offset = decode_offset_msg_id(msg_id)
        except (ValueError, IndexError) as exc:
            raise ClientError(f"{msg_id!r} is not an offset message id: {exc}") from None
        resp = await self._broker(f"{host}:{port}", RequestCode.VIEW_MESSAGE_BY_ID,
                                  ViewMessageRequestHeader(offset).to_fields())
        records = decode_records(resp.body or b"")
        if not records:
            raise ClientError(f"no message at {msg_id}")
        return records[0]

    async def query_message_by_key(self, topic: str, key: str, max_num: int = 64, begin_ms: int = 0,
                                   end_ms: int | None = None) -> list[MessageExt]:
        """queryMsgByKey: the topic's messages with this key (KEYS or UNIQ_KEY), from every broker
        of its route; an empty list when none has one."""
        route = await self.topic_route(topic)
        header = QueryMessageRequestHeader(topic, key, max_num, begin_ms,
                                           int(time.time() * 1000) if end_ms is None else end_ms)
        out: list[MessageExt] = []
        for bd in route.broker_datas:
            addr = bd.select_broker_addr()
            if addr is None:
                continue
            try:
                resp = await self._broker(addr, RequestCode.QUERY_MESSAGE, header.to_fields())
            except QueryNotFoundError:
                continue
            out.extend(decode_records(resp.body or b""))
        return sorted(out, key=lambda m: m.store_timestamp)[:max_num]

    async def query_message_by_offset(self, topic: str, broker_name: str, queue_id: int, offset: int) -> MessageExt:
        """queryMsgByOffset: the message at ``offset`` of one queue: its consume-queue entry
        (QUERY_CONSUME_QUEUE), then the record it points to (VIEW_MESSAGE_BY_ID).

        Raises:
            ClientError: no such broker in the topic's route, or no message at that offset.
        """
        found = await self.queue_messages(topic, broker_name, queue_id, offset, 1)
        if not found:
            raise ClientError(f"no message at offset {offset} of {topic}/{broker_name}/{queue_id}")
        return found[0]

    async def queue_messages(self, topic: str, broker_name: str, queue_id: int, offset: int,
                             count: int) -> list[MessageExt]:
        """Up to ``count`` messages of one queue from ``offset`` on: one QUERY_CONSUME_QUEUE for
        their entries, then VIEW_MESSAGE_BY_ID for each record (what the DLQ page lists).

        Raises:
            ClientError: no such broker in the topic's route.
        """
        route = await self.topic_route(topic)
        addr = next((a for bd in route.broker_datas if bd.broker_name == broker_name
                     and (a := bd.select_broker_addr()) is not None), None)
        if addr is None:
            raise ClientError(f"broker[{broker_name}] is not in the route of topic[{topic}]")
        resp = await self._broker(addr, RequestCode.QUERY_CONSUME_QUEUE,
                                  QueryConsumeQueueRequestHeader(topic, queue_id, offset, count).to_fields())
        out: list[MessageExt] = []
        for entry in ((loads_mq_keyed(resp.body).get("queueData") or []) if resp.body else [])[:count]:
            resp = await self._broker(addr, RequestCode.VIEW_MESSAGE_BY_ID,
                                      ViewMessageRequestHeader(int(entry["physicOffset"])).to_fields())
            out.extend(decode_records(resp.body or b"")[:1])
        return out

    async def dlq_messages(self, group: str, max_num: int = 32) -> list[MessageExt]:
        """The newest ``max_num`` messages (at most) of each queue of the group's dead-letter
        topic ``%DLQ%<group>``, newest first; an empty list when the group has none."""
        topic = f"%DLQ%{group}"
        try:
            queues = await self.topic_status(topic)
        except TopicNotFoundError:
            return []
        out: list[MessageExt] = []
        for q in queues:
            start = max(q.min_offset, q.max_offset - max_num)
            if q.max_offset > start:
                out += await self.queue_messages(topic, q.queue.broker_name, q.queue.queue_id, start,
                                                 q.max_offset - start)
        return sorted(out, key=lambda m: (m.store_timestamp, m.commit_log_offset), reverse=True)

    async def query_msg_trace(self, msg_id: str, trace_topic: str | None = None) -> list[TraceRecord]:
        """queryMsgTraceById: the trace records of message ``msg_id`` (its UNIQ_KEY) that the
        trace topic's brokers index, oldest first (as :func:`fastmq.client.trace_query.query_trace`).

        Raises:
            TopicNotFoundError: no broker has the trace topic (trace is off on the cluster).
        """
        route = await self.topic_route(trace_topic or DEFAULT_TRACE_TOPIC)
        found: list[MessageExt] = []
        end = int(time.time() * 1000) + 60_000
        for bd in route.broker_datas:
            addr = bd.select_broker_addr()
            if addr is not None:
                found.extend(await self.api.query_message(addr, trace_topic or DEFAULT_TRACE_TOPIC, msg_id, MAX_NUM, 0, end,
                                                          self.timeout))
        return trace_records(msg_id, found)

    async def send_message(self, msg: Message, *, broker_name: str | None = None,
                           queue_id: int | None = None, group: str = "TOOLS_PRODUCER") -> SendResult:
        """sendMessage: one message, to the queue named by ``broker_name`` + ``queue_id`` or to
        one the producer picks."""
        producer = Producer(group, namesrv_addr=self.remoting.namesrv_addrs,
                            send_msg_timeout=int(self.timeout * 1000))
        await producer.start()
        try:
            if broker_name is not None and queue_id is not None:
                return await producer.send_to_queue(msg, MessageQueue(msg.topic, broker_name, queue_id))
            return await producer.send(msg)
        finally:
            await producer.shutdown()

    async def consume_message_directly(self, msg_id: str, group: str, client_id: str) -> dict[str, Any]:
        """queryMsgById ``-g -d``: the broker that stored the message hands it to that client of
        the group, which consumes it at once; its ConsumeMessageDirectlyResult (``consumeResult``:
        CR_SUCCESS, CR_LATER, CR_ROLLBACK, CR_COMMIT, CR_THROW_EXCEPTION or CR_RETURN_NULL).

        Raises:
            BrokerError: the client is not online, or it failed to answer.
        """
        try:
            host, port, _offset = decode_offset_msg_id(msg_id)
        except (ValueError, IndexError) as exc:
            raise ClientError(f"{msg_id!r} is not an offset message id: {exc}") from None
        header = ConsumeMessageDirectlyResultRequestHeader(group, client_id, msg_id)
        resp = await self._broker(f"{host}:{port}", RequestCode.CONSUME_MESSAGE_DIRECTLY, header.to_fields())
        result: dict[str, Any] = json.loads(resp.body or b"{}")
        return result

    # ------------------------------------------------------------ pulling as a tool (consumeMessage)

    async def subscribe_queues(self, topic: str) -> list[MessageQueue]:
        """The topic's readable queues, sorted (fetchSubscribeMessageQueues).

        Raises:
            TopicNotFoundError: no broker has the topic.
        """
        route = await self.topic_route(topic)
        return sorted(MessageQueue(topic, qd.broker_name, i) for qd in route.queue_datas if is_readable(qd.perm)
                      for i in range(qd.read_queue_nums))

    async def _queue_addr(self, mq: MessageQueue) -> str:
        route = await self.topic_route(mq.topic)
        bd = next((bd for bd in route.broker_datas if bd.broker_name == mq.broker_name), None)
        addr = None if bd is None else bd.broker_addrs.get(MASTER_ID) or bd.select_broker_addr()
        if addr is None:
            raise ClientError(f"The broker[{mq.broker_name}] not exist")
        return addr

    async def min_offset(self, mq: MessageQueue) -> int:
        """GET_MIN_OFFSET: the queue's first offset still stored."""
        return await self.api.get_min_offset(await self._queue_addr(mq), mq, self.timeout)

    async def max_offset(self, mq: MessageQueue) -> int:
        """GET_MAX_OFFSET: the offset the queue's next message will get."""
        return await self.api.get_max_offset(await self._queue_addr(mq), mq, self.timeout)

    async def search_offset(self, mq: MessageQueue, timestamp_ms: int) -> int:
        """SEARCH_OFFSET_BY_TIMESTAMP: the queue's first offset stored at or after the time."""
        return await self.api.search_offset(await self._queue_addr(mq), mq, timestamp_ms, self.timeout)

    async def pull(self, mq: MessageQueue, offset: int, max_nums: int, *, sub_expression: str = "*",
                   group: str = TOOLS_CONSUMER_GROUP) -> PullAnswer:
        """One PULL_MESSAGE of up to ``max_nums`` messages from ``offset`` (the broker caps an
        answer), committing nothing and not held by the broker: DefaultMQPullConsumer.pull.
        Compressed bodies come inflated; each message carries the queue's MIN_OFFSET / MAX_OFFSET
        properties, as the Java client adds them; a tag expression is applied here too (the
        broker filters by the tags' hash codes only).

        Raises:
            BrokerError: refused with another code than a pull's four answers.
        """
        addr = await self._queue_addr(mq)
        header = PullMessageRequestHeader(group, mq.topic, mq.queue_id, offset, max_nums, _SYSFLAG_SUBSCRIPTION, 0,
                                          20_000, 0, sub_expression, "TAG")
        fut, _conn, _opaque = self.api.pull_message(addr, header.to_fields(), int(self.timeout * 1000))
        resp = await fut
        status = _PULL_STATUS.get(resp.code)
        if status is None:
            raise BrokerError.for_code(resp.code, resp.remark)
        msgs = decode_pull_body(resp.body or b"") if status == "FOUND" else []
        sub = build_subscription(mq.topic, sub_expression)
        if not sub.subscribes_all:
            msgs = [m for m in msgs if m.tags in sub.tags_set]
        lo, hi = ext_int(resp, "minOffset", 0) or 0, ext_int(resp, "maxOffset", 0) or 0
        for m in msgs:
            if m.sys_flag & MessageSysFlag.COMPRESSED:
                m.body = inflate_body(m.body)
            m.properties[MessageConst.MIN_OFFSET] = str(lo)
            m.properties[MessageConst.MAX_OFFSET] = str(hi)
        return PullAnswer(status, ext_int(resp, "nextBeginOffset", offset) or offset, lo, hi, msgs)

    async def messages_by_time(self, topic: str, begin_ms: int, end_ms: int,
                               max_num: int = MESSAGES_BY_TIME_MAX) -> list[MessageExt]:
        """The topic's messages stored from ``begin_ms`` to ``end_ms`` (both included), at most
        ``max_num``, newest first: the dashboard's query by topic and time. Each readable queue
        in turn: SEARCH_OFFSET_BY_TIMESTAMP of the two times, then pulls of 32 between them
        until ``max_num`` are found (so a full answer holds the first queues' messages).

        Raises:
            ClientError: ``end_ms`` before ``begin_ms`` or ``max_num`` not positive.
            TopicNotFoundError: no broker has the topic.
        """
        if end_ms < begin_ms:
            raise ClientError("the end time is before the begin time")
        if max_num <= 0:
            raise ClientError("max_num must be positive")
        out: list[MessageExt] = []
        for mq in await self.subscribe_queues(topic):
            offset = await self.search_offset(mq, begin_ms)
            # the first offset stored at or after the end: pulled too, its time decides
            last = await self.search_offset(mq, end_ms)
            # every pull moves on or stops: the span bounds the loop
            for _ in range(max(0, last - offset) // 32 + 2):
                if offset > last or len(out) >= max_num:
                    break
                r = await self.pull(mq, offset, 32)
                out += [m for m in r.messages if begin_ms <= m.store_timestamp <= end_ms]
                if r.status != "FOUND" or r.next_begin_offset <= offset:
                    break
                offset = r.next_begin_offset
            if len(out) >= max_num:
                break
        out.sort(key=lambda m: (m.store_timestamp, m.commit_log_offset), reverse=True)
        return out[:max_num]

    # ------------------------------------------------------------ NameServer configuration, KV config

    def _namesrvs(self, namesrv_addrs: Sequence[str] | None) -> list[str]:
        return list(namesrv_addrs) if namesrv_addrs else list(self.remoting.namesrv_addrs)

    async def namesrv_config(self, namesrv_addrs: Sequence[str] | None = None) -> dict[str, dict[str, str]]:
        """getNamesrvConfig: each NameServer's configuration (of the list, or of these), by address."""
        out: dict[str, dict[str, str]] = {}
        for ns in self._namesrvs(namesrv_addrs):
            resp = await self._broker(ns, RequestCode.GET_NAMESRV_CONFIG)
            out[ns] = dict(sorted(parse_properties_body(bytes(resp.body or b"")).items()))
        return out

    async def update_namesrv_config(self, props: dict[str, str],
                                    namesrv_addrs: Sequence[str] | None = None) -> list[str]:
        """updateNamesrvConfig: set these keys on each NameServer; the addresses changed.

        Raises:
            BrokerError: a NameServer refused (NO_PERMISSION for its black-listed keys).
        """
        body = dump_properties(props).encode("utf-8")
        addrs = self._namesrvs(namesrv_addrs)
        for ns in addrs:
            await self._broker(ns, RequestCode.UPDATE_NAMESRV_CONFIG, body=body)
        return addrs

    async def _each_namesrv(self, code: int, fields: dict[str, str]) -> list[str]:
        """The request to every NameServer of the list, each asked even when one refuses, the last
        refusal raised after (MQClientAPIImpl.putKVConfigValue / deleteKVConfigValue)."""
        refused: BrokerError | None = None
        for ns in self.remoting.namesrv_addrs:
            try:
                await self._broker(ns, code, fields)
            except BrokerError as exc:
                refused = exc
        if refused is not None:
            raise refused
        return list(self.remoting.namesrv_addrs)

    async def put_kv_config(self, namespace: str, key: str, value: str) -> list[str]:
        """updateKvConfig: ``namespace``/``key`` = ``value`` on every NameServer (PUT_KV_CONFIG)."""
        return await self._each_namesrv(RequestCode.PUT_KV_CONFIG,
                                        {"namespace": namespace, "key": key, "value": value})

    async def delete_kv_config(self, namespace: str, key: str) -> list[str]:
        """deleteKvConfig: remove ``namespace``/``key`` from every NameServer (DELETE_KV_CONFIG)."""
        return await self._each_namesrv(RequestCode.DELETE_KV_CONFIG, {"namespace": namespace, "key": key})

    async def kv_config(self, namespace: str, key: str) -> str | None:
        """GET_KV_CONFIG of the list's first NameServer: the value, None when it has none."""
        try:
            resp = await self._broker(self.remoting.namesrv_addrs[0], RequestCode.GET_KV_CONFIG,
                                      {"namespace": namespace, "key": key})
        except QueryNotFoundError:
            return None
        return (resp.ext_fields or {}).get("value")
