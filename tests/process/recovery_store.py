"""The minimal store of the recovery tests (tests/process/test_store_recovery.py and the child it
kills mid-append): a commit log, its consume queues and the checkpoint, recovered at start."""
from __future__ import annotations

from pathlib import Path

from fastmq.protocol.message import encode_record, tags_code
from fastmq.store.checkpoint import StoreCheckpoint, create_abort_file, recover_store, remove_abort_file
from fastmq.store.commit_log import AppendRequest, CommitLog
from fastmq.store.config import MessageStoreConfig
from fastmq.store.consume_queue import ConsumeQueueTable

CL_FILE = 4096
CQ_FILE = 20 * 16


def recovery_config(root: Path, **kw: object) -> MessageStoreConfig:
    """A config under ``root`` with 4 KiB commit-log files; ``kw`` overrides fields."""
    c = MessageStoreConfig(storePathRootDir=str(root), mappedFileSizeCommitLog=CL_FILE,
                           mappedFileSizeConsumeQueue=CQ_FILE)
    for k, v in kw.items():
        setattr(c, k, v)
    return c


class Store:
    """The minimum of the coming message_store facade these tests need."""

    def __init__(self, c: MessageStoreConfig) -> None:
        self.c = c
        self.cl = CommitLog(c)
        self.cq = ConsumeQueueTable(c.consume_queue_dir, c.mappedFileSizeConsumeQueue)
        self.cp = StoreCheckpoint(c.checkpoint_path)
        self.result = recover_store(c, self.cl, self.cq, self.cp)
        create_abort_file(c)

    def put(self, topic: str, qid: int, body: bytes, tags: str = "TagA") -> tuple[int, int]:
        rec = encode_record(topic=topic, body=body, properties={"TAGS": tags}, queue_id=qid)
        d = self.cl.put_records([AppendRequest(rec, topic, qid, tags_code(tags))])[0]
        self.cq.dispatch([d])
        return d.queue_offset, d.commit_log_offset

    def bodies(self, topic: str, qid: int) -> list[bytes]:
        cq = self.cq.get(topic, qid)
        if cq is None:
            return []
        out = []
        for arr in cq.iter_entries(0):
            for o, s in zip(arr["offset"].tolist(), arr["size"].tolist()):
                out.append(self.cl.get_message(o, s).body)
        return out

    def shutdown(self) -> None:
        self.cl.shutdown()
        self.cq.flush(0)
        self.cp.physic_msg_timestamp = self.cl.flushed_store_timestamp
        self.cp.logics_msg_timestamp = self.cl.flushed_store_timestamp
        self.cp.close()
        self.cl.close()
        self.cq.close()
        remove_abort_file(self.c)

    def crash(self) -> None:
        """Drop everything without flushing the checkpoint or removing the abort marker."""
        self.cl.close()
        self.cq.close()
