"""NamesrvConfig and the server keys of ``namesrv.properties``, with RocketMQ's names and defaults."""
from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path

from ..errors import ConfigError
from ..remoting.metrics_http import check_exporter_keys
from ..remoting.server import check_server_limits

__all__ = ["NamesrvConfig", "NamesrvServerConfig", "CONFIG_BLACK_LIST"]

_HOME = str(Path.home())

#: Keys UPDATE_NAMESRV_CONFIG may not change (NamesrvConfig.configBlackList's default, and the ACL
#: keys, which are read at start).
CONFIG_BLACK_LIST = frozenset({"configBlackList", "configStorePath", "kvConfigPath", "aclEnable", "aclFile"})


@dataclass
class NamesrvConfig:
    #: RocketMQ's install directory; accepted and reported (``-p``), not used by fastmq.
    #: Default: the ``ROCKETMQ_HOME`` environment variable, else empty.
    rocketmqHome: str = field(default_factory=lambda: os.environ.get("ROCKETMQ_HOME", ""))
    #: The KV table's file (``mqadmin updateKvConfig``; order topics' ``ORDER_TOPIC_CONFIG``).
    kvConfigPath: str = os.path.join(_HOME, "namesrv", "kvConfig.json")
    #: Where UPDATE_NAMESRV_CONFIG writes the whole configuration after a change (a record;
    #: a start reads only ``-c``).
    configStorePath: str = os.path.join(_HOME, "namesrv", "namesrv.properties")
    #: Accepted and reported, not used by fastmq.
    productEnvName: str = "center"
    #: Accepted and reported, not used by fastmq.
    clusterTest: bool = False
    #: Put a topic's ``ORDER_TOPIC_CONFIG`` KV entry into its routes (global order topics).
    orderMessageEnable: bool = False
    #: Reported only: the keys UPDATE_NAMESRV_CONFIG refuses are always these three, and
    #: ``aclEnable`` and ``aclFile``.
    configBlackList: str = "configBlackList;configStorePath;kvConfigPath"
    #: Milliseconds between scans for brokers that stopped registering.
    scanNotActiveBrokerInterval: int = 10_000
    #: Milliseconds without a registration after which a broker is dropped (fixed at 120 s in
    #: RocketMQ; fastmq's own key). A broker whose connection closes is dropped at once.
    brokerChannelExpiredTime: int = 120_000
    #: Bytes a compressed REGISTER_BROKER body may inflate to (about 230,000 topics); a larger
    #: one is refused with SYSTEM_ERROR (fastmq's own key).
    registerBodyMaxInflatedBytes: int = 8 * 1024 * 1024
    #: The log file (``--log-file`` wins). Default: ``~/logs/rocketmqlogs/namesrv.log``.
    logPath: str = os.path.join(_HOME, "logs", "rocketmqlogs", "namesrv.log")
    #: Largest read or write queue count a registered topic may have; a topic above it is left
    #: out of the routes (fastmq's own key).
    maxTopicQueueNums: int = 1024
    #: ``PROM`` serves the NameServer's metrics as Prometheus text at
    #: ``http://<metricsPromExporterHost>:<metricsPromExporterPort>/metrics``; ``DISABLE`` serves
    #: none (the broker's key name; read at start; fastmq's own on a NameServer).
    metricsExporterType: str = "DISABLE"
    #: The port of the NameServer's ``/metrics`` endpoint (the broker's default 5557 plus one, so
    #: both fit on one host).
    metricsPromExporterPort: int = 5558
    #: The address the ``/metrics`` endpoint listens on; empty: 127.0.0.1.
    metricsPromExporterHost: str = ""
    #: Refuse every state-changing request (REGISTER_BROKER, UNREGISTER_BROKER, QUERY_DATA_VERSION,
    #: the KV writes, WIPE/ADD_WRITE_PERM_OF_BROKER, DELETE_TOPIC_IN_NAMESRV, UPDATE_NAMESRV_CONFIG)
    #: that is not signed by an admin account of the plain ACL files; route and KV reads stay open
    #: (fastmq's own key: 4.9.8's NameServer has no ACL; see docs/security.md). Read at start.
    aclEnable: bool = False
    #: The plain ACL file, absolute or relative to rocketmqHome; '' means conf/plain_acl.yml (the
    #: broker's key; read at start, the file itself is reloaded when it changes).
    aclFile: str = ""

    def validate(self) -> None:
        """Raise ConfigError for values the timers cannot run with (a 0 ms scan would spin)."""
        if self.scanNotActiveBrokerInterval <= 0:
            raise ConfigError(f"scanNotActiveBrokerInterval={self.scanNotActiveBrokerInterval}: must be > 0 ms")
        if self.brokerChannelExpiredTime <= 0:
            raise ConfigError(f"brokerChannelExpiredTime={self.brokerChannelExpiredTime}: must be > 0 ms")
        if self.registerBodyMaxInflatedBytes < 1024:
            raise ConfigError(f"registerBodyMaxInflatedBytes={self.registerBodyMaxInflatedBytes}: must be >= 1024")
        if not 1 <= self.maxTopicQueueNums <= 65535:
            raise ConfigError(f"maxTopicQueueNums={self.maxTopicQueueNums}: must be within 1..65535")
        check_exporter_keys(self)


@dataclass
class NamesrvServerConfig:
    """The NettyServerConfig keys the NameServer honours."""

    #: The port clients and brokers reach the NameServer on.
    listenPort: int = 9876
    #: The address to listen on.
    bindAddress: str = "0.0.0.0"
    #: Seconds a connection may be idle (nothing read, nothing taken by the peer) before it is closed.
    serverChannelMaxIdleTimeSeconds: int = 120
    #: Largest frame accepted, in bytes; a larger length prefix closes the connection.
    maxFrameSize: int = 16 * 1024 * 1024
    #: Connections accepted at once; more are closed as they arrive (fastmq's own key).
    serverMaxConnections: int = 10_000
    #: Bytes of unfinished frames kept over all connections (fastmq's own key).
    serverMaxPartialFrameBytes: int = 256 * 1024 * 1024
    #: Bytes of answers a peer may leave unread before it is disconnected; 0: no limit
    #: (fastmq's own key).
    serverMaxUnsentBytes: int = 64 * 1024 * 1024

    def validate(self) -> None:
        """Raise ConfigError for a port, idle time, frame or memory limit the server cannot use."""
        if not 0 <= self.listenPort <= 65535:
            raise ConfigError(f"listenPort={self.listenPort}: not a TCP port")
        check_server_limits(self)
