"""NamesrvConfig and the server keys of ``namesrv.properties``, with RocketMQ's names and defaults."""
from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path

__all__ = ["NamesrvConfig", "NamesrvServerConfig", "CONFIG_BLACK_LIST"]

_HOME = str(Path.home())

#: Keys UPDATE_NAMESRV_CONFIG may not change (NamesrvConfig.configBlackList's default).
CONFIG_BLACK_LIST = frozenset({"configBlackList", "configStorePath", "kvConfigPath"})


@dataclass
class NamesrvConfig:
    rocketmqHome: str = field(default_factory=lambda: os.environ.get("ROCKETMQ_HOME", ""))
    kvConfigPath: str = os.path.join(_HOME, "namesrv", "kvConfig.json")
    configStorePath: str = os.path.join(_HOME, "namesrv", "namesrv.properties")
    productEnvName: str = "center"
    clusterTest: bool = False
    orderMessageEnable: bool = False
    configBlackList: str = "configBlackList;configStorePath;kvConfigPath"
    #: How often the liveness scan runs (ms): 10 s in RocketMQ 4.9.8.
    scanNotActiveBrokerInterval: int = 10_000
    #: fastmq's key for RocketMQ's fixed 120 s broker expiry, so tests can shorten it.
    brokerChannelExpiredTime: int = 120_000
    #: Where the log file goes (RocketMQ's logback default is ~/logs/rocketmqlogs/namesrv.log).
    logPath: str = os.path.join(_HOME, "logs", "rocketmqlogs", "namesrv.log")


@dataclass
class NamesrvServerConfig:
    """The NettyServerConfig keys the NameServer honours."""

    listenPort: int = 9876
    bindAddress: str = "0.0.0.0"
    serverChannelMaxIdleTimeSeconds: int = 120
    maxFrameSize: int = 16 * 1024 * 1024
