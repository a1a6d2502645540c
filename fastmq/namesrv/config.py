"""NamesrvConfig and the server keys of ``namesrv.properties``, with RocketMQ's names and defaults."""
from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path

from ..errors import ConfigError
from ..remoting.server import check_server_limits

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
    #: fastmq's cap on what a compressed REGISTER_BROKER body may inflate to: 8 MiB holds
    #: ~230,000 topics in that compact form, twice what a 16 MiB frame of JSON can carry; more is
    #: refused (SYSTEM_ERROR) rather than parsed for seconds.
    registerBodyMaxInflatedBytes: int = 8 * 1024 * 1024
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
        if self.registerBodyMaxInflatedBytes < 1024:
            raise ConfigError(f"registerBodyMaxInflatedBytes={self.registerBodyMaxInflatedBytes}: must be >= 1024")
        if not 1 <= self.maxTopicQueueNums <= 65535:
            raise ConfigError(f"maxTopicQueueNums={self.maxTopicQueueNums}: must be within 1..65535")


@dataclass
class NamesrvServerConfig:
    """The NettyServerConfig keys the NameServer honours."""

    listenPort: int = 9876
    bindAddress: str = "0.0.0.0"
    serverChannelMaxIdleTimeSeconds: int = 120
    maxFrameSize: int = 16 * 1024 * 1024
    # fastmq's bounds (see fastmq.remoting.server)
    serverMaxConnections: int = 10_000
    serverMaxPartialFrameBytes: int = 256 * 1024 * 1024
    serverMaxUnsentBytes: int = 64 * 1024 * 1024

    def validate(self) -> None:
        """Raise ConfigError for a port, idle time, frame or memory limit the server cannot use."""
        if not 0 <= self.listenPort <= 65535:
            raise ConfigError(f"listenPort={self.listenPort}: not a TCP port")
        check_server_limits(self)
