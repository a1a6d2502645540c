"""BrokerConfig: the broker's own keys, named as in RocketMQ's ``broker.conf``.

Store keys (storePathRootDir, flushDiskType, mappedFileSizeCommitLog...) belong to
:class:`fastmq.store.config.MessageStoreConfig`; the listen port to the remoting server. The three
are loaded from one file, as RocketMQ's BrokerStartup does, each taking the keys it knows.
"""
from __future__ import annotations

import json
import os
import socket
from dataclasses import dataclass, field

from typing import Mapping

from ..errors import ConfigError
from ..remoting.address import local_address
from ..remoting.metrics_http import check_exporter_keys
from ..remoting.server import check_server_limits
from ..store.config import MessageStoreConfig

__all__ = ["BrokerConfig", "local_address", "MASTER_ID", "split_keys", "check_configs", "RESTART_ONLY_KEYS",
           "SECRET_KEYS", "inner_credentials"]

MASTER_ID = 0
PERM_PRIORITY, PERM_READ, PERM_WRITE, PERM_INHERIT = 8, 4, 2, 1


@dataclass
class BrokerConfig:
    """The broker's keys and RocketMQ 4.9's defaults."""

    #: RocketMQ's install directory; accepted and reported (``-p``), not used by fastmq.
    #: Default: the ``ROCKETMQ_HOME`` environment variable, else empty.
    rocketmqHome: str = field(default_factory=lambda: os.environ.get("ROCKETMQ_HOME", ""))
    #: NameServers to register with, ``host:port`` separated by ``;`` (``-n`` sets it too).
    #: Default: the ``NAMESRV_ADDR`` environment variable, else empty (the broker registers nowhere).
    namesrvAddr: str = field(default_factory=lambda: os.environ.get("NAMESRV_ADDR", ""))
    #: The address the broker registers and clients connect to. Default: this host's first
    #: non-loopback address.
    brokerIP1: str = field(default_factory=local_address)
    #: The address a master gives its slaves for replication; empty means brokerIP1.
    brokerIP2: str = ""
    #: The broker name a master and its slaves share; routes are per broker name.
    #: Default: this host's name.
    brokerName: str = field(default_factory=lambda: socket.gethostname() or "DEFAULT_BROKER")
    #: The cluster the broker registers under (``mqadmin clusterList``, ``updateTopic -c``).
    brokerClusterName: str = "DefaultCluster"
    #: 0 for the master; a slave's id is above 0.
    brokerId: int = MASTER_ID
    #: READ 4 | WRITE 2 (| INHERIT 1, PRIORITY 8), carried by every route of this broker: without
    #: WRITE producers go elsewhere, without READ pulls are refused.
    brokerPermission: int = PERM_READ | PERM_WRITE
    #: The port clients and the NameServer reach the broker on.
    listenPort: int = 10911
    #: Queues of the TBW102 template topic: the most a topic created on its first send gets.
    defaultTopicQueueNums: int = 8
    #: Create a topic on its first send (through the TBW102 template topic).
    autoCreateTopicEnable: bool = True
    #: Register a topic named after the cluster (routes for ``-c`` admin commands).
    clusterTopicEnable: bool = True
    #: Register a topic named after the broker.
    brokerTopicEnable: bool = True
    #: Create a consumer group's subscription settings on its first heartbeat or pull.
    autoCreateSubscriptionGroup: bool = True
    #: The trace topic created when traceTopicEnable is on (clients with trace on write there).
    msgTraceTopicName: str = "RMQ_SYS_TRACE_TOPIC"
    #: Create the trace topic at start.
    traceTopicEnable: bool = False
    #: Milliseconds between writes of ``config/consumerOffset.json``.
    flushConsumerOffsetInterval: int = 5000
    #: Take the NameServer list from an HTTP address server instead of namesrvAddr.
    fetchNamesrvAddrByAddressServer: bool = False
    #: The address server's host: ``http://<domain>:8080/rocketmq/<subgroup>``.
    rmqAddressServerDomain: str = "jmenv.tbsite.net"
    #: The address server's path segment.
    rmqAddressServerSubGroup: str = "nsaddr"
    #: Hold a pull that finds nothing until a message arrives or the consumer's suspend time ends.
    longPollingEnable: bool = True
    #: With long polling off: milliseconds an empty pull is held before its answer.
    shortPollingTimeMills: int = 1000
    #: Tell a group's consumers when a member joins or leaves, so they rebalance at once.
    notifyConsumerIdsChangedEnable: bool = True
    #: The region named in every send's answer (``MSG_REGION``).
    regionId: str = "DefaultRegion"
    #: Named in every send's answer (``TRACE_ON``): whether the client may trace its sends.
    traceOn: bool = True
    #: Also store each reply (SEND_REPLY_MESSAGE) in the cluster's reply topic after pushing it
    #: to its requester.
    storeReplyMessageEnable: bool = True
    #: Milliseconds a registration waits for all NameServers.
    registerBrokerTimeoutMills: int = 6000
    #: Compress the topic table sent with each registration.
    compressedRegister: bool = False
    #: Register every period even when the NameServer already holds this data version.
    forceRegister: bool = True
    #: Milliseconds between registrations with the NameServers.
    registerNameServerPeriod: int = 30000
    #: Let a master send a lagging consumer to its slave (whichBrokerWhenConsumeSlowly).
    slaveReadEnable: bool = False
    #: Serve SQL92 subscriptions (``MessageSelector.bySql``): CHECK_CLIENT_CONFIG compiles them and
    #: pulls filter on message properties. Off, both answer SYSTEM_ERROR, as 4.9.8 does.
    enablePropertyFilter: bool = False
    #: Check every request against the plain ACL files (see docs/security.md).
    aclEnable: bool = False
    #: The plain ACL file, absolute or relative to rocketmqHome; '' means conf/plain_acl.yml
    #: (fastmq's own key: 4.9.8 reads the system property rocketmq.acl.plain.file).
    aclFile: str = ""
    #: Credentials the broker signs its own requests with (registration with the NameServers, a
    #: slave's metadata sync from its master), as JSON {"accessKey": ..., "secretKey": ...};
    #: '' sends them unsigned, as 4.9.8 always does. RocketMQ 5's key; never shown by
    #: GET_BROKER_CONFIG.
    innerClientAuthenticationCredentials: str = ""
    #: Seconds a connection may be idle (nothing read, nothing taken by the peer) before it is closed.
    serverChannelMaxIdleTimeSeconds: int = 120
    #: Largest frame accepted, in bytes; a larger length prefix closes the connection before any
    #: of the frame is buffered (fastmq's own key).
    maxFrameSize: int = 16 * 1024 * 1024
    #: Connections accepted at once; more are closed as they arrive (fastmq's own key).
    serverMaxConnections: int = 10_000
    #: Bytes of unfinished frames kept over all connections; the connection whose read would pass
    #: it is closed (fastmq's own key).
    serverMaxPartialFrameBytes: int = 256 * 1024 * 1024
    #: Bytes of answers a peer may leave unread before it is disconnected; 0: no limit
    #: (fastmq's own key).
    serverMaxUnsentBytes: int = 64 * 1024 * 1024
    #: Largest read or write queue count of a topic (creation, auto-creation); 1..65535
    #: (fastmq's own key).
    maxTopicQueueNums: int = 1024
    #: Refuse every half (transactional) message with NO_PERMISSION, as before fastmq stored them.
    rejectTransactionMessage: bool = False
    #: Milliseconds a half message must have waited (born to now) before the broker asks its
    #: producer group for the transaction's state; a half carrying
    #: ``CHECK_IMMUNITY_TIME_IN_SECONDS`` waits that long instead.
    transactionTimeOut: int = 6000
    #: Checks of one half before it is given up and moved to ``TRANS_CHECK_MAX_TIME_TOPIC``.
    transactionCheckMax: int = 15
    #: Milliseconds between two rounds of the master's transaction check service; the first
    #: round runs one interval after the start.
    transactionCheckInterval: int = 60000
    #: 4.9.8's END_TRANSACTION pool threads (max(8 + 2 x cores, 4 x sendMessageThreadPoolNums)).
    #: Accepted so a 4.9.8 ``broker.conf`` loads, and shown in the configuration; fastmq ends
    #: transactions on the event loop, so it has no such pool.
    endTransactionThreadPoolNums: int = field(default_factory=lambda: 8 + 2 * (os.cpu_count() or 1))
    #: 4.9.8's END_TRANSACTION pool queue bound. Accepted as ``endTransactionThreadPoolNums`` is, and
    #: reported as ``EndTransactionThreadPoolQueueCapacity`` in the runtime info, as 4.9.8 reports it.
    endTransactionPoolQueueCapacity: int = 100000
    #: ``PROM`` serves the broker's metrics as Prometheus text at
    #: ``http://<metricsPromExporterHost>:<metricsPromExporterPort>/metrics``; ``DISABLE`` serves
    #: none. RocketMQ 5's key; its OTLP_GRPC and LOG are refused (see docs/metrics.md).
    metricsExporterType: str = "DISABLE"
    #: The port of the Prometheus ``/metrics`` endpoint (RocketMQ 5's default).
    metricsPromExporterPort: int = 5557
    #: The address the ``/metrics`` endpoint listens on. Empty: 127.0.0.1, so metrics are not
    #: exposed by accident (RocketMQ 5 binds brokerIP1 when it is empty); ``0.0.0.0`` or the
    #: broker's address lets a Prometheus on another host scrape it.
    metricsPromExporterHost: str = ""

    @property
    def broker_addr(self) -> str:
        """The address the broker registers and stamps into STOREHOST: ``brokerIP1:listenPort``."""
        return f"{self.brokerIP1}:{self.listenPort}"

    @property
    def is_master(self) -> bool:
        return self.brokerId == MASTER_ID


#: Keys fastmq reads only when the broker starts: UPDATE_BROKER_CONFIG records them for the next
#: start but leaves the running broker's value alone (4.9 sets the field, with no effect, or, for
#: flushDiskType, a broken store).
RESTART_ONLY_KEYS = frozenset({
    "listenPort", "haListenPort", "brokerIP1", "brokerIP2", "brokerName", "brokerClusterName", "brokerId",
    "brokerRole", "namesrvAddr", "rocketmqHome", "storePathRootDir", "storePathCommitLog",
    "mappedFileSizeCommitLog", "mappedFileSizeConsumeQueue", "flushDiskType", "messageDelayLevel",
    "serverChannelMaxIdleTimeSeconds", "maxFrameSize", "serverMaxConnections", "serverMaxPartialFrameBytes",
    "serverMaxUnsentBytes", "metricsExporterType", "metricsPromExporterPort", "metricsPromExporterHost", "aclEnable",
    "aclFile", "innerClientAuthenticationCredentials", "haTlsEnable"})

#: Keys GET_BROKER_CONFIG leaves out: they hold secrets (4.9.8 never shows its tls.* keys).
SECRET_KEYS = frozenset({"innerClientAuthenticationCredentials"})


def inner_credentials(text: str) -> tuple[str, str] | None:
    """``innerClientAuthenticationCredentials`` -> (access key, secret key), or None when blank.
    Raises ConfigError for text that is not such a JSON object."""
    if not text.strip():
        return None
    try:
        obj = json.loads(text)
    except ValueError as exc:
        raise ConfigError(f"innerClientAuthenticationCredentials is not JSON: {exc}") from None
    ak = obj.get("accessKey") if isinstance(obj, dict) else None
    sk = obj.get("secretKey") if isinstance(obj, dict) else None
    if not isinstance(ak, str) or not isinstance(sk, str) or not ak.strip() or not sk.strip():
        raise ConfigError('innerClientAuthenticationCredentials must be {"accessKey": "...", "secretKey": "..."}')
    return ak, sk


def split_keys(props: Mapping[str, str], cfg: BrokerConfig, store: MessageStoreConfig
               ) -> tuple[dict[str, str], dict[str, str]]:
    """The keys of one properties file for BrokerConfig and for MessageStoreConfig (a key both
    know is the broker's); keys neither knows are left out."""
    mine = {k: v for k, v in props.items() if hasattr(store, k) and not hasattr(cfg, k)}
    return {k: v for k, v in props.items() if k not in mine and hasattr(cfg, k)}, mine


def check_configs(cfg: BrokerConfig, store: MessageStoreConfig) -> None:
    """BrokerStartup's checks. Raises ConfigError naming the key."""
    if not 0 <= cfg.listenPort <= 65535:
        raise ConfigError(f"listenPort={cfg.listenPort}: not a TCP port")
    if cfg.listenPort and store.haListenPort == cfg.listenPort and not store.is_slave:
        # a master binds both; two sockets bound before either listens can share a port, and
        # clients would then reach the replication listener (4.9.8 fails to bind the second)
        raise ConfigError(f"haListenPort={store.haListenPort}: the same port as listenPort")
    check_server_limits(cfg)
    check_exporter_keys(cfg)
    inner_credentials(cfg.innerClientAuthenticationCredentials)
    if store.flushDiskType.upper() not in ("ASYNC_FLUSH", "SYNC_FLUSH"):
        raise ConfigError(f"flushDiskType={store.flushDiskType}: expected ASYNC_FLUSH or SYNC_FLUSH")
    role = store.brokerRole.upper()
    if role not in ("ASYNC_MASTER", "SYNC_MASTER", "SLAVE"):
        raise ConfigError(f"brokerRole={store.brokerRole}: expected ASYNC_MASTER, SYNC_MASTER or SLAVE")
    if role == "SLAVE" and cfg.brokerId <= 0:  # BrokerStartup's rule
        raise ConfigError(f"brokerId={cfg.brokerId}: a slave's brokerId must be > 0")
    if store.syncFlushInlineMaxMicros < 0:
        raise ConfigError(f"syncFlushInlineMaxMicros={store.syncFlushInlineMaxMicros}: must be >= 0 "
                          "(0 = never sync on the event loop)")
    if store.mappedFileSizeCommitLog <= 0:
        raise ConfigError(f"mappedFileSizeCommitLog={store.mappedFileSizeCommitLog}: must be positive")
    if not 1 <= cfg.maxTopicQueueNums <= 65535:
        raise ConfigError(f"maxTopicQueueNums={cfg.maxTopicQueueNums}: must be within 1..65535")
    if not 1 <= cfg.defaultTopicQueueNums <= cfg.maxTopicQueueNums:
        raise ConfigError(f"defaultTopicQueueNums={cfg.defaultTopicQueueNums}: must be within "
                          f"1..maxTopicQueueNums ({cfg.maxTopicQueueNums})")
    for key in ("transactionTimeOut", "transactionCheckInterval"):
        if getattr(cfg, key) <= 0:
            raise ConfigError(f"{key}={getattr(cfg, key)}: must be above 0 (milliseconds)")
    if cfg.transactionCheckMax < 1:
        raise ConfigError(f"transactionCheckMax={cfg.transactionCheckMax}: must be at least 1")
    if not 0 <= cfg.brokerPermission <= 15:
        raise ConfigError(f"brokerPermission={cfg.brokerPermission}: must be within 0..15 "
                          "(PRIORITY 8, READ 4, WRITE 2, INHERIT 1)")
