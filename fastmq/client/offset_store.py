"""Consume offsets: on the broker for clustering (RemoteBrokerOffsetStore), in a local file for
broadcasting (LocalFileOffsetStore).

Both keep the table in memory and persist it every ``persist_consumer_offset_interval`` (5 s) and
when a queue is handed over, so a restart or a rebalance re-delivers at most what was consumed
since the last persist: RocketMQ's at-least-once contract.
"""
from __future__ import annotations

import asyncio
import json
import logging
import os
from pathlib import Path
from typing import TYPE_CHECKING

from ..common.json_file import load_json, write_json_atomic
from ..errors import FastMQError, QueryNotFoundError, RemotingConnectError
from ..protocol.message_queue import MessageQueue

if TYPE_CHECKING:
    from .instance import ClientInstance

__all__ = ["OffsetStore", "RemoteBrokerOffsetStore", "LocalFileOffsetStore"]

log = logging.getLogger("fastmq.client")


class OffsetStore:
    def __init__(self, instance: "ClientInstance", group: str) -> None:
        self.instance = instance
        self.group = group
        self.table: dict[MessageQueue, int] = {}

    def update(self, mq: MessageQueue, offset: int, increase_only: bool = False) -> None:
        old = self.table.get(mq)
        if increase_only and old is not None and offset < old:
            return
        self.table[mq] = offset

    async def read(self, mq: MessageQueue, from_store: bool = False) -> int:
        """The offset to resume ``mq`` at; -1 when none was ever committed."""
        if not from_store and mq in self.table:
            return self.table[mq]
        return await self._read_store(mq)

    async def _read_store(self, mq: MessageQueue) -> int:
        raise NotImplementedError

    async def persist_all(self, mqs: set[MessageQueue] | None = None) -> None:
        raise NotImplementedError

    def remove(self, mq: MessageQueue) -> None:
        self.table.pop(mq, None)


class RemoteBrokerOffsetStore(OffsetStore):
    """Offsets committed to the queue's broker (QUERY_CONSUMER_OFFSET / UPDATE_CONSUMER_OFFSET)."""

    async def _read_store(self, mq: MessageQueue) -> int:
        # the master, else a slave of the same name (it has the master's offsets, synced)
        addr = self.instance.any_broker_addr(mq.broker_name)
        if addr is None:
            await self.instance.update_route(mq.topic)
            addr = self.instance.any_broker_addr(mq.broker_name)
        if addr is None:
            return -1
        try:
            off = await self.instance.api.query_consumer_offset(addr, self.group, mq)
        except QueryNotFoundError:  # the group never committed an offset there
            return -1
        if off >= 0:
            self.table[mq] = off
        return off

    async def persist(self, mq: MessageQueue) -> None:
        off = self.table.get(mq)
        addr = self.instance.any_broker_addr(mq.broker_name)  # whichever of the name is reachable
        if off is None or addr is None:
            return
        api = self.instance.api
        try:
            await api.update_consumer_offset_oneway(addr, self.group, mq, off)
        except RemotingConnectError:
            self.instance.mark_unreachable(addr)
            other = self.instance.any_broker_addr(mq.broker_name)
            if other is None or other == addr:
                raise
            await api.update_consumer_offset_oneway(other, self.group, mq, off)

    async def persist_all(self, mqs: set[MessageQueue] | None = None) -> None:
        for mq in list(self.table):
            if mqs is not None and mq not in mqs:
                continue
            try:
                await self.persist(mq)
            except FastMQError as exc:
                log.warning("persist offset of %s failed: %s", mq, exc)


class LocalFileOffsetStore(OffsetStore):
    """Broadcasting: each consumer keeps its own offsets in ``~/.rocketmq_offsets/<client id>/<group>/offsets.json``."""

    def __init__(self, instance: "ClientInstance", group: str, path: str | Path | None = None) -> None:
        super().__init__(instance, group)
        base = os.environ.get("rocketmq.client.localOffsetStoreDir") or Path.home() / ".rocketmq_offsets"
        self.path = Path(path) if path else Path(base) / instance.client_id / group / "offsets.json"
        self._loaded = False
        self._writing = asyncio.Lock()  # the timer and a rebalance must not share offsets.json.tmp

    def _load(self) -> None:
        if self._loaded:
            return
        # RocketMQ's readLocalOffset: a damaged file is read from its .bak; both damaged is an
        # error (ConfigError naming the file), not a silent restart from the broker's position
        table = load_json(self.path, self._parse) or {}
        self._loaded = True
        for mq, off in table.items():
            self.table.setdefault(mq, off)

    @staticmethod
    def _parse(obj: object) -> dict[MessageQueue, int]:
        if not isinstance(obj, dict) or not isinstance(obj.get("offsetTable") or {}, dict):
            raise ValueError("no offsetTable object")
        out: dict[MessageQueue, int] = {}
        for key, off in (obj.get("offsetTable") or {}).items():
            try:
                mq = MessageQueue.from_obj(json.loads(key))
            except (ValueError, KeyError, TypeError):
                continue
            out[mq] = int(off)
        return out

    async def _read_store(self, mq: MessageQueue) -> int:
        self._load()
        return self.table.get(mq, -1)

    def remove(self, mq: MessageQueue) -> None:
        """Kept, as 4.9's empty removeOffset: a consumer drops every queue at shutdown before its
        last persist, and forgetting them there wrote an empty file, so the next process began
        again from ``consume_from_where``."""

    async def persist_all(self, mqs: set[MessageQueue] | None = None) -> None:
        self._load()
        table = {json.dumps(mq.to_obj(), sort_keys=True): off for mq, off in self.table.items()}
        async with self._writing:
            await asyncio.to_thread(write_json_atomic, self.path, {"offsetTable": table})  # fsync off the loop
