"""A slave's copy of its master's metadata (RocketMQ 4.9's ``broker:slave/SlaveSynchronize``).

The commit log comes over the HA connection (:mod:`fastmq.store.ha`); the metadata does not. At
start and every 60 s a slave asks its master for the topic configs (GET_ALL_TOPIC_CONFIG), the
consumer offsets (GET_ALL_CONSUMER_OFFSET), the delay-level offsets (GET_ALL_DELAY_OFFSET) and
the subscription groups (GET_ALL_SUBSCRIPTIONGROUP_CONFIG), and takes them over. So a consumer
that moves to the slave when the master goes finds its group and its offsets there.

The master's side is :class:`fastmq.broker.processors.master_sync.MasterSyncProcessor`
(re-exported here).
"""
from __future__ import annotations

import logging
import os
from typing import TYPE_CHECKING, Any, Callable

from ..common.json_file import read_json, write_json_atomic
from ..errors import FastMQError
from ..protocol.java_number import json_int, json_long
from ..protocol.bodies import DataVersion, TopicConfig, loads_lenient
from ..protocol.codes import RequestCode, ResponseCode
from ..protocol.command import create_request
from .processors.master_sync import MasterSyncProcessor
from .subscription_group import SubscriptionGroupConfig

if TYPE_CHECKING:
    from .processors.base import BrokerContext

__all__ = ["SlaveSynchronize", "MasterSyncProcessor", "SYNC_INTERVAL", "delay_offset_path"]

log = logging.getLogger("fastmq.broker")

SYNC_INTERVAL = 60.0  # seconds (BrokerController's slave sync timer: 10 s delay, then every 60 s)


def delay_offset_path(broker: "BrokerContext") -> str:
    """Where the delay-level service keeps its offsets (``config/delayOffset.json``)."""
    schedule = broker.schedule
    path = getattr(schedule, "path", None)
    return path or os.path.join(broker.store_config.storePathRootDir, "config", "delayOffset.json")


class SlaveSynchronize:
    """The slave's side: pull the four tables from ``master_addr()`` and take them over."""

    def __init__(self, broker: "BrokerContext", master_addr: Callable[[], str | None]) -> None:
        self.broker = broker
        self.master_addr = master_addr
        self.last_sync_ok = False

    async def sync_all(self) -> None:
        """One round; each table on its own, so one failure does not keep the others stale."""
        addr = self.master_addr()
        if not addr:
            return
        ok = True
        for code, apply in ((RequestCode.GET_ALL_TOPIC_CONFIG, self._topics),
                            (RequestCode.GET_ALL_CONSUMER_OFFSET, self._offsets),
                            (RequestCode.GET_ALL_DELAY_OFFSET, self._delay_offsets),
                            (RequestCode.GET_ALL_SUBSCRIPTIONGROUP_CONFIG, self._groups)):
            try:
                resp = await self.broker.client.invoke(addr, create_request(code), 3.0)
                if resp.code != ResponseCode.SUCCESS or not resp.body:
                    ok = False
                    log.warning("slave sync %s from master %s: %s %s", code, addr, resp.code, resp.remark)
                    continue
                apply(loads_lenient(resp.body))
            except (FastMQError, ValueError, TypeError, KeyError, AttributeError) as exc:
                ok = False
                log.warning("slave sync %s from master %s failed: %s", code, addr, exc)
        self.last_sync_ok = ok

    def _topics(self, obj: dict[str, Any]) -> None:
        tcm = self.broker.topic_config
        version = DataVersion.from_obj(obj.get("dataVersion") or {})
        if tcm.data_version == version:
            return
        with tcm._lock:
            for name, tc in (obj.get("topicConfigTable") or {}).items():
                tcm.table[name] = TopicConfig.from_obj(tc)
            tcm.data_version = version
        tcm.persist()
        log.info("update slave topic config from master")

    def _offsets(self, obj: dict[str, Any]) -> None:
        om = self.broker.offsets
        table = obj.get("offsetTable") or {}
        with om._lock:
            for k, v in table.items():
                om.table[k] = {json_int(q): json_long(o) for q, o in v.items()}
            om._dirty = True
        om.persist()

    def _delay_offsets(self, obj: dict[str, Any]) -> None:
        table = {str(k): json_long(v) for k, v in (obj.get("offsetTable") or {}).items()}
        path = delay_offset_path(self.broker)
        if read_json(path, loads=loads_lenient) != {"offsetTable": table}:
            write_json_atomic(path, {"offsetTable": table})

    def _groups(self, obj: dict[str, Any]) -> None:
        sg = self.broker.subscription_groups
        version = DataVersion.from_obj(obj.get("dataVersion") or {})
        if sg.data_version == version:
            return
        with sg._lock:
            for name, cfg in (obj.get("subscriptionGroupTable") or {}).items():
                sg.table[name] = SubscriptionGroupConfig.from_obj(cfg)
            sg.data_version = version
        sg.persist()
        log.info("update slave subscription group config from master")
