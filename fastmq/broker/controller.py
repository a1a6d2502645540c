"""BrokerController: the broker's parts wired together, and its timers.

- the :class:`MessageStore` (STOREHOST = ``brokerIP1:listenPort``), whose arrival callback wakes
  held pulls;
- the metadata managers, persisted under ``<storePathRootDir>/config``;
- the remoting server with the send, pull, client, consumer and admin processors;
- timers: NameServer registration every ``registerNameServerPeriod`` (forced at start and
  soon after a topic is created), consumer offsets every ``flushConsumerOffsetInterval``,
  the expiry scan of silent client channels every 10 s;
- the delay-level service (:mod:`fastmq.broker.schedule`), the timer-message service
  (:mod:`fastmq.broker.timer`) and the transaction check service
  (:mod:`fastmq.broker.transaction`), on a master only;
- replication (RocketMQ's classic HA): a master listens on ``haListenPort`` for slaves
  (:class:`~fastmq.store.ha.HAService`; SYNC_MASTER sends wait for a slave's ack); a slave
  (``brokerRole=SLAVE``, ``brokerId`` > 0) follows the master's commit log
  (:class:`~fastmq.store.ha.HAClient`), refuses sends, and copies the master's metadata every
  60 s (:mod:`fastmq.broker.slave_sync`).
"""
from __future__ import annotations

import asyncio
import dataclasses
import functools
import logging
import os
import ssl
import time
from pathlib import Path
from typing import Any, Callable

from ..common.properties import bind, check_storable, config_items, write_properties
from ..errors import ConfigError
from ..protocol.bodies import DataVersion, TopicConfig
from ..protocol.codes import RequestCode
from ..protocol.command import create_request
from ..remoting import Connection, ConnectionGoneListener, RemotingClient, RemotingServer
from ..remoting.tls import ReloadingContext, TlsConfig, client_context, switching_server_context
from ..remoting.address import is_loopback
from ..remoting.loop import every
from ..remoting.metrics_http import MetricsHttpServer, exporter_type
from ..remoting.processor import RequestProcessor
from ..remoting.request_signer import RequestSigner
from ..remoting.rpc_latency import RpcLatency, TimedProcessor
from ..store.config import MessageStoreConfig
from ..store.ha import HAClient, HAService
from ..store.message_store import MessageStore
from .acl import AccessGate, PlainPermissionManager
from .config import RESTART_ONLY_KEYS, SECRET_KEYS, BrokerConfig, check_configs, inner_credentials, split_keys
from .consumer_filter import ConsumerFilterManager
from .consumer_manager import ConsumerManager, ProducerManager
from .metrics import BrokerMetrics, InBytes
from .stats import DAY_EVERY_S, HOUR_EVERY_S, MINUTE_EVERY_S, BrokerStatsManager, Tally
from .long_polling import PullRequestHoldService
from .namesrv_link import NamesrvLink
from .offsets import ConsumerOffsetManager
from .processors.acl_admin import AclAdminProcessor
from .processors.admin import AdminBrokerProcessor
from .processors.client_manage import ClientManageProcessor
from .processors.consumer_manage import ConsumerManageProcessor
from .processors.end_transaction import EndTransactionProcessor
from .processors.pull import PullMessageProcessor
from .processors.reply import ReplyMessageProcessor
from .processors.send import SendMessageProcessor
from .rebalance_lock import RebalanceLockManager
from .processors.master_sync import MasterSyncProcessor
from .slave_sync import SYNC_INTERVAL, SlaveSynchronize
from .subscription_group import SubscriptionGroupManager
from .timer import TimerMessageService
from .topic_config import TopicConfigManager
from .transaction import TransactionService

try:  # written by another part of the project; the broker runs without delay levels if absent
    from .schedule import ScheduleMessageService
except ImportError:  # pragma: no cover
    ScheduleMessageService = None  # type: ignore[assignment,misc]

__all__ = ["BrokerController", "loopback_warning"]

log = logging.getLogger("fastmq.broker")

CHANNEL_SCAN_INTERVAL = 10.0
STATS_SAMPLE_INTERVAL = 1.0  # StoreStatsService's sampling period
ADDRESS_SERVER_POLL_INTERVAL = 120.0


def loopback_warning(broker_ip: str, namesrv_addrs: list[str]) -> str | None:
    """One line when the broker advertises loopback to a NameServer other hosts may ask.

    Clients on other hosts get the route from that NameServer and would dial 127.0.0.1: their
    own host. Nothing fails at start, so without this line the mistake shows up as timeouts.
    """
    if not is_loopback(broker_ip):
        return None
    remote = [a for a in namesrv_addrs
              if not (is_loopback(a.rsplit(":", 1)[0]) or a.rsplit(":", 1)[0] == "localhost")]
    if not remote:
        return None
    return (f"advertising {broker_ip} to NameServer {', '.join(remote)}: clients on other hosts "
            f"cannot reach this broker; set brokerIP1 to an address they can reach")


class _ClientHousekeeping(ConnectionGoneListener):
    def __init__(self, broker: "BrokerController") -> None:
        self.broker = broker

    def connection_gone(self, conn: Connection) -> None:
        self.broker.consumer_manager.on_connection_closed(conn)
        self.broker.producer_manager.on_connection_closed(conn)
        self.broker.hold_service.release(conn)  # nobody left to answer: free what they hold now


class BrokerController:
    """A master broker: store, metadata, processors, NameServer link and timers."""

    def __init__(self, config: BrokerConfig | None = None, store_config: MessageStoreConfig | None = None,
                 *, tls: TlsConfig | None = None) -> None:
        """``tls``: the ``tls.*`` keys; None: plaintext only, in and out."""
        self.tls = tls
        self.config = config or BrokerConfig()
        self.store_config = store_config or MessageStoreConfig()
        self.boot_timestamp = int(time.time() * 1000)
        cfg_dir = os.path.join(self.store_config.storePathRootDir, "config")
        self.hold_service: PullRequestHoldService  # set below, after the pull processor exists
        self.store = MessageStore(self.store_config, store_host=self.config.broker_addr, on_arrival=self._on_arrival)
        self.topic_config = TopicConfigManager(self.config, os.path.join(cfg_dir, "topics.json"),
                                               on_new_topic=lambda tc: self.schedule_register(topic=tc))
        self.subscription_groups = SubscriptionGroupManager(os.path.join(cfg_dir, "subscriptionGroup.json"),
                                                            auto_create=self.config.autoCreateSubscriptionGroup)
        self.offsets = ConsumerOffsetManager(os.path.join(cfg_dir, "consumerOffset.json"))
        self.consumer_manager = ConsumerManager(notify=self._notify_consumer_ids_changed)
        self.consumer_filters = ConsumerFilterManager()
        self.producer_manager = ProducerManager()
        self.rebalance_locks = RebalanceLockManager()
        self.transactions = TransactionService(self)
        self.send_processor = SendMessageProcessor(self)
        self.pull_processor = PullMessageProcessor(self)
        self.hold_service = PullRequestHoldService(self.pull_processor.wake, self.pull_processor.flush_answers)
        c = self.config
        self.server = RemotingServer("0.0.0.0", c.listenPort, listener=_ClientHousekeeping(self),
                                     idle_timeout=c.serverChannelMaxIdleTimeSeconds, max_frame_size=c.maxFrameSize,
                                     max_connections=c.serverMaxConnections,
                                     max_partial_frame_bytes=c.serverMaxPartialFrameBytes,
                                     max_unsent_bytes=c.serverMaxUnsentBytes, tls=tls)
        self.metrics_on = exporter_type(c.metricsExporterType) == "PROM"
        #: RPC latency per request code: kept (processors wrapped) only with metrics on
        self.rpc_latency = RpcLatency()
        for proc in (self.send_processor, self.pull_processor, ClientManageProcessor(self),
                     ConsumerManageProcessor(self), AdminBrokerProcessor(self), MasterSyncProcessor(self),
                     EndTransactionProcessor(self), ReplyMessageProcessor(self, self.send_processor)):
            registered: RequestProcessor = TimedProcessor(proc, self.rpc_latency) if self.metrics_on else proc
            for code in proc.codes:
                self.server.register_processor(code, registered)
        #: the plain ACL (aclEnable): every request is checked before any processor sees it
        self.acl: PlainPermissionManager | None = None
        if c.aclEnable:
            self.acl = PlainPermissionManager(c.rocketmqHome, c.aclFile)
            acl = self.acl
            self.server.guard(lambda handler: AccessGate(acl, handler).take)
        acl_admin = AclAdminProcessor(self.acl, c)
        for code in acl_admin.codes:
            self.server.register_processor(code, acl_admin)
        # to the NameServers and the master: TLS with tls.enable, as a 4.9.8 broker with -Dtls.enable=true;
        # signed with innerClientAuthenticationCredentials (4.9.8's broker never signs: RocketMQ 5's key)
        creds = inner_credentials(c.innerClientAuthenticationCredentials)
        self.client = RemotingClient(ssl=client_context(tls) if tls is not None and tls.enable else None,
                                     rpc_hook=RequestSigner(*creds) if creds else None)
        ha_port = self.store_config.haListenPort or self.config.listenPort + 1
        ha_addr = f"{self.config.brokerIP2 or self.config.brokerIP1}:{ha_port}"
        self.namesrv = NamesrvLink(self.config, self.client, self.topic_config.snapshot, ha_addr)
        self.schedule = ScheduleMessageService(self.store) if ScheduleMessageService is not None else None
        self.timer = TimerMessageService(self.store)
        self.is_slave = self.store_config.is_slave
        # the master's HA address: haMasterAddress when set, else what the NameServer answers
        self.ha_master_addr: str | None = self.store_config.haMasterAddress or None
        self.ha_service: HAService | None = None
        self.ha_client: HAClient | None = None  # made at start: it reads the recovered store
        self.slave_sync: SlaveSynchronize | None = None
        if self.is_slave:
            self.slave_sync = SlaveSynchronize(self, lambda: self.namesrv.master_addr)
        else:
            self.ha_service = HAService(self.store, ha_port, ssl_context=self._ha_server_tls())
            self.store.ha_service = self.ha_service
        self._tasks: list[asyncio.Task[Any]] = []
        self._register_task: asyncio.Task[Any] | None = None
        self._register_full = False  # a whole-table registration is owed
        self._register_force = False
        self._register_topics: dict[str, TopicConfig] = {}  # only these are owed
        self._sync_task: asyncio.Task[Any] | None = None
        self._started = False
        # how far start() got: a failed start undoes only what it did (a broker refused for a
        # locked store or a taken port must not unregister, persist or touch the live one's files)
        self._owns_store = False
        self._metadata_loaded = False
        self._registered = False
        self.in_bytes = InBytes(self.store.queues)  # bytes in per topic, read from the consume queues
        self.metrics = BrokerMetrics(self, self.in_bytes, self.rpc_latency)
        # VIEW_BROKER_STATS_DATA's counters; the store-read items fed before each snapshot
        self.stats = BrokerStatsManager(feed=self.metrics.store_totals)
        self.dlq_sends = Tally()  # (group, original topic): rocketmq_send_to_dlq_messages_total
        self.tx_ends = Tally()  # ("commit" | "rollback", topic): the transaction counters
        self.half_puts = Tally()  # (real topic,): halves stored, for rocketmq_half_messages
        self.metrics_server: MetricsHttpServer | None = None
        if self.metrics_on:
            self.metrics_server = MetricsHttpServer(c.metricsPromExporterHost or "127.0.0.1",
                                                    c.metricsPromExporterPort, self.metrics.render)
        self.config_version = DataVersion()  # GET_BROKER_CONFIG's version
        self._pending_restart: dict[str, str] = {}  # updated keys that apply at the next start
        #: the -c file: UPDATE_BROKER_CONFIG rewrites it, as 4.9's BrokerStartup makes Configuration do
        self.config_path: str | None = None
        #: keys of that file no config object holds (logging), written back with the rest
        self.extra_config: list[tuple[str, str]] = []
        # BrokerStats: the put and get totals at yesterday's and today's midnight (0 until one passes)
        self._stats_day = time.strftime("%Y%m%d")
        self._put_mornings = (0, 0)
        self._get_mornings = (0, 0)

    def _ha_server_tls(self) -> ssl.SSLContext | None:
        """With haTlsEnable, the master's replication port serves the remoting server's
        certificate, as reloaded when its files change (each new HA connection takes the current
        one). Raises ConfigError when there is none to serve."""
        if not self.store_config.haTlsEnable:
            return None
        ctx = switching_server_context(self.server.ssl_context) if self.tls is not None else None
        if ctx is None:
            raise ConfigError("haTlsEnable=true needs a server certificate: tls.server.certPath and "
                              "tls.server.keyPath, or tls.test.mode.enable=true")
        return ctx

    def _ha_client_tls(self) -> Callable[[], ssl.SSLContext | None] | None:
        """With haTlsEnable, the slave's HA connection context, remade when the client
        certificate, key or trust file changes (the next connection to the master uses it)."""
        if not self.store_config.haTlsEnable:
            return None
        tls = self.tls or TlsConfig()
        files = tuple(f for f in (tls.client_cert_path, tls.client_key_path, tls.client_trust_cert_path) if f)
        return ReloadingContext(functools.partial(client_context, tls), lambda: files, "HA client TLS certificate")

    # ------------------------------------------------------------------ callbacks
    def _on_arrival(self, topic: str, queue_id: int, max_offset: int, tags_code: int | None) -> None:
        self.hold_service.arrived(topic, queue_id, max_offset, tags_code)  # woken next loop turn, not in the put
        if self.ha_service is not None:
            self.ha_service.notify_data()
        elif self.slave_sync is not None and self._started and self.topic_config.select(topic) is None:
            self._sync_soon()  # a topic the master made since the last sync: pulls need its config

    def _sync_soon(self) -> None:
        if self._sync_task is not None and not self._sync_task.done():
            return
        assert self.slave_sync is not None
        self._sync_task = asyncio.ensure_future(self.slave_sync.sync_all())

    def _notify_consumer_ids_changed(self, group: str, conns: list[Any]) -> None:
        for conn in conns:
            try:
                req = create_request(RequestCode.NOTIFY_CONSUMER_IDS_CHANGED, {"consumerGroup": group})
                req.flag |= 2  # oneway
                conn.send(req)
            except Exception:  # one bad channel must not keep the rest from rebalancing
                log.exception("notify consumer %s of group %s failed", getattr(conn, "remote_addr", conn), group)

    def schedule_register(self, force: bool = False, topic: TopicConfig | None = None) -> None:
        """Register with the NameServers now: the whole table, or with ``topic`` only that topic
        (4.9.8's registerIncrementBrokerData), so a new topic costs the same on a broker with 20
        or 20,000; what is asked meanwhile (a burst of auto-created topics) goes in one more
        registration after it.

        4.9 registers inside the request that created a topic, so a consumer that looks up the
        route right after the first send finds it; a Java consumer that does not waits for its
        30 s route poll."""
        if not self._started:
            return
        if topic is None:
            self._register_full = True
            self._register_force = self._register_force or force
        else:
            self._register_topics[topic.topic_name] = topic
        if self._register_task is None or self._register_task.done():
            self._register_task = asyncio.ensure_future(self._run_registrations())

    async def _run_registrations(self) -> None:
        while self._register_full or self._register_topics:
            full, force, topics = self._register_full, self._register_force, self._register_topics
            self._register_full, self._register_force, self._register_topics = False, False, {}
            if full:  # the whole table holds the topics too
                await self.register_all(force)
                continue
            try:
                await self.namesrv.register_all(True, topics=topics)
            except Exception:
                log.exception("register topics %s to name servers failed", ", ".join(list(topics)[:10]))

    async def registered(self) -> None:
        """Wait for the registrations asked for so far (bounded by the register timeout)."""
        task = self._register_task
        if task is not None and not task.done():
            await asyncio.shield(task)

    async def register_all(self, force: bool) -> None:
        try:
            results = await self.namesrv.register_all(force or self.config.forceRegister)
        except Exception:
            log.exception("register to name servers failed")
            return
        if self.is_slave and results:
            # RocketMQ: the first answer's haServerAddr (unless haMasterAddress is configured) and
            # masterAddr (None while the master is away: the slave sync pauses)
            first = results[0]
            if not self.store_config.haMasterAddress and first.ha_server_addr:
                self.ha_master_addr = first.ha_server_addr
            self.namesrv.master_addr = first.master_addr

    # ------------------------------------------------------------------ lifetime
    @property
    def port(self) -> int:
        return self.server.port

    async def start(self) -> None:
        """Lock the store, bind the ports, load metadata and the store, register.

        The order guards a live broker against a second one started by mistake: the store lock
        first (another broker on this store: StoreLockedError before any file changes), then the
        listening ports (a port clash: OSError before any file changes), and only then the
        files, the abort marker and the NameServers. Nothing reaches the new broker meanwhile:
        no route names it before it registers, and sends are refused until the store runs.
        """
        self.store.store_lock.acquire()
        self._owns_store = True
        await self.server.start(serve=False)  # bound, not yet accepting: clients wait for a ready broker
        if self.ha_service is not None:
            await self.ha_service.start()
        self.topic_config.load()
        self.subscription_groups.load()
        self.offsets.load()
        self._metadata_loaded = True
        self.store.load()
        self.store.start()
        self.in_bytes.start()  # bytes in count from here, as the stats items do
        if self.metrics_server is not None:
            await self.metrics_server.start()  # (a taken port fails the start here, before registration)
        if self.schedule is not None and not self.is_slave:
            await self.schedule.start()
        if not self.is_slave:
            await self.timer.start()
        if self.acl is not None:
            self.acl.start_watch()
        await self.server.start_serving()
        self._started = True
        if not self.is_slave:  # 4.9 starts the check service on a master only (startProcessorByHa)
            self.transactions.start_checks()
        self._registered = True  # from here on a shutdown owes the NameServers an unregister
        self.client.set_namesrv_addrs(self.namesrv.namesrv_addrs)
        warning = loopback_warning(self.config.brokerIP1, self.namesrv.namesrv_addrs)
        if warning:
            log.warning("%s", warning)
        await self.register_all(True)
        self._tasks = [
            asyncio.ensure_future(every(self.config.registerNameServerPeriod / 1000,
                                              lambda: self.register_all(self.config.forceRegister))),
            asyncio.ensure_future(every(self.config.flushConsumerOffsetInterval / 1000,
                                              self.offsets.persist_soon)),
            asyncio.ensure_future(every(CHANNEL_SCAN_INTERVAL, self.scan_channels)),
            asyncio.ensure_future(every(STATS_SAMPLE_INTERVAL, self.sample_stats)),
            *(asyncio.ensure_future(every(period, functools.partial(self.stats.sample, window)))
              for window, period in (("minute", MINUTE_EVERY_S), ("hour", HOUR_EVERY_S), ("day", DAY_EVERY_S))),
        ]
        if self.is_slave:
            self.ha_client = HAClient(self.store, lambda: self.ha_master_addr,
                                      ssl_context=self._ha_client_tls())
            self.ha_client.start()
            assert self.slave_sync is not None
            await self.slave_sync.sync_all()
            self._tasks.append(asyncio.ensure_future(every(SYNC_INTERVAL, self.slave_sync.sync_all)))
        if self.config.fetchNamesrvAddrByAddressServer:
            self._tasks.append(asyncio.ensure_future(every(ADDRESS_SERVER_POLL_INTERVAL,
                                                                 self.namesrv.poll_address_server)))

    def update_config(self, props: dict[str, str]) -> None:
        """UPDATE_BROKER_CONFIG: check the new values on copies (one bad value changes nothing),
        apply them, then write every key to the config file.

        Keys read only at start (RESTART_ONLY_KEYS) are written for the next start but not
        applied now; unknown keys are ignored, as 4.9's Configuration.update ignores them.

        Raises:
            ConfigError: a value of the wrong type, or one BrokerStartup would refuse.
        """
        check_storable(props)  # what cannot be written to the file is refused, not half-applied
        broker_keys, store_keys = split_keys(props, self.config, self.store_config)
        unknown = sorted(props.keys() - broker_keys.keys() - store_keys.keys())
        if unknown:
            log.warning("updateBrokerConfig: unknown keys ignored: %s", ", ".join(unknown))
        trial_cfg = bind(dataclasses.replace(self.config), broker_keys, source="UPDATE_BROKER_CONFIG")
        trial_store = bind(dataclasses.replace(self.store_config), store_keys, source="UPDATE_BROKER_CONFIG")
        check_configs(trial_cfg, trial_store)
        later = sorted((broker_keys.keys() | store_keys.keys()) & RESTART_ONLY_KEYS)
        for live, trial, keys in ((self.config, trial_cfg, broker_keys), (self.store_config, trial_store, store_keys)):
            for k in keys:
                if k not in RESTART_ONLY_KEYS:
                    setattr(live, k, getattr(trial, k))
        self._pending_restart.update({k: props[k] for k in later})
        if later:
            log.warning("updateBrokerConfig: %s take effect at the next start", ", ".join(later))
        self.config_version.next_version()
        self.send_processor.config_changed()
        log.info("updateBrokerConfig, new config: %s", props)
        self._persist_config()
        if "brokerPermission" in broker_keys:
            self.topic_config.data_version.next_version()
            self.schedule_register(True)

    def config_items(self) -> list[tuple[str, str]]:
        """The configuration as the file holds it: the running values, and those waiting for a
        restart."""
        items = [(k, v) for k, v in config_items(self.config, self.store_config) if k not in self._pending_restart]
        return items + sorted(self._pending_restart.items()) + self.extra_config

    def config_text(self) -> str:
        """GET_BROKER_CONFIG's body: ``key=value`` lines, unescaped, as 4.9's properties2String
        (the file's TLS key passwords and the broker's own credentials left out: 4.9.8 never
        shows its tls.* keys)."""
        return "".join(f"{k}={v}\n" for k, v in self.config_items()
                       if not k.endswith("keyPassword") and k not in SECRET_KEYS)

    def _persist_config(self) -> None:
        path = Path(self.config_path or Path.home() / "store" / "config" / "broker.properties").expanduser()
        try:
            write_properties(path, self.config_items())  # escaped as Properties.store: it reloads
        except OSError as exc:  # the running values still apply; only the file lags
            log.error("persist broker config to %s failed: %s", path, exc)

    def _totals_now(self) -> tuple[int, int]:
        st = self.store.stats
        return st["putMessageTimesTotal"], st["getMessageTransferedMsgCount"]

    def sample_stats(self) -> None:
        """Once a second: the store's TPS snapshot; on the first sample of a new day, the daily
        totals roll over (BrokerStats.record, which 4.9 schedules at midnight)."""
        self.store.stats_service.sample()
        today = time.strftime("%Y%m%d")
        if today != self._stats_day:
            self._stats_day = today
            put, get = self._totals_now()
            self._put_mornings = (self._put_mornings[1], put)
            self._get_mornings = (self._get_mornings[1], get)

    def daily_totals(self) -> tuple[tuple[int, int, int], tuple[int, int, int]]:
        """(yesterday morning, today morning, now) of the messages put, and of those got."""
        put, get = self._totals_now()
        return (*self._put_mornings, put), (*self._get_mornings, get)

    def scan_channels(self) -> None:
        for conn in self.consumer_manager.scan_not_active() + self.producer_manager.scan_not_active():
            conn.close()

    async def shutdown(self) -> None:
        """Unregister, answer held pulls, stop serving, persist metadata, flush the store."""
        self._started = False
        tasks = self._tasks + [t for t in (self._register_task, self._sync_task) if t is not None]
        for t in tasks:
            t.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        self._tasks = []
        if self._registered:
            self._registered = False
            try:
                await self.namesrv.unregister_all()
            except Exception:
                log.exception("unregister from name servers failed")
        await self.transactions.stop()
        if self.metrics_server is not None:
            await self.metrics_server.close()
        if self.acl is not None:
            await self.acl.stop_watch()
        self.hold_service.close()
        await self.server.close()
        for ha in (self.ha_client, self.ha_service):
            if ha is not None:
                try:
                    await ha.close()
                except Exception:
                    log.exception("stopping replication failed")
        if self.schedule is not None and not self.is_slave:
            try:
                await self.schedule.stop()
            except Exception:
                log.exception("stopping the delay-level service failed")
        if not self.is_slave:
            try:
                await self.timer.stop()
            except Exception:
                log.exception("stopping the timer-message service failed")
        if self._metadata_loaded:
            for persist in (lambda: self.offsets.persist(force=True), self.topic_config.persist,
                            self.subscription_groups.persist):
                try:
                    await asyncio.to_thread(persist)
                except Exception:
                    log.exception("persisting broker metadata failed")
        if self._owns_store:
            self._owns_store = False
            self.store.shutdown()  # releases the store lock last
        await self.client.close()
