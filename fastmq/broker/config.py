"""BrokerConfig: the broker's own keys, named as in RocketMQ's ``broker.conf``.

Store keys (storePathRootDir, flushDiskType, mappedFileSizeCommitLog...) belong to
:class:`fastmq.store.config.MessageStoreConfig`; the listen port to the remoting server. The three
are loaded from one file, as RocketMQ's BrokerStartup does, each taking the keys it knows.
"""
from __future__ import annotations

import os
import socket
from dataclasses import dataclass, field

from ..remoting.address import local_address

__all__ = ["BrokerConfig", "local_address", "MASTER_ID"]

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

    @property
    def broker_addr(self) -> str:
        """The address the broker registers and stamps into STOREHOST: ``brokerIP1:listenPort``."""
        return f"{self.brokerIP1}:{self.listenPort}"

    @property
    def is_master(self) -> bool:
        return self.brokerId == MASTER_ID
