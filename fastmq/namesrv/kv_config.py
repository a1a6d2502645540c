"""KVConfigManager: the NameServer's namespaced key-value settings, persisted to ``kvConfigPath``.

The best-known namespace is ORDER_TOPIC_CONFIG (``topic -> "brokerA:4;brokerB:4"``), which
GET_ROUTEINFO_BY_TOPIC hands to clients as ``orderTopicConf``. Every change rewrites the file
atomically (temp file, fsync, rename), in RocketMQ's format ``{"configTable": {ns: {k: v}}}``.
The NameServer's request handlers change the table with ``write=False`` and await
:meth:`KVConfigManager.persist_async`: the write (an fsync) runs on a thread, off the event loop,
and the change is on disk when it is answered, as RocketMQ 4.9 answers it.
"""
from __future__ import annotations

import asyncio
import logging
import threading
from pathlib import Path
from typing import Any

from ..common.json_file import JsonConfigFile
from ..protocol.bodies import loads_lenient

__all__ = ["KVConfigManager", "ORDER_TOPIC_CONFIG"]

log = logging.getLogger("fastmq.namesrv")

ORDER_TOPIC_CONFIG = "ORDER_TOPIC_CONFIG"


class KVConfigManager:
    def __init__(self, path: str | Path) -> None:
        self.path = Path(path).expanduser()
        self.table: dict[str, dict[str, str]] = {}
        self._lock = threading.RLock()
        self.file: JsonConfigFile[dict[str, dict[str, str]]] = JsonConfigFile(self.path, self._snapshot_obj)

    @staticmethod
    def _parse(obj: Any) -> dict[str, dict[str, str]]:
        if not isinstance(obj, dict):
            raise ValueError("not a JSON object")
        table = obj.get("configTable") or {}
        if not isinstance(table, dict):
            raise ValueError("configTable is not an object")
        return {str(ns): {str(k): str(v) for k, v in kv.items()} for ns, kv in table.items() if isinstance(kv, dict)}

    def load(self) -> None:
        """Read the file if there is one; a damaged file falls back to its backup copy.

        Raises:
            ConfigError: the file and its ``.bak`` are both damaged (the NameServer must not
                start empty and overwrite them).
        """
        table = self.file.load(self._parse, loads_lenient)
        if table is None:
            return
        with self._lock:
            self.table = table
        log.info("load KV config table OK, %d namespaces from %s", len(self.table), self.path)

    def _snapshot_obj(self) -> dict[str, Any]:
        with self._lock:
            return {"configTable": {ns: dict(kv) for ns, kv in self.table.items()}}

    def persist(self) -> None:
        """Write the table now (KV changes are rare admin requests; each is on disk when answered)."""
        try:
            self.file.write_now()
        except OSError as exc:
            # The in-memory value stays; the next change retries the write.
            log.error("persist kvconfig Exception, %s: %s", self.path, exc)

    async def persist_async(self) -> None:
        """:meth:`persist` on a worker thread; returns once the file is written (or the failure logged)."""
        await asyncio.to_thread(self.persist)

    def put(self, namespace: str, key: str, value: str, *, write: bool = True) -> None:
        """Set ``key`` in ``namespace``; ``write`` False leaves the write to the caller
        (:meth:`persist_async`)."""
        with self._lock:
            kv = self.table.setdefault(namespace, {})
            old = kv.get(key)
            kv[key] = value
            if old is None:
                log.info("putKVConfig create new config item, Namespace: %s Key: %s Value: %s", namespace, key, value)
            else:
                log.info("putKVConfig update config item, Namespace: %s Key: %s Value: %s", namespace, key, value)
        if write:
            self.persist()

    def get(self, namespace: str, key: str) -> str | None:
        with self._lock:
            return self.table.get(namespace, {}).get(key)

    def delete(self, namespace: str, key: str, *, write: bool = True) -> bool:
        """Remove ``key`` from ``namespace``; True when there was one (only then is the file
        rewritten, by this call unless ``write`` is False)."""
        with self._lock:
            kv = self.table.get(namespace)
            if kv is None or kv.pop(key, None) is None:
                return False
            log.info("deleteKVConfig delete a config item, Namespace: %s Key: %s", namespace, key)
        if write:
            self.persist()
        return True

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
