"""SubscriptionGroupManager: per consumer group settings (retry queues, max retries), persisted.

A group is created on first use when ``autoCreateSubscriptionGroup`` is on (RocketMQ's default);
its ``retryMaxTimes`` (16) decides when a message that keeps failing goes to ``%DLQ%group``.
Stored as ``config/subscriptionGroup.json`` in RocketMQ's format.
"""
from __future__ import annotations

import logging
import threading
from pathlib import Path
from typing import Any

from ..common.json_file import JsonConfigFile, JsonText, PrettyTable, pretty_object
from ..protocol.bodies import DataVersion, SubscriptionGroupConfig, loads_lenient
from ..protocol.topic import validate_group

__all__ = ["SubscriptionGroupConfig", "SubscriptionGroupManager", "SYSTEM_GROUPS"]

log = logging.getLogger("fastmq.broker")

#: The groups RocketMQ's tools and proxies use, present on every broker.
SYSTEM_GROUPS = ("TOOLS_CONSUMER", "FILTERSRV_CONSUMER", "SELF_TEST_C_GROUP", "CID_ONS-HTTP-PROXY",
                 "CID_ONSAPI_PULL", "CID_ONSAPI_PERMISSION", "CID_ONSAPI_OWNER")

class SubscriptionGroupManager:
    """The group table; a change schedules a coalesced background write (see
    :class:`JsonConfigFile`), :meth:`persist` writes at once. A group's config is replaced to
    change it, never modified in place (the file's :class:`PrettyTable` keeps unchanged entries'
    text)."""

    def __init__(self, path: str | Path, auto_create: bool = True) -> None:
        self.path = Path(path)
        self.auto_create = auto_create
        self.table: dict[str, SubscriptionGroupConfig] = {g: SubscriptionGroupConfig(g) for g in SYSTEM_GROUPS}
        self.data_version = DataVersion()
        self._lock = threading.RLock()
        self.file: JsonConfigFile[tuple[dict[str, SubscriptionGroupConfig], DataVersion | None]] = JsonConfigFile(
            self.path, self._snapshot_obj)
        self._pretty: PrettyTable[SubscriptionGroupConfig] = PrettyTable(SubscriptionGroupConfig.to_obj)

    def find(self, group: str) -> SubscriptionGroupConfig | None:
        """The group's config, created with defaults on first use when auto-creation is on."""
        sgc = self.table.get(group)
        if sgc is None and self.auto_create:
            if validate_group(group) is not None:  # as HEAD's findSubscriptionGroupConfig: never made
                return None
            with self._lock:
                sgc = self.table.get(group)
                if sgc is None:
                    sgc = SubscriptionGroupConfig(group)
                    self.table[group] = sgc
                    log.info("auto create a subscription group, %s", sgc)
                    self.data_version.next_version()
                    self.file.changed()
        return sgc

    def update(self, sgc: SubscriptionGroupConfig) -> None:
        with self._lock:
            old = self.table.get(sgc.group_name)
            self.table[sgc.group_name] = sgc
            log.info("%s subscription group config, old: %s new: %s", "update" if old else "create", old, sgc)
            self.data_version.next_version()
            self.file.changed()

    def delete(self, group: str) -> bool:
        with self._lock:
            if self.table.pop(group, None) is None:
                return False
            self.data_version.next_version()
            self.file.changed()
            return True

    @staticmethod
    def _parse(obj: Any) -> tuple[dict[str, SubscriptionGroupConfig], DataVersion | None]:
        if not isinstance(obj, dict):
            raise ValueError("not a JSON object")
        table = obj.get("subscriptionGroupTable") or {}
        if not isinstance(table, dict):
            raise ValueError("subscriptionGroupTable is not an object")
        version = DataVersion.from_obj(obj["dataVersion"]) if obj.get("dataVersion") else None
        return {str(name): SubscriptionGroupConfig.from_obj(cfg) for name, cfg in table.items()}, version

    def load(self) -> None:
        """Merge ``subscriptionGroup.json`` over the system groups; a damaged file is read from
        its ``.bak``.

        Raises:
            ConfigError: the file and its ``.bak`` are both damaged.
        """
        loaded = self.file.load(self._parse, loads_lenient)
        if loaded is None:
            return
        groups, version = loaded
        with self._lock:
            self.table.update(groups)
            if version is not None:
                self.data_version = version
            self._pretty.encode(self.table)  # the whole table once now, not in the first change's write

    def _snapshot_obj(self) -> JsonText:
        with self._lock:  # a copy under the lock; the encoding outside it
            table, version = dict(self.table), self.data_version.to_obj()
        return pretty_object({"dataVersion": version, "subscriptionGroupTable": self._pretty.encode(table)})

    def persist(self) -> None:
        """Write ``subscriptionGroup.json`` now, in the caller's thread.

        Raises:
            OSError: the write failed.
        """
        self.file.write_now()
