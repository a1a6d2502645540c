"""NamesrvController: the NameServer's parts wired together, and its timers.

- the remoting server on ``listenPort`` with :class:`DefaultRequestProcessor` for every code;
- a connection listener that drops a broker the moment its connection closes, fails or idles out;
- the liveness scan every ``scanNotActiveBrokerInterval`` (10 s), expiring brokers silent for
  ``brokerChannelExpiredTime`` (120 s);
- the KV table printed to the log every 10 minutes;
- with ``aclEnable``, the plain ACL in front of the dispatcher: writes need a signed admin account.
"""
from __future__ import annotations

import asyncio
import dataclasses
import logging
from pathlib import Path
from typing import Any

from ..common.properties import bind, check_storable, config_items, format_config, write_properties
from ..remoting import Connection, ConnectionGoneListener, RemotingServer
from ..remoting.acl import AccessGate, PlainPermissionManager
from ..remoting.loop import every
from ..remoting.metrics_http import MetricsHttpServer, exporter_type
from ..remoting.processor import RequestProcessor
from ..remoting.rpc_latency import RpcLatency, TimedProcessor
from ..remoting.tls import TlsConfig
from .acl import namesrv_acl
from .config import NamesrvConfig, NamesrvServerConfig
from .kv_config import KVConfigManager
from .metrics import NamesrvMetrics
from .processor import DefaultRequestProcessor
from .route_info import RouteInfoManager

__all__ = ["NamesrvController"]

log = logging.getLogger("fastmq.namesrv")

KV_PRINT_INTERVAL = 600.0


class _BrokerHousekeeping(ConnectionGoneListener):
    def __init__(self, route_info: RouteInfoManager) -> None:
        self.route_info = route_info

    def connection_gone(self, conn: Connection) -> None:
        self.route_info.on_channel_destroy(conn.remote_addr, conn)


class NamesrvController:
    def __init__(self, config: NamesrvConfig | None = None, server_config: NamesrvServerConfig | None = None,
                 *, tls: TlsConfig | None = None) -> None:
        """``tls``: the ``tls.*`` keys; None: plaintext only."""
        self.config = config or NamesrvConfig()
        self.server_config = server_config or NamesrvServerConfig()
        self.route_info = RouteInfoManager(max_topic_queue_nums=self.config.maxTopicQueueNums)
        self.kv_config = KVConfigManager(self.config.kvConfigPath)
        sc = self.server_config
        self.server = RemotingServer(sc.bindAddress, sc.listenPort, idle_timeout=sc.serverChannelMaxIdleTimeSeconds,
                                     max_frame_size=sc.maxFrameSize, listener=_BrokerHousekeeping(self.route_info),
                                     max_connections=sc.serverMaxConnections,
                                     max_partial_frame_bytes=sc.serverMaxPartialFrameBytes,
                                     max_unsent_bytes=sc.serverMaxUnsentBytes, tls=tls)
        self.rpc_latency = RpcLatency()
        self.metrics_server: MetricsHttpServer | None = None
        processor: RequestProcessor = DefaultRequestProcessor(self)
        if exporter_type(self.config.metricsExporterType) == "PROM":
            processor = TimedProcessor(processor, self.rpc_latency)  # timed only with metrics on
            self.metrics_server = MetricsHttpServer(self.config.metricsPromExporterHost or "127.0.0.1",
                                                    self.config.metricsPromExporterPort,
                                                    NamesrvMetrics(self.route_info, self.server, self.rpc_latency).render)
        self.server.register_default_processor(processor)
        #: the plain ACL (aclEnable): every request is checked before the processor sees it
        self.acl: PlainPermissionManager | None = None
        if self.config.aclEnable:
            acl = self.acl = namesrv_acl(self.config.rocketmqHome, self.config.aclFile)
            self.server.guard(lambda handler: AccessGate(acl, handler).take)
        self._tasks: list[asyncio.Task[Any]] = []

    @property
    def port(self) -> int:
        return self.server.port

    async def start(self) -> None:
        self.kv_config.load()
        await self.server.start()
        if self.acl is not None:
            self.acl.start_watch()
        if self.metrics_server is not None:
            await self.metrics_server.start()
        self._tasks = [asyncio.ensure_future(every(self.config.scanNotActiveBrokerInterval / 1000,
                                                         self.scan_not_active_broker)),
                       asyncio.ensure_future(every(KV_PRINT_INTERVAL, self.kv_config.print_all))]

    def scan_not_active_broker(self) -> None:
        for conn in self.route_info.scan_not_active_broker(self.config.brokerChannelExpiredTime):
            conn.close()

    def update_config(self, props: dict[str, str]) -> None:
        """UPDATE_NAMESRV_CONFIG: apply known keys now; unknown keys are logged and ignored.

        All or nothing: the values are checked on a copy first, so one bad value changes
        nothing. Then, as RocketMQ's Configuration.update does, the whole configuration is
        written to ``configStorePath`` (a record for operators; startup reads only ``-c``).
        """
        check_storable(props)
        known = {k: v for k, v in props.items() if hasattr(self.config, k)}
        unknown = sorted(props.keys() - known.keys())
        if unknown:
            log.warning("UPDATE_NAMESRV_CONFIG: unknown keys ignored: %s", ", ".join(unknown))
        trial = bind(dataclasses.replace(self.config), known, source="UPDATE_NAMESRV_CONFIG")
        trial.validate()
        for k in known:
            setattr(self.config, k, getattr(trial, k))
        self.route_info.max_topic_queue_nums = self.config.maxTopicQueueNums  # next registrations
        log.info("namesrv config updated: %s", known)
        self._persist_config()

    def _persist_config(self) -> None:
        path = Path(self.config.configStorePath).expanduser()
        try:
            write_properties(path, config_items(self.config, self.server_config))
        except OSError as exc:  # the running values still apply; only the record is missing
            log.error("persist namesrv config to %s failed: %s", path, exc)

    def config_text(self) -> str:
        return format_config(self.config, self.server_config)

    async def shutdown(self) -> None:
        for t in self._tasks:
            t.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        self._tasks = []
        if self.acl is not None:
            await self.acl.stop_watch()
        if self.metrics_server is not None:
            await self.metrics_server.close()
        await self.server.close()
        self.kv_config.persist()
