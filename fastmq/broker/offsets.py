"""ConsumerOffsetManager: committed consume offsets per ``topic@group`` and queue.

Clients commit with UPDATE_CONSUMER_OFFSET (and piggy-backed on pulls); the table is written to
``config/consumerOffset.json`` every ``flushConsumerOffsetInterval`` (5 s) and at shutdown, so a
broker crash loses at most a few seconds of commits — which consumers then re-consume, the
at-least-once contract RocketMQ gives. The file format is RocketMQ's
(``{"offsetTable": {"topic@group": {"0": 42}}}``); Java brokers write the queue ids unquoted, and
we read that form too.

Beside the committed offsets it keeps the pull offsets (:attr:`ConsumerOffsetManager.pulled`):
where the last pull answer sent each group on, as RocketMQ 5's pullOffsetTable. They exist for
the in-flight and ready gauges of the metrics, and like 5.x's they are not persisted.
"""
from __future__ import annotations

import logging
import threading
from pathlib import Path
from typing import Any, Callable

from ..common.json_file import JsonConfigFile
from ..protocol.bodies import loads_lenient

__all__ = ["ConsumerOffsetManager", "TOPIC_GROUP_SEPARATOR"]

log = logging.getLogger("fastmq.broker")

TOPIC_GROUP_SEPARATOR = "@"


class ConsumerOffsetManager:
    """``{topic@group: {queue_id: offset}}`` with persistence; -1 means "never committed"."""

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        self.table: dict[str, dict[int, int]] = {}
        self._lock = threading.Lock()
        self._dirty = False
        #: (group, topic, queue id) -> the next offset the last pull answer gave; written once per
        #: answer by the pull processor, read at scrape time, never persisted (5.x keeps it so too)
        self.pulled: dict[tuple[str, str, int], int] = {}
        self.file: JsonConfigFile[dict[str, dict[int, int]]] = JsonConfigFile(self.path, self._snapshot_obj)

    @staticmethod
    def key(topic: str, group: str) -> str:
        return f"{topic}{TOPIC_GROUP_SEPARATOR}{group}"

    def commit(self, group: str, topic: str, queue_id: int, offset: int) -> None:
        key = f"{topic}{TOPIC_GROUP_SEPARATOR}{group}"  # (key())
        # (acquire/release, not `with`: every pull commits, and `with` looks up two special methods)
        lock = self._lock
        lock.acquire()
        try:
            q = self.table.get(key)  # (not setdefault: its default dict would be made on every pull)
            if q is None:
                self.table[key] = {queue_id: offset}
            else:
                q[queue_id] = offset
            self._dirty = True
        finally:
            lock.release()

    def query(self, group: str, topic: str, queue_id: int) -> int:
        """The committed offset, or -1 when the group never committed on that queue."""
        q = self.table.get(self.key(topic, group))
        if q is None:
            return -1
        return q.get(queue_id, -1)

    def query_pull(self, group: str, topic: str, queue_id: int) -> int:
        """The pull offset (5.x's queryPullOffset): where the last pull answer sent the group on,
        else its committed offset, else -1."""
        off = self.pulled.get((group, topic, queue_id))
        return self.query(group, topic, queue_id) if off is None else off

    def query_all(self, group: str, topic: str) -> dict[int, int]:
        return dict(self.table.get(self.key(topic, group), {}))

    def groups_of_topic(self, topic: str) -> set[str]:
        prefix = topic + TOPIC_GROUP_SEPARATOR
        return {k[len(prefix):] for k in list(self.table) if k.startswith(prefix)}

    def topics_of_group(self, group: str) -> set[str]:
        suffix = TOPIC_GROUP_SEPARATOR + group
        return {k[:-len(suffix)] for k in list(self.table) if k.endswith(suffix)}

    def remove_topic(self, topic: str) -> None:
        prefix = topic + TOPIC_GROUP_SEPARATOR
        self._remove(lambda k: k.startswith(prefix))
        self._forget_pulls(lambda g, t: t == topic)

    def remove_group(self, group: str) -> None:
        suffix = TOPIC_GROUP_SEPARATOR + group
        self._remove(lambda k: k.endswith(suffix))
        self._forget_pulls(lambda g, t: g == group)

    def _forget_pulls(self, doomed: Callable[[str, str], bool]) -> None:
        for k in [k for k in list(self.pulled) if doomed(k[0], k[1])]:
            self.pulled.pop(k, None)

    def _remove(self, doomed: Callable[[str], bool]) -> None:
        with self._lock:
            for k in [k for k in self.table if doomed(k)]:
                del self.table[k]
                self._dirty = True

    @staticmethod
    def _parse(obj: Any) -> dict[str, dict[int, int]]:
        if not isinstance(obj, dict):
            raise ValueError("not a JSON object")
        table = obj.get("offsetTable") or {}
        if not isinstance(table, dict):
            raise ValueError("offsetTable is not an object")
        return {str(k): {int(q): int(o) for q, o in v.items()} for k, v in table.items()}

    def load(self) -> None:
        """Read ``consumerOffset.json``; a damaged file is read from its ``.bak``.

        Raises:
            ConfigError: the file and its ``.bak`` are both damaged.
        """
        table = self.file.load(self._parse, loads_lenient)
        if table is None:
            return
        with self._lock:
            self.table = table
        log.info("loaded consumer offsets of %d topic@group pairs from %s", len(self.table), self.path)

    def _snapshot_obj(self) -> dict[str, Any]:
        with self._lock:
            self._dirty = False
            return {"offsetTable": {k: {str(q): o for q, o in v.items()} for k, v in self.table.items()}}

    def persist(self, force: bool = False) -> None:
        """Write the table now, in the caller's thread, if anything changed since the last write
        (or ``force``).

        Raises:
            OSError: the write failed.
        """
        if self._dirty or force:
            self.file.write_now()

    def persist_soon(self) -> None:
        """The flush timer's round: hand a write to the background thread if anything changed,
        so the snapshot and its fsync stay off the event loop."""
        if self._dirty:
            self.file.changed(0.0)
