"""KVConfigManager: the NameServer's namespaced key-value settings, persisted to ``kvConfigPath``.

The best-known namespace is ORDER_TOPIC_CONFIG (``topic -> "brokerA:4;brokerB:4"``), which
GET_ROUTEINFO_BY_TOPIC hands to clients as ``orderTopicConf``. Every change rewrites the file
atomically (temp file, fsync, rename), in RocketMQ's format ``{"configTable": {ns: {k: v}}}``.
"""
from __future__ import annotations

import logging
import threading
from pathlib import Path

from ..protocol.bodies import loads_lenient
from ..store.json_file import read_json, write_json_atomic

__all__ = ["KVConfigManager", "ORDER_TOPIC_CONFIG"]

log = logging.getLogger("fastmq.namesrv")

ORDER_TOPIC_CONFIG = "ORDER_TOPIC_CONFIG"


class KVConfigManager:
    def __init__(self, path: str | Path) -> None:
        self.path = Path(path).expanduser()
        self.table: dict[str, dict[str, str]] = {}
        self._lock = threading.RLock()

    def load(self) -> None:
        """Read the file if there is one; a corrupt file falls back to its backup copy."""
        obj = read_json(self.path, loads_lenient)
        if not isinstance(obj, dict):
            return
        table = obj.get("configTable") or {}
        with self._lock:
            self.table = {str(ns): {str(k): str(v) for k, v in kv.items()}
                          for ns, kv in table.items() if isinstance(kv, dict)}
        log.info("load KV config table OK, %d namespaces from %s", len(self.table), self.path)

    def persist(self) -> None:
        with self._lock:
            snapshot = {"configTable": {ns: dict(kv) for ns, kv in self.table.items()}}
        try:
            write_json_atomic(self.path, snapshot)
        except OSError as exc:
            # The in-memory value stays; the next change retries the write.
            log.error("persist kvconfig Exception, %s: %s", self.path, exc)

    def put(self, namespace: str, key: str, value: str) -> None:
        with self._lock:
            kv = self.table.setdefault(namespace, {})
            old = kv.get(key)
            kv[key] = value
            if old is None:
                log.info("putKVConfig create new config item, Namespace: %s Key: %s Value: %s", namespace, key, value)
            else:
                log.info("putKVConfig update config item, Namespace: %s Key: %s Value: %s", namespace, key, value)
        self.persist()

    def get(self, namespace: str, key: str) -> str | None:
        with self._lock:
            return self.table.get(namespace, {}).get(key)

    def delete(self, namespace: str, key: str) -> None:
        with self._lock:
            kv = self.table.get(namespace)
            if kv is None or kv.pop(key, None) is None:
                return
            log.info("deleteKVConfig delete a config item, Namespace: %s Key: %s", namespace, key)
        self.persist()

    def get_namespace(self, namespace: str) -> dict[str, str] | None:
        with self._lock:
            kv = self.table.get(namespace)
            return dict(kv) if kv is not None else None

    def print_all(self) -> None:
        with self._lock:
            log.info("--------------------------------------------------------")
            log.info("configTable SIZE: %d", len(self.table))
            for ns, kv in self.table.items():
                for k, v in kv.items():
                    log.info("configTable NS: %s Key: %s Value: %s", ns, k, v)
