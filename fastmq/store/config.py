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

    #: The store's directory: commit log, consume queues, index, checkpoint, ``config/`` metadata.
    storePathRootDir: str = field(
        default_factory=lambda: str(Path.home() / "store"))
    #: The commit log's directory; empty means ``<storePathRootDir>/commitlog``.
    storePathCommitLog: str = ""
    #: Bytes of each commit-log file (1 GiB); space is reserved before the file is mapped.
    mappedFileSizeCommitLog: int = 1024 * 1024 * 1024
    #: Bytes of each consume-queue file: 300,000 entries of 20 bytes.
    mappedFileSizeConsumeQueue: int = 300_000 * CQ_STORE_UNIT_SIZE
    #: ASYNC_FLUSH: answer a send once stored in memory, flush in the background; SYNC_FLUSH:
    #: answer after the fdatasync that covers it (group commit).
    flushDiskType: str = ASYNC_FLUSH
    #: ASYNC_FLUSH: milliseconds between background flushes of the commit log.
    flushIntervalCommitLog: int = 500
    #: ASYNC_FLUSH: pages (4 KiB) that must be dirty before a periodic flush writes them.
    flushCommitLogLeastPages: int = 4
    #: Milliseconds after which the commit log is flushed whatever the page count.
    flushCommitLogThoroughInterval: int = 10_000
    #: Milliseconds between flushes of the consume queues.
    flushIntervalConsumeQueue: int = 1000
    #: Pages that must be dirty before a periodic consume-queue flush writes them.
    flushConsumeQueueLeastPages: int = 2
    #: Milliseconds after which the consume queues are flushed whatever the page count.
    flushConsumeQueueThoroughInterval: int = 60_000
    #: SYNC_FLUSH: milliseconds a send waits for its flush before FLUSH_DISK_TIMEOUT; also how
    #: long a SYNC_MASTER send waits for its slave before FLUSH_SLAVE_TIMEOUT.
    syncFlushTimeout: int = 5000
    #: Largest message body accepted, in bytes (4 MiB).
    maxMessageSize: int = 4 * 1024 * 1024
    #: Check each record's body CRC when recovering after a crash.
    checkCRCOnRecover: bool = True
    #: Let a slave correct a pull's out-of-range offset as a master does.
    offsetCheckInSlave: bool = False
    #: Create the next commit-log file ahead of time and pre-read its pages (a first write to a
    #: fresh page is a much slower page fault) (fastmq's own key).
    preloadMappedFile: bool = True
    #: SYNC_FLUSH: a send that arrives alone is synced on the event loop, without the group-commit
    #: thread, while the last sync took less than this many microseconds; 0: always the thread
    #: (fastmq's own key).
    syncFlushInlineMaxMicros: int = 1000
    #: Hours a commit-log file is kept after its last write before retention may delete it.
    fileReservedTime: int = 72
    #: Hours of the day retention runs, ``;``-separated (``04``: at 4 a.m.); it also runs when the
    #: disk passes diskMaxUsedSpaceRatio.
    deleteWhen: str = "04"
    #: Percent of the disk the store may use before expired files are deleted outside deleteWhen.
    diskMaxUsedSpaceRatio: int = 75
    #: The delay levels 1..18 of delayed messages (``s``, ``m``, ``h``, ``d`` units).
    messageDelayLevel: str = "1s 5s 10s 30s 1m 2m 3m 4m 5m 6m 7m 8m 9m 10m 20m 30m 1h 2h"
    #: Milliseconds between writes of ``config/delayOffset.json``.
    flushDelayOffsetInterval: int = 10_000
    #: Hold messages carrying RocketMQ 5's ``TIMER_DELIVER_MS`` / ``TIMER_DELAY_SEC`` /
    #: ``TIMER_DELAY_MS`` until their time; false: such a send is refused (SYSTEM_ERROR), as 5.x does.
    timerWheelEnable: bool = True
    #: Milliseconds a timer message's time is rounded to (RocketMQ 5 snaps it to 100, 200, 500 or
    #: 1000); a message is delivered at the first multiple at or after its time.
    timerPrecisionMs: int = 1000
    #: The farthest a timer message may be set, in seconds (3 days); beyond, the send is refused
    #: with MESSAGE_ILLEGAL.
    timerMaxDelaySec: int = 259_200
    #: Milliseconds between writes of ``config/timercheck.json``, the timer service's progress.
    timerFlushIntervalMs: int = 1000
    #: Bytes one pull returns at most when its messages are in memory.
    maxTransferBytesOnMessageInMemory: int = 256 * 1024
    #: Messages one pull returns at most when they are in memory.
    maxTransferCountOnMessageInMemory: int = 32
    #: Bytes one pull returns at most when its messages must come from disk.
    maxTransferBytesOnMessageInDisk: int = 64 * 1024
    #: Messages one pull returns at most when they must come from disk.
    maxTransferCountOnMessageInDisk: int = 8
    #: Percent of physical memory the unread tail may fill and still count as "in memory"
    #: (pull sizes above; with slaveReadEnable, when to send a consumer to the slave).
    accessMessageInMemoryMaxRatio: int = 40
    #: Index messages by key and unique id (``queryMsgByKey``, ``queryMsgByUniqueKey``).
    messageIndexEnable: bool = True
    #: Most messages one QUERY_MESSAGE (``queryMsgByKey``) answers.
    maxMsgsNumBatch: int = 64
    #: Hash slots of each index file.
    maxHashSlotNum: int = 5_000_000
    #: Entries of each index file.
    maxIndexNum: int = 5_000_000 * 4
    #: ASYNC_MASTER (answers before the slave has the message), SYNC_MASTER (answers after the
    #: slave acknowledged it) or SLAVE.
    brokerRole: str = ASYNC_MASTER
    #: The master's replication port; 0 means listenPort + 1.
    haListenPort: int = 0
    #: A slave's master, ``host:port`` of its replication port; empty: learned from the NameServer.
    haMasterAddress: str = ""
    #: Replication over TLS (fastmq's own key, beyond 4.9): a master's replication port takes TLS
    #: only, with the tls.server.* certificate; a slave dials it with the tls.client.* keys. Both
    #: sides need it; a Java 4.9 peer speaks plaintext only.
    haTlsEnable: bool = False
    #: Milliseconds between a slave's offset reports (its heartbeat and acknowledgement).
    haSendHeartbeatInterval: int = 5000
    #: Milliseconds without a word after which a replication connection is closed.
    haHousekeepingInterval: int = 20_000
    #: Bytes of commit log a master sends a slave in one transfer.
    haTransferBatchSize: int = 32 * 1024
    #: Bytes a slave may lag before SYNC_MASTER sends stop waiting for it (SLAVE_NOT_AVAILABLE).
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
