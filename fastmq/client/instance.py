"""ClientInstance (RocketMQ's MQClientInstance): what producers and consumers of a process share.

One remoting client and the client API that makes every request over it (api.py), the
NameServer list with failover, the route cache refreshed every
``poll_name_server_interval`` (30 s), heartbeats to every broker every
``heartbeat_broker_interval`` (30 s) naming the producer and consumer groups registered here,
and, at shutdown, UNREGISTER_CLIENT to every broker.
"""
from __future__ import annotations

import asyncio
import functools
import logging
import os
import ssl
import sys
import threading
import time
import traceback
import weakref
from dataclasses import dataclass, field
from typing import Any, Protocol

from ..common.stats_item import HOUR_EVERY_S, MINUTE_EVERY_S
from ..errors import FAQ_SUFFIX, BadRouteError, ClientStateError, FastMQError, NoNameServerError
from ..protocol.java_number import json_long
from ..protocol.bodies import MASTER_ID, TopicRouteData, loads_mq_keyed
from ..protocol.codes import ClientErrorCode, RequestCode, ResponseCode
from ..protocol.command import VERSION_NAME, RemotingCommand, response_for
from ..protocol.consumer_running_info import PROP_CLIENT_VERSION, PROP_CONSUME_TYPE, PROP_NAMESERVER_ADDR
from ..protocol.headers import ConsumeMessageDirectlyResultRequestHeader, GetConsumerRunningInfoRequestHeader
from ..protocol.heartbeat import ConsumerData, HeartbeatData, ProducerData
from ..protocol.message import MessageConst, MessageFormatError, decode_record
from ..protocol.message_queue import MessageQueue
from ..remoting import Connection, RemotingClient, RequestProcessor
from ..remoting.address import local_address
from ..remoting.loop import every
from ..remoting.tls import client_context
from .acl import AclClientRPCHook, SessionCredentials
from .api import ClientAPI, RPCHook
from .consumer_stats import ConsumerStatsManager
from .request_reply import RequestTable

__all__ = ["ClientConfig", "ClientInstance"]

log = logging.getLogger("fastmq.client")

ROUTE_REFRESH_MIN_INTERVAL_S = 1.0  # refresh_route_soon fetches one topic's route at most this often
UNREACHABLE_BACKOFF_S = 3.0  # how long a broker address that refused a connection is passed over


def _split_namesrv(addr: str | list[str] | None) -> list[str]:
    if addr is None:
        addr = os.environ.get("NAMESRV_ADDR", "")
    if isinstance(addr, str):
        return [a.strip() for a in addr.split(";") if a.strip()]
    return [a.strip() for a in addr if a.strip()]


@dataclass
class ClientConfig:
    """ClientConfig's keys, snake_cased; times in milliseconds as in RocketMQ."""

    #: NameServers, ``"ns1:9876;ns2:9876"`` or a list; the client uses the one that last
    #: answered and fails over down the list. None: the ``NAMESRV_ADDR`` environment variable.
    namesrv_addr: str | list[str] | None = None
    #: The instance part of the client id ``ip@instance``; "DEFAULT" becomes ``pid#nanoTime``,
    #: new for each producer and clustering consumer.
    instance_name: str = "DEFAULT"
    #: The address part of the client id. Default: this host's first non-loopback address.
    client_ip: str = field(default_factory=local_address)
    #: Milliseconds between route refreshes of every topic in use.
    poll_name_server_interval: int = 30_000
    #: Milliseconds between heartbeats to every broker (the groups registered here).
    heartbeat_broker_interval: int = 30_000
    #: Milliseconds between commits of consumed offsets.
    persist_consumer_offset_interval: int = 5_000
    #: Milliseconds a request waits for its answer unless it has its own timeout (a send has
    #: the producer's send_msg_timeout).
    mq_client_api_timeout: int = 3_000
    #: For a cluster with ACL on: every request is signed with them (AclClientRPCHook).
    credentials: SessionCredentials | None = None
    #: RocketMQ's RPCHooks: each sees every request the client makes and every answer (after
    #: the ACL signer, when there are credentials); read, with the timeout above, when the
    #: ClientInstance is made.
    rpc_hooks: list[RPCHook] = field(default_factory=list)
    #: The largest read or write queue count a route may give one broker of a topic: a route above
    #: it is refused (BadRouteError) instead of building that many queues.
    max_topic_queue_nums: int = 1024
    #: TLS to the NameServers and brokers: True (4.9.8's ``useTLS``: any server certificate is
    #: trusted, as in its default test mode) or an ``ssl.SSLContext`` of your own; False: plaintext.
    tls: bool | ssl.SSLContext = False

    def make_client_id(self, keep_default_name: bool = False) -> str:
        """``ip@instanceName``, the id brokers know a client by. A "DEFAULT" name becomes
        ``pid#nanoTime``, new on every call, as 4.9's changeInstanceNameToPID makes it for each
        producer and clustering consumer: two clients of one process (or of two containers with
        one address and pid) sharing an id look like one member of their group to the brokers,
        and every member computes the same share of the queues. ``keep_default_name`` keeps
        "DEFAULT" (a broadcasting consumer: its local offsets file is found by this id again
        after a restart)."""
        name = self.instance_name
        if name == "DEFAULT" and not keep_default_name:
            name = f"{os.getpid()}#{_unique_ns()}"
        return f"{self.client_ip}@{name}"


#: (client id, group) -> the consumer registered under them, over every instance of the process
#: (weak: a consumer dropped without a shutdown does not hold its group forever)
_consumers_by_id: "weakref.WeakValueDictionary[tuple[str, str], Any]" = weakref.WeakValueDictionary()
_last_ns = 0
_last_ns_lock = threading.Lock()


def _unique_ns() -> int:
    """time.monotonic_ns(), strictly increasing across calls (two clients made in one tick)."""
    global _last_ns
    with _last_ns_lock:
        _last_ns = max(_last_ns + 1, time.monotonic_ns())
        return _last_ns


def _check_queue_nums(topic: str, route: TopicRouteData, hi: int) -> None:
    """Raise BadRouteError when ``route`` names a queue count outside ``0..hi``."""
    counts = [(qd.broker_name, qd.read_queue_nums, qd.write_queue_nums) for qd in route.queue_datas]
    for item in (route.order_topic_conf or "").split(";"):
        name, _, n = item.partition(":")
        if n.strip().isdigit():
            counts.append((name, int(n), int(n)))
    for name, r, w in counts:
        if not (0 <= r <= hi and 0 <= w <= hi):
            raise BadRouteError(f"the route of topic {topic} gives broker {name} {r} read and {w} write queues, "
                                f"outside 0..{hi} (max_topic_queue_nums): the route is not used",
                                ClientErrorCode.NOT_FOUND_TOPIC_EXCEPTION)


class _Member(Protocol):
    group: str


def reset_offset_table(body: bytes) -> dict[MessageQueue, int]:
    """ResetOffsetBody: fastjson's ``{"offsetTable":{{mq}:offset,...}}``, or the list the broker
    sends when a C++ tool asked (``{"offsetTable":[{brokerName, offset, queueId, topic}]}``).

    Raises:
        ValueError: neither form.
    """
    obj = loads_mq_keyed(body)  # (RemotingCommandError is a ValueError)
    table = obj.get("offsetTable") if isinstance(obj, dict) else None
    try:
        if isinstance(table, list):
            return {MessageQueue.from_obj(o): json_long(o["offset"]) for o in table}
        if isinstance(table, dict) and all(isinstance(k, MessageQueue) for k in table):
            return {mq: json_long(v) for mq, v in table.items()}
    except (KeyError, TypeError, AttributeError) as exc:
        raise ValueError(f"a queue without topic, brokerName, queueId or offset: {exc}") from None
    raise ValueError("no offsetTable of queues")


def thread_stacks() -> str:
    """Every thread's stack, innermost call first, in the shape of Java's UtilAll.jstack (what a
    Java consumer answers when the request asks ``jstackEnable``)."""
    frames = sys._current_frames()
    out: list[str] = []
    for t in threading.enumerate():
        out.append(f"Thread: {t.name}\n")
        f = frames.get(t.ident) if t.ident is not None else None
        if f is not None:
            out.extend(f"\tat {fr.name}({fr.filename}:{fr.lineno})\n" for fr in reversed(traceback.extract_stack(f)))
        out.append("\n")
    return "".join(out)


def _not_here(request: RemotingCommand, group: str) -> RemotingCommand:
    return response_for(request, ResponseCode.SYSTEM_ERROR, f"The Consumer Group <{group}> not exist in this consumer")


class _ServerRequests(RequestProcessor):
    """Requests brokers push to clients: NOTIFY_CONSUMER_IDS_CHANGED, the admin ones, the transaction
    checks and the replies to requests (PUSH_REPLY_MESSAGE_TO_CLIENT)."""

    def __init__(self, instance: "ClientInstance") -> None:
        self.instance = instance

    async def running_info(self, request: RemotingCommand) -> RemotingCommand:
        """GET_CONSUMER_RUNNING_INFO (``mqadmin consumerStatus``), passed on by a broker."""
        h = GetConsumerRunningInfoRequestHeader.decode(request)
        consumer = self.instance.consumers.get(h.consumerGroup)
        if consumer is None:
            return _not_here(request, h.consumerGroup)
        info = await consumer.running_info(thread_stacks() if h.jstackEnable else None)
        info.properties[PROP_NAMESERVER_ADDR] = "".join(f"{a};" for a in self.instance.remoting.namesrv_addrs)
        info.properties[PROP_CONSUME_TYPE] = consumer.consume_type
        info.properties[PROP_CLIENT_VERSION] = VERSION_NAME
        return response_for(request, ResponseCode.SUCCESS, body=info.to_json())

    async def consume_directly(self, request: RemotingCommand) -> RemotingCommand:
        """CONSUME_MESSAGE_DIRECTLY (``mqadmin queryMsgById -g -d``): the broker sends the stored
        record as the body; a push consumer of the group hands it to its listener."""
        h = ConsumeMessageDirectlyResultRequestHeader.decode(request)
        consumer = self.instance.consumers.get(h.consumerGroup)
        if consumer is None or not hasattr(consumer, "consume_message_directly"):
            return _not_here(request, h.consumerGroup)
        try:
            msg = decode_record(request.body or b"")
        except MessageFormatError as exc:
            return response_for(request, ResponseCode.SYSTEM_ERROR, f"the message to consume cannot be read: {exc}")
        result = await consumer.consume_message_directly(msg, h.brokerName)
        return response_for(request, ResponseCode.SUCCESS, body=result.to_json())

    def check_transaction_state(self, conn: Connection, request: RemotingCommand) -> None:
        """CHECK_TRANSACTION_STATE (oneway): the body is the half as a stored record; the producer
        of its PGROUP property checks it (ClientRemotingProcessor.checkTransactionState). A body
        without the group, or a group with no transactional producer here, is logged and dropped."""
        try:
            msg = decode_record(request.body or b"", verify_crc=False)
        except MessageFormatError as exc:
            log.warning("check transaction state from %s: the message cannot be read: %s", conn.remote_addr, exc)
            return
        group = msg.properties.get(MessageConst.PRODUCER_GROUP)
        check = getattr(self.instance.producers.get(group or ""), "check_transaction_state", None)
        if check is None:
            log.warning("checkTransactionState, pick producer by group[%s] failed", group)
            return
        check(conn, request, msg)

    def process_request(self, conn: Connection, request: RemotingCommand) -> Any:
        if request.code == RequestCode.CHECK_TRANSACTION_STATE:
            self.check_transaction_state(conn, request)
            return None
        if request.code == RequestCode.PUSH_REPLY_MESSAGE_TO_CLIENT:  # a reply to one of our requests
            return self.instance.requests.receive(request)
        if request.code == RequestCode.GET_CONSUMER_RUNNING_INFO:
            return self.running_info(request)
        if request.code == RequestCode.CONSUME_MESSAGE_DIRECTLY:
            return self.consume_directly(request)
        if request.code == RequestCode.NOTIFY_CONSUMER_IDS_CHANGED:
            group = (request.ext_fields or {}).get("consumerGroup", "")
            log.info("receive broker's notification[%s], the consumer group: %s changed, rebalance immediately",
                     conn.remote_addr, group)
            self.instance.rebalance_soon()
            return None
        if request.code == RequestCode.RESET_CONSUMER_CLIENT_OFFSET:
            fields = request.ext_fields or {}
            group, topic = fields.get("group", ""), fields.get("topic", "")
            consumer = self.instance.consumers.get(group)
            try:
                offsets = reset_offset_table(request.body or b"")
            except ValueError as exc:
                log.warning("reset offset from %s for %s: unreadable body: %s", conn.remote_addr, group, exc)
                return None
            log.info("invoke reset offset operation from broker. brokerAddr=%s, topic=%s, group=%s, timestamp=%s",
                     conn.remote_addr, topic, group, fields.get("timestamp"))
            if consumer is not None and hasattr(consumer, "reset_offset"):
                asyncio.ensure_future(consumer.reset_offset(topic, offsets))
            return None
        return response_for(request, ResponseCode.REQUEST_CODE_NOT_SUPPORTED,
                            f" request type {request.code} not supported")


def _ssl_context(tls: bool | ssl.SSLContext) -> ssl.SSLContext | None:
    if isinstance(tls, ssl.SSLContext):
        return tls
    return client_context() if tls else None


class ClientInstance:
    """Shared per process and NameServer list; producers and consumers register with it."""

    def __init__(self, config: ClientConfig, *, keep_default_name: bool = False) -> None:
        """``keep_default_name``: see :meth:`ClientConfig.make_client_id`."""
        self.config = config
        self.client_id = config.make_client_id(keep_default_name)
        self.remoting = RemotingClient(namesrv_addrs=_split_namesrv(config.namesrv_addr),
                                       processor=_ServerRequests(self), ssl=_ssl_context(config.tls))
        signer: list[RPCHook] = [AclClientRPCHook(config.credentials)] if config.credentials else []
        #: every request this instance's producers and consumers make goes through it
        self.api = ClientAPI(self.remoting, self.timeout, [*signer, *config.rpc_hooks])
        self.routes: dict[str, TopicRouteData] = {}
        #: broker name -> {broker id -> address}, from every route seen
        self.broker_addrs: dict[str, dict[int, str]] = {}
        self.producers: dict[str, Any] = {}
        self.consumers: dict[str, Any] = {}
        self._tasks: list[asyncio.Task[None]] = []
        self._rebalance_event: asyncio.Event | None = None
        self._brokers_changed = False
        self.started = False
        self._unreachable: dict[str, float] = {}
        self._refreshed: dict[str, float] = {}  # topic -> monotonic time of its last refresh_route_soon
        self._refreshing: set[asyncio.Task[None]] = set()
        self.consumer_stats = ConsumerStatsManager()
        #: requests of this instance's producers waiting for their replies (Producer.request)
        self.requests = RequestTable()
        #: broker addresses a heartbeat naming this instance's producers reached: a broker pushes
        #: a reply only to a client whose heartbeat it has (see Producer.request)
        self.producer_heartbeats: set[str] = set()

    @property
    def timeout(self) -> float:
        return self.config.mq_client_api_timeout / 1000

    # ----------------------------------------------------------- routes

    async def fetch_route(self, topic: str, timeout: float | None = None) -> TopicRouteData | None:
        """The route of ``topic`` from a NameServer; None when it has none (TOPIC_NOT_EXIST)."""
        if not self.remoting.namesrv_addrs:
            raise NoNameServerError(f"No name server address, please set it.{FAQ_SUFFIX}",
                                    ClientErrorCode.NO_NAME_SERVER_EXCEPTION)
        route = await self.api.get_route_info(topic, timeout or self.timeout)
        if route is None:
            return None
        _check_queue_nums(topic, route, self.config.max_topic_queue_nums)
        for b in route.broker_datas:
            if self.broker_addrs.get(b.broker_name) != b.broker_addrs:
                self._brokers_changed = True
            self.broker_addrs[b.broker_name] = dict(b.broker_addrs)
        return route

    async def update_route(self, topic: str) -> TopicRouteData | None:
        route = await self.fetch_route(topic)
        if route is not None and route != self.routes.get(topic):
            self.routes[topic] = route
            for p in list(self.producers.values()):
                p.on_route_changed(topic, route)
        if self._brokers_changed and self.started:
            # A broker we had not told about our groups: tell it now, not at the next 30 s tick,
            # or it would not list this consumer in its group and rebalance would skip us.
            self._brokers_changed = False
            await self.send_heartbeat_to_all_brokers()
        return route

    def refresh_route_soon(self, topic: str, min_interval: float = ROUTE_REFRESH_MIN_INTERVAL_S) -> None:
        """Fetch ``topic``'s route in the background now, rather than at the next poll, unless
        that was done less than ``min_interval`` seconds ago (a connection to one of its brokers
        just failed, or a consumer reads a slave for want of its master: the NameServer may know
        better already)."""
        if not self.started:
            return
        now = time.monotonic()
        last = self._refreshed.get(topic)
        if last is not None and now - last < min_interval:
            return
        if len(self._refreshed) > 10_000:  # bounded: endless topic names keep it small
            self._refreshed.clear()
        self._refreshed[topic] = now
        task = asyncio.ensure_future(self._refresh_one(topic))
        self._refreshing.add(task)
        task.add_done_callback(self._refreshing.discard)

    async def _refresh_one(self, topic: str) -> None:
        try:
            await self.update_route(topic)
        except FastMQError as exc:
            log.warning("updateTopicRouteInfoFromNameServer %s failed: %s", topic, exc)

    def master_addr(self, broker_name: str) -> str | None:
        return self.broker_addrs.get(broker_name, {}).get(MASTER_ID)

    # A broker address that just failed a connection (a master killed while the route still
    # lists it) is passed over for a moment, so pulls and offset commits go to another broker of
    # the same name (its slave) instead of failing once per request.
    def mark_unreachable(self, addr: str) -> None:
        """Pass over ``addr`` for :data:`UNREACHABLE_BACKOFF_S` when another address of its broker exists."""
        self._unreachable[addr] = time.monotonic() + UNREACHABLE_BACKOFF_S

    def _reachable(self, addr: str) -> bool:
        until = self._unreachable.get(addr)
        if until is None:
            return True
        if time.monotonic() >= until:
            del self._unreachable[addr]
            return True
        return False

    def find_broker_addr_in_subscribe(self, broker_name: str, broker_id: int,
                                      only_this_broker: bool = False) -> tuple[str | None, bool]:
        """RocketMQ's findBrokerAddressInSubscribe: the address of ``broker_id`` of that broker
        (an unreachable one passed over), else -- unless ``only_this_broker`` -- any other of its
        addresses, the master first. Returns ``(address, is_slave)``; ``(None, False)`` when none."""
        addrs = self.broker_addrs.get(broker_name) or {}
        addr = addrs.get(broker_id)
        # (every pull round asks: an address never marked unreachable is taken without a call)
        if addr is not None and (addr not in self._unreachable or self._reachable(addr) or len(addrs) == 1):
            return addr, broker_id != MASTER_ID
        if only_this_broker:
            return None, False
        for bid in sorted(addrs):
            a = addrs[bid]
            if a != addr and self._reachable(a):
                return a, bid != MASTER_ID
        return (addr, broker_id != MASTER_ID) if addr is not None else (None, False)

    def any_broker_addr(self, broker_name: str) -> str | None:
        """The master of ``broker_name`` if reachable, else a slave (offset queries and commits)."""
        return self.find_broker_addr_in_subscribe(broker_name, MASTER_ID)[0]

    # ---------------------------------------------------------- members

    def register_consumer(self, group: str, consumer: Any) -> None:
        """Register ``consumer`` under ``group`` (MQClientInstance.registerConsumer).

        Raises:
            ClientStateError: another consumer of ``group`` is registered under this client id,
                in this instance or another one of the process (4.9's text): brokers would list
                the two as one member, and both would take that member's queues.
        """
        key = (self.client_id, group)
        other = _consumers_by_id.get(key)
        if other is not None and other is not consumer:
            raise ClientStateError(f"The consumer group[{group}] has been created before, specify another name "
                                   f"please.{FAQ_SUFFIX}")
        _consumers_by_id[key] = consumer
        self.consumers[group] = consumer

    def unregister_consumer(self, group: str, consumer: Any) -> None:
        """Undo :meth:`register_consumer` (a consumer's shutdown, or a start that failed)."""
        key = (self.client_id, group)
        if _consumers_by_id.get(key) is consumer:
            del _consumers_by_id[key]
        if self.consumers.get(group) is consumer:
            del self.consumers[group]

    # -------------------------------------------------------- lifecycle

    async def start(self) -> None:
        if self.started:
            return
        self.started = True
        self._rebalance_event = asyncio.Event()
        self._tasks = [asyncio.ensure_future(every(self.config.poll_name_server_interval / 1000, self._refresh_routes)),
                       asyncio.ensure_future(every(self.config.heartbeat_broker_interval / 1000,
                                                         self.send_heartbeat_to_all_brokers)),
                       *(asyncio.ensure_future(every(period, functools.partial(self.sample_consumer_stats, window)))
                         for window, period in (("minute", MINUTE_EVERY_S), ("hour", HOUR_EVERY_S)))]

    def sample_consumer_stats(self, window: str) -> None:
        """The consumer stats' snapshot for ``window``, after folding in what every queue counted."""
        for consumer in list(self.consumers.values()):
            consumer.fold_stats()
        self.consumer_stats.sample(window)

    async def _refresh_routes(self) -> None:
        topics = set(self.routes)
        for p in self.producers.values():
            topics.update(p.topics())
        for topic in topics:
            try:
                await self.update_route(topic)
            except FastMQError as exc:
                log.warning("updateTopicRouteInfoFromNameServer %s failed: %s", topic, exc)

    def heartbeat_data(self) -> HeartbeatData:
        return HeartbeatData(self.client_id, [ProducerData(g) for g in self.producers],
                             [c.consumer_data() for c in self.consumers.values()
                              if isinstance(c.consumer_data(), ConsumerData)])

    async def send_heartbeat_to_all_brokers(self) -> None:
        hb = self.heartbeat_data()
        if not hb.producers and not hb.consumers:
            return
        body = hb.to_json()
        for name, addrs in list(self.broker_addrs.items()):
            for bid, addr in addrs.items():
                if bid != MASTER_ID and not hb.consumers:
                    continue  # producers only talk to masters
                try:
                    await self.api.send_heartbeat(addr, body)
                except FastMQError as exc:
                    log.warning("send heart beat to broker[%s %d %s] failed: %s", name, bid, addr, exc)
                else:
                    if hb.producers:
                        self.producer_heartbeats.add(addr)

    def rebalance_soon(self) -> None:
        if self._rebalance_event is not None:
            self._rebalance_event.set()

    async def unregister(self, producer_group: str | None = None, consumer_group: str | None = None) -> None:
        for name, addrs in list(self.broker_addrs.items()):
            for addr in addrs.values():
                try:
                    await self.api.unregister_client(addr, self.client_id, producer_group, consumer_group)
                except FastMQError as exc:
                    log.warning("unregister client from %s failed: %s", addr, exc)

    async def shutdown(self) -> None:
        self.requests.fail_all("the client instance shut down")
        for t in [*self._tasks, *self._refreshing]:
            t.cancel()
        await asyncio.gather(*self._refreshing, return_exceptions=True)
        await asyncio.gather(*self._tasks, return_exceptions=True)
        self._tasks = []
        await self.remoting.close()
        self.started = False
