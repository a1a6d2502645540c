"""NamesrvConfig and the server keys of ``namesrv.properties``, with RocketMQ's names and defaults."""
from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path

from ..errors import ConfigError

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
    #: fastmq's bound on a registered topic's queue counts (see RouteInfoManager).
    maxTopicQueueNums: int = 1024

    def validate(self) -> None:
        """Raise ConfigError for values the timers cannot run with (a 0 ms scan would spin)."""
        if self.scanNotActiveBrokerInterval <= 0:
            raise ConfigError(f"scanNotActiveBrokerInterval={self.scanNotActiveBrokerInterval}: must be > 0 ms")
        if self.brokerChannelExpiredTime <= 0:
            raise ConfigError(f"brokerChannelExpiredTime={self.brokerChannelExpiredTime}: must be > 0 ms")
        if not 1 <= self.maxTopicQueueNums <= 65535:
            raise ConfigError(f"maxTopicQueueNums={self.maxTopicQueueNums}: must be within 1..65535")


@dataclass
class NamesrvServerConfig:
    """The NettyServerConfig keys the NameServer honours."""

    listenPort: int = 9876
    bindAddress: str = "0.0.0.0"
    serverChannelMaxIdleTimeSeconds: int = 120
    maxFrameSize: int = 16 * 1024 * 1024

    def validate(self) -> None:
        """Raise ConfigError for a port, idle time or frame limit the server cannot use."""
        if not 0 <= self.listenPort <= 65535:
            raise ConfigError(f"listenPort={self.listenPort}: not a TCP port")
        if self.serverChannelMaxIdleTimeSeconds < 0:
            raise ConfigError(f"serverChannelMaxIdleTimeSeconds={self.serverChannelMaxIdleTimeSeconds}: must be >= 0")
        if self.maxFrameSize < 64:
            raise ConfigError(f"maxFrameSize={self.maxFrameSize}: too small for any request")
