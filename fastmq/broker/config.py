"""BrokerConfig: the broker's own keys, named as in RocketMQ's ``broker.conf``.

Store keys (storePathRootDir, flushDiskType, mappedFileSizeCommitLog...) belong to
:class:`fastmq.store.config.MessageStoreConfig`; the listen port to the remoting server. The three
are loaded from one file, as RocketMQ's BrokerStartup does, each taking the keys it knows.
"""
from __future__ import annotations

import os
import socket
from dataclasses import dataclass, field

from typing import Mapping

from ..errors import ConfigError
from ..remoting.address import local_address
from ..remoting.server import check_server_limits
from ..store.config import MessageStoreConfig

__all__ = ["BrokerConfig", "local_address", "MASTER_ID", "split_keys", "check_configs", "RESTART_ONLY_KEYS"]

MASTER_ID = 0
PERM_PRIORITY, PERM_READ, PERM_WRITE, PERM_INHERIT = 8, 4, 2, 1


@dataclass
class BrokerConfig:
    """The broker's keys and RocketMQ 4.9's defaults."""

    rocketmqHome: str = field(default_factory=lambda: os.environ.get("ROCKETMQ_HOME", ""))
    namesrvAddr: str = field(default_factory=lambda: os.environ.get("NAMESRV_ADDR", ""))
    brokerIP1: str = field(default_factory=local_address)
    brokerIP2: str = ""
    brokerName: str = field(default_factory=lambda: socket.gethostname() or "DEFAULT_BROKER")
    brokerClusterName: str = "DefaultCluster"
    brokerId: int = MASTER_ID
    brokerPermission: int = PERM_READ | PERM_WRITE
    listenPort: int = 10911
    defaultTopicQueueNums: int = 8
    autoCreateTopicEnable: bool = True
    clusterTopicEnable: bool = True
    brokerTopicEnable: bool = True
    autoCreateSubscriptionGroup: bool = True
    msgTraceTopicName: str = "RMQ_SYS_TRACE_TOPIC"
    traceTopicEnable: bool = False
    flushConsumerOffsetInterval: int = 5000
    fetchNamesrvAddrByAddressServer: bool = False
    rmqAddressServerDomain: str = "jmenv.tbsite.net"
    rmqAddressServerSubGroup: str = "nsaddr"
    longPollingEnable: bool = True
    shortPollingTimeMills: int = 1000
    notifyConsumerIdsChangedEnable: bool = True
    regionId: str = "DefaultRegion"
    traceOn: bool = True
    registerBrokerTimeoutMills: int = 6000
    compressedRegister: bool = False
    forceRegister: bool = True
    registerNameServerPeriod: int = 30000
    slaveReadEnable: bool = False
    aclEnable: bool = False
    # the remoting server's bounds (NettyServerConfig's idle time; the rest are fastmq's)
    serverChannelMaxIdleTimeSeconds: int = 120
    maxFrameSize: int = 16 * 1024 * 1024
    serverMaxConnections: int = 10_000
    serverMaxPartialFrameBytes: int = 256 * 1024 * 1024
    serverMaxUnsentBytes: int = 64 * 1024 * 1024
    #: fastmq's bound on a topic's read or write queue count (UPDATE_AND_CREATE_TOPIC, auto-create):
    #: a route with billions of queues kills every client that reads it.
    maxTopicQueueNums: int = 1024

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
    "serverMaxUnsentBytes"})


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
    check_server_limits(cfg)
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
    if cfg.aclEnable:  # accepting it would leave every request unauthenticated while claiming ACL
        raise ConfigError("aclEnable=true: fastmq's broker does not implement ACL (plain_acl.yml); "
                          "it refuses to start rather than serve without access control. Set aclEnable=false "
                          "and restrict access to the broker's ports by other means")
    if not 1 <= cfg.maxTopicQueueNums <= 65535:
        raise ConfigError(f"maxTopicQueueNums={cfg.maxTopicQueueNums}: must be within 1..65535")
    if not 1 <= cfg.defaultTopicQueueNums <= cfg.maxTopicQueueNums:
        raise ConfigError(f"defaultTopicQueueNums={cfg.defaultTopicQueueNums}: must be within "
                          f"1..maxTopicQueueNums ({cfg.maxTopicQueueNums})")
    if not 0 <= cfg.brokerPermission <= 15:
        raise ConfigError(f"brokerPermission={cfg.brokerPermission}: must be within 0..15 "
                          "(PRIORITY 8, READ 4, WRITE 2, INHERIT 1)")
