"""MessageStoreConfig: the store's keys, named as in RocketMQ's ``broker.conf``.

Field names are the Java ones so a RocketMQ ``broker.conf`` binds unchanged through
:func:`fastmq.common.properties.bind`; defaults are RocketMQ 4.9's (``store:config/MessageStoreConfig``).
"""
from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path

__all__ = ["MessageStoreConfig", "ASYNC_FLUSH", "SYNC_FLUSH", "CQ_STORE_UNIT_SIZE",
           "ASYNC_MASTER", "SYNC_MASTER", "SLAVE"]

ASYNC_FLUSH = "ASYNC_FLUSH"
SYNC_FLUSH = "SYNC_FLUSH"
ASYNC_MASTER = "ASYNC_MASTER"
SYNC_MASTER = "SYNC_MASTER"
SLAVE = "SLAVE"
CQ_STORE_UNIT_SIZE = 20
"""Bytes of one consume-queue entry: int64 commit-log offset, int32 size, int64 tag code."""


@dataclass
class MessageStoreConfig:
    """The store's keys and RocketMQ 4.9's defaults."""

    storePathRootDir: str = field(
        default_factory=lambda: str(Path.home() / "store"))
    storePathCommitLog: str = ""  # empty: <storePathRootDir>/commitlog
    mappedFileSizeCommitLog: int = 1024 * 1024 * 1024
    mappedFileSizeConsumeQueue: int = 300_000 * CQ_STORE_UNIT_SIZE
    flushDiskType: str = ASYNC_FLUSH
    flushIntervalCommitLog: int = 500
    flushCommitLogLeastPages: int = 4
    flushCommitLogThoroughInterval: int = 10_000
    flushIntervalConsumeQueue: int = 1000
    flushConsumeQueueLeastPages: int = 2
    flushConsumeQueueThoroughInterval: int = 60_000
    syncFlushTimeout: int = 5000  # also how long a SYNC_MASTER send waits for the slave (4.9's handleHA)
    maxMessageSize: int = 4 * 1024 * 1024
    checkCRCOnRecover: bool = True
    offsetCheckInSlave: bool = False  # a slave corrects a pull's offset as a master does
    # fastmq's own key: create the next commit-log file ahead of time and pre-read its pages
    # (a first write to a fresh page is a ~10x slower page fault; see MappedFile.warm).
    preloadMappedFile: bool = True
    # fastmq's own key: under SYNC_FLUSH, a lone producer's fdatasync runs on the event loop at
    # the end of its turn (no thread hand-offs) while the last sync took less than this many
    # microseconds; 0 = always through the group-commit thread (see GroupCommitService).
    syncFlushInlineMaxMicros: int = 1000
    fileReservedTime: int = 72
    deleteWhen: str = "04"
    diskMaxUsedSpaceRatio: int = 75
    messageDelayLevel: str = "1s 5s 10s 30s 1m 2m 3m 4m 5m 6m 7m 8m 9m 10m 20m 30m 1h 2h"
    flushDelayOffsetInterval: int = 10_000
    maxTransferBytesOnMessageInMemory: int = 256 * 1024
    maxTransferCountOnMessageInMemory: int = 32
    maxTransferBytesOnMessageInDisk: int = 64 * 1024
    maxTransferCountOnMessageInDisk: int = 8
    accessMessageInMemoryMaxRatio: int = 40
    messageIndexEnable: bool = True
    maxMsgsNumBatch: int = 64
    maxHashSlotNum: int = 5_000_000
    maxIndexNum: int = 5_000_000 * 4
    # Master-slave replication (RocketMQ's classic HA, store:ha/HAService). The role and the HA
    # keys are store keys in RocketMQ too; haListenPort 0 means listenPort + 1, as BrokerStartup sets it.
    brokerRole: str = ASYNC_MASTER
    haListenPort: int = 0
    haMasterAddress: str = ""
    haSendHeartbeatInterval: int = 5000
    haHousekeepingInterval: int = 20_000
    haTransferBatchSize: int = 32 * 1024
    haSlaveFallbehindMax: int = 256 * 1024 * 1024

    @property
    def commit_log_dir(self) -> str:
        return self.storePathCommitLog or os.path.join(self.storePathRootDir, "commitlog")

    @property
    def consume_queue_dir(self) -> str:
        return os.path.join(self.storePathRootDir, "consumequeue")

    @property
    def checkpoint_path(self) -> str:
        return os.path.join(self.storePathRootDir, "checkpoint")

    @property
    def abort_path(self) -> str:
        """Exists while the store runs; found at start-up it means the last stop was a crash."""
        return os.path.join(self.storePathRootDir, "abort")

    @property
    def role(self) -> str:
        """brokerRole, upper-cased."""
        return self.brokerRole.upper()

    @property
    def is_slave(self) -> bool:
        return self.role == SLAVE

    @property
    def corrects_offsets(self) -> bool:
        """Whether a pull's out-of-range offset is moved (nextOffsetCorrection): on a master, or
        on a slave with offsetCheckInSlave."""
        return not self.is_slave or self.offsetCheckInSlave

    @property
    def sync_flush(self) -> bool:
        return self.flushDiskType.upper() == SYNC_FLUSH
