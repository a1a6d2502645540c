"""DefaultRequestProcessor: every request code the NameServer answers."""
from __future__ import annotations

import asyncio
import logging
import zlib
from typing import Any, Awaitable, Callable, Protocol

from ..common.properties import parse_properties_body
from ..errors import ConfigError, RemotingCommandError
from ..protocol.bodies import DataVersion, KVTable, RegisterBrokerBody, TopicList, loads_lenient
from ..protocol.codes import RequestCode, ResponseCode
from ..protocol.command import RemotingCommand, ext_bool, ext_int, ext_str, response_for
from ..remoting import CodeDispatchProcessor, Connection
from .config import CONFIG_BLACK_LIST, NamesrvConfig
from .kv_config import ORDER_TOPIC_CONFIG, KVConfigManager
from .route_info import RouteInfoManager

__all__ = ["DefaultRequestProcessor", "NamesrvContext"]

log = logging.getLogger("fastmq.namesrv")

_FAQ = "\nSee http://rocketmq.apache.org/docs/faq/ for further details."

class NamesrvContext(Protocol):
    """What the processor needs from the NameServer (NamesrvController provides it), so the
    processor does not import the controller that imports it."""

    config: NamesrvConfig
    route_info: RouteInfoManager
    kv_config: KVConfigManager

    def update_config(self, props: dict[str, str]) -> None: ...

    def config_text(self) -> str: ...


#: Compressed REGISTER_BROKER bodies this large or larger are inflated and parsed on a worker
#: thread, so one huge registration does not hold every other client's request for seconds.
OFF_LOOP_REGISTER_BODY = 256 * 1024


def _need(request: RemotingCommand, name: str) -> str:
    v = ext_str(request, name)
    if v is None:
        raise RemotingCommandError(f"the custom field <{name}> is null")
    return v


def _need_int(request: RemotingCommand, name: str) -> int:
    v = ext_int(request, name)
    if v is None:
        raise RemotingCommandError(f"the custom field <{name}> is null")
    return v


def _crc32_forms(data: bytes) -> tuple[int, int]:
    """The body CRC as RocketMQ's UtilAll.crc32 gives it (31 bits), and as a signed Java int.

    A Java broker sends the 31-bit form; the signed full form is accepted too because early
    fastmq brokers sent it, and rejecting a registration over a checksum convention loses routes.
    """
    v = zlib.crc32(data) & 0xFFFFFFFF
    return v & 0x7FFFFFFF, v - (1 << 32) if v >= 1 << 31 else v


#: MQVersion.Version.V3_0_11.ordinal(): brokers older than this send a bare TopicConfigSerializeWrapper.
_V3_0_11 = 37


def _decode_register_body(request: RemotingCommand, max_inflated: int) -> tuple[RegisterBrokerBody, list[str] | None]:
    """The topics of a REGISTER_BROKER and its filter servers (None: leave the filter table alone).
    A compressed body may inflate to ``max_inflated`` bytes at most (RemotingCommandError past it)."""
    if not request.body:
        # RocketMQ registers a body-less broker with data version {0, 0}.
        return RegisterBrokerBody(data_version=DataVersion(0, 0)), None
    if ext_bool(request, "compressed"):
        body = RegisterBrokerBody.decode(request.body, True, max_inflated)
        return body, body.filter_server_list
    obj = loads_lenient(request.body)
    if isinstance(obj, dict) and "topicConfigSerializeWrapper" not in obj and (
            request.version < _V3_0_11 or "topicConfigTable" in obj or "dataVersion" in obj):
        # A pre-3.0.11 broker's body is the wrapper itself, without filter servers.
        return RegisterBrokerBody.from_obj({"topicConfigSerializeWrapper": obj}), None
    body = RegisterBrokerBody.from_obj(obj)
    return body, body.filter_server_list


class DefaultRequestProcessor(CodeDispatchProcessor):
    """Answers NameServer requests; a malformed one gets SYSTEM_ERROR with the reason, as in RocketMQ."""

    def __init__(self, controller: NamesrvContext) -> None:
        super().__init__()
        self.c = controller
        R = RequestCode
        # register_broker answers a large compressed body from a coroutine (decoded off the loop)
        self.handlers: dict[int, Callable[[Connection, RemotingCommand],
                                          RemotingCommand | Awaitable[RemotingCommand]]] = {
            R.PUT_KV_CONFIG: self.put_kv_config, R.GET_KV_CONFIG: self.get_kv_config,
            R.DELETE_KV_CONFIG: self.delete_kv_config, R.QUERY_DATA_VERSION: self.query_data_version,
            R.REGISTER_BROKER: self.register_broker, R.UNREGISTER_BROKER: self.unregister_broker,
            R.GET_ROUTEINFO_BY_TOPIC: self.get_route_info_by_topic,
            R.GET_BROKER_CLUSTER_INFO: self.get_broker_cluster_info,
            R.WIPE_WRITE_PERM_OF_BROKER: self.wipe_write_perm, R.ADD_WRITE_PERM_OF_BROKER: self.add_write_perm,
            R.GET_ALL_TOPIC_LIST_FROM_NAMESERVER: self.get_all_topic_list,
            R.DELETE_TOPIC_IN_NAMESRV: self.delete_topic, R.GET_KVLIST_BY_NAMESPACE: self.get_kv_list_by_namespace,
            R.GET_TOPICS_BY_CLUSTER: self.get_topics_by_cluster,
            R.GET_SYSTEM_TOPIC_LIST_FROM_NS: self.get_system_topic_list,
            R.GET_UNIT_TOPIC_LIST: lambda c, r: self._topics(r, self.c.route_info.get_unit_topics()),
            R.GET_HAS_UNIT_SUB_TOPIC_LIST: lambda c, r: self._topics(r, self.c.route_info.get_has_unit_sub_topic_list()),
            R.GET_HAS_UNIT_SUB_UNUNIT_TOPIC_LIST:
                lambda c, r: self._topics(r, self.c.route_info.get_has_unit_sub_ununit_topic_list()),
            R.UPDATE_NAMESRV_CONFIG: self.update_config, R.GET_NAMESRV_CONFIG: self.get_config,
        }

    # -------------------------------------------------------------- KV

    def put_kv_config(self, conn: Connection, request: RemotingCommand) -> Awaitable[RemotingCommand] | RemotingCommand:
        ns, key, value = ext_str(request, "namespace"), ext_str(request, "key"), ext_str(request, "value")
        if ns is None or key is None:
            return response_for(request, ResponseCode.SYSTEM_ERROR, "namespace or key is null")
        if value is None:
            raise RemotingCommandError("the custom field <value> is null")
        self.c.kv_config.put(ns, key, value, write=False)
        return self._written(request)

    async def _written(self, request: RemotingCommand) -> RemotingCommand:
        # the fsync'd rewrite runs off the event loop; the answer waits for it (RocketMQ writes
        # kvConfig.json inside the request), so what was answered is on disk
        await self.c.kv_config.persist_async()
        return response_for(request, ResponseCode.SUCCESS)

    def get_kv_config(self, conn: Connection, request: RemotingCommand) -> RemotingCommand:
        ns, key = _need(request, "namespace"), _need(request, "key")
        value = self.c.kv_config.get(ns, key)
        if value is not None:
            return response_for(request, ResponseCode.SUCCESS, ext_fields={"value": value})
        return response_for(request, ResponseCode.QUERY_NOT_FOUND, f"No config item, Namespace: {ns} Key: {key}")

    def delete_kv_config(self, conn: Connection,
                         request: RemotingCommand) -> Awaitable[RemotingCommand] | RemotingCommand:
        if self.c.kv_config.delete(_need(request, "namespace"), _need(request, "key"), write=False):
            return self._written(request)
        return response_for(request, ResponseCode.SUCCESS)

    def get_kv_list_by_namespace(self, conn: Connection, request: RemotingCommand) -> RemotingCommand:
        ns = _need(request, "namespace")
        kv = self.c.kv_config.get_namespace(ns)
        if kv is not None:
            return response_for(request, ResponseCode.SUCCESS, body=KVTable(kv).to_json())
        return response_for(request, ResponseCode.QUERY_NOT_FOUND, f"No config item, Namespace: {ns}")

    # -------------------------------------------------------- brokers

    def _check_crc(self, request: RemotingCommand) -> bool:
        crc = ext_int(request, "bodyCrc32", 0)
        if crc and request.body is not None and crc not in _crc32_forms(request.body):
            log.warning("receive registerBroker request,crc32 not match,from %s", ext_str(request, "brokerAddr"))
            return False
        return True

    def register_broker(self, conn: Connection, request: RemotingCommand
                        ) -> RemotingCommand | Awaitable[RemotingCommand]:
        cluster, addr = _need(request, "clusterName"), _need(request, "brokerAddr")
        name, bid = _need(request, "brokerName"), _need_int(request, "brokerId")
        if not self._check_crc(request):
            return response_for(request, ResponseCode.SYSTEM_ERROR, "crc32 not match")
        limit = self.c.config.registerBodyMaxInflatedBytes
        if request.body and len(request.body) >= OFF_LOOP_REGISTER_BODY and ext_bool(request, "compressed"):
            return self._register_off_loop(conn, request, cluster, addr, name, bid, limit)
        body, filter_servers = _decode_register_body(request, limit)
        return self._registered(conn, request, cluster, addr, name, bid, body, filter_servers)

    async def _register_off_loop(self, conn: Connection, request: RemotingCommand, cluster: str, addr: str,
                                 name: str, bid: int, limit: int) -> RemotingCommand:
        try:
            body, filter_servers = await asyncio.get_running_loop().run_in_executor(
                None, _decode_register_body, request, limit)
        except RemotingCommandError as exc:  # answered as the inline path answers it
            log.warning("bad request %d from %s: %s", request.code, conn.remote_addr, exc)
            return response_for(request, ResponseCode.SYSTEM_ERROR, str(exc))
        return self._registered(conn, request, cluster, addr, name, bid, body, filter_servers)

    def _registered(self, conn: Connection, request: RemotingCommand, cluster: str, addr: str, name: str, bid: int,
                    body: RegisterBrokerBody, filter_servers: Any) -> RemotingCommand:
        result = self.c.route_info.register_broker(cluster, addr, name, bid, ext_str(request, "haServerAddr"),
                                                   body, filter_servers, conn)
        if result.refused is not None:
            # NO_PERMISSION: 4.9's code for a request this requester may not make; the broker
            # retries at its next registration, and is taken once the holder is gone.
            return response_for(request, ResponseCode.NO_PERMISSION, result.refused)
        # As RocketMQ: the ORDER_TOPIC_CONFIG namespace as a KVTable, no body when there is none.
        kv = self.c.kv_config.get_namespace(ORDER_TOPIC_CONFIG)
        return response_for(request, ResponseCode.SUCCESS,
                            ext_fields={"haServerAddr": result.ha_server_addr, "masterAddr": result.master_addr},
                            body=KVTable(kv).to_json() if kv is not None else None)

    def unregister_broker(self, conn: Connection, request: RemotingCommand) -> RemotingCommand:
        self.c.route_info.unregister_broker(_need(request, "clusterName"), _need(request, "brokerAddr"),
                                            _need(request, "brokerName"), _need_int(request, "brokerId"))
        return response_for(request, ResponseCode.SUCCESS)

    def query_data_version(self, conn: Connection, request: RemotingCommand) -> RemotingCommand:
        addr = _need(request, "brokerAddr")
        version = DataVersion.from_json(request.body or b"")
        ri = self.c.route_info
        changed = ri.is_broker_topic_config_changed(addr, version)
        if not changed:
            ri.update_broker_timestamp(addr)
        ours = ri.query_broker_topic_config(addr)
        return response_for(request, ResponseCode.SUCCESS, ext_fields={"changed": changed},
                            body=ours.to_json() if ours is not None else None)

    def wipe_write_perm(self, conn: Connection, request: RemotingCommand) -> RemotingCommand:
        count = self.c.route_info.wipe_write_perm_of_broker(_need(request, "brokerName"))
        return response_for(request, ResponseCode.SUCCESS, ext_fields={"wipeTopicCount": count})

    def add_write_perm(self, conn: Connection, request: RemotingCommand) -> RemotingCommand:
        count = self.c.route_info.add_write_perm_of_broker(_need(request, "brokerName"))
        return response_for(request, ResponseCode.SUCCESS, ext_fields={"addTopicCount": count})

    # ---------------------------------------------------------- routes

    def get_route_info_by_topic(self, conn: Connection, request: RemotingCommand) -> RemotingCommand:
        topic = _need(request, "topic")
        route = self.c.route_info.pickup_topic_route_data(topic)
        if route is None:
            return response_for(request, ResponseCode.TOPIC_NOT_EXIST,
                                f"No topic route info in name server for the topic: {topic}{_FAQ}")
        if self.c.config.orderMessageEnable:
            route.order_topic_conf = self.c.kv_config.get(ORDER_TOPIC_CONFIG, topic)
        # Standard JSON for every client: the old clients RocketMQ 4.9 gives fastjson's form to
        # (wire version < V4_9_4, e.g. the C++ client's 63) read standard JSON as well.
        return response_for(request, ResponseCode.SUCCESS, body=route.to_json())

    def get_broker_cluster_info(self, conn: Connection, request: RemotingCommand) -> RemotingCommand:
        return response_for(request, ResponseCode.SUCCESS, body=self.c.route_info.get_all_cluster_info().to_json())

    def _topics(self, request: RemotingCommand, tl: TopicList) -> RemotingCommand:
        return response_for(request, ResponseCode.SUCCESS, body=tl.to_json())

    def get_all_topic_list(self, conn: Connection, request: RemotingCommand) -> RemotingCommand:
        return self._topics(request, self.c.route_info.get_all_topic_list())

    def delete_topic(self, conn: Connection, request: RemotingCommand) -> RemotingCommand:
        self.c.route_info.delete_topic(_need(request, "topic"), ext_str(request, "clusterName"))
        return response_for(request, ResponseCode.SUCCESS)

    def get_topics_by_cluster(self, conn: Connection, request: RemotingCommand) -> RemotingCommand:
        return self._topics(request, self.c.route_info.get_topics_by_cluster(_need(request, "cluster")))

    def get_system_topic_list(self, conn: Connection, request: RemotingCommand) -> RemotingCommand:
        return self._topics(request, self.c.route_info.get_system_topic_list())

    # ---------------------------------------------------------- config

    def update_config(self, conn: Connection, request: RemotingCommand) -> RemotingCommand:
        log.info("updateConfig called by %s", conn.remote_addr)
        if request.body:
            try:
                props = parse_properties_body(request.body)
            except ConfigError as exc:
                return response_for(request, ResponseCode.SYSTEM_ERROR, f"string2Properties error: {exc}")
            if CONFIG_BLACK_LIST & props.keys():
                return response_for(request, ResponseCode.NO_PERMISSION, "Can not update config in black list.")
            try:
                self.c.update_config(props)
            except ConfigError as exc:
                return response_for(request, ResponseCode.SYSTEM_ERROR, str(exc))
        return response_for(request, ResponseCode.SUCCESS)

    def get_config(self, conn: Connection, request: RemotingCommand) -> RemotingCommand:
        return response_for(request, ResponseCode.SUCCESS, body=self.c.config_text().encode("utf-8"))

