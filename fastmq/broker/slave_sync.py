"""A slave's copy of its master's metadata (RocketMQ 4.9's ``broker:slave/SlaveSynchronize``).

The commit log comes over the HA connection (:mod:`fastmq.store.ha`); the metadata does not. At
start and every 60 s a slave asks its master for the topic configs (GET_ALL_TOPIC_CONFIG), the
consumer offsets (GET_ALL_CONSUMER_OFFSET), the delay-level offsets (GET_ALL_DELAY_OFFSET) and
the subscription groups (GET_ALL_SUBSCRIPTIONGROUP_CONFIG), and takes them over. So a consumer
that moves to the slave when the master goes finds its group and its offsets there.

:class:`MasterSyncProcessor` is the master's side: the three codes the admin processor does not
answer (GET_ALL_TOPIC_CONFIG is already there).
"""
from __future__ import annotations

import json
import logging
import os
from typing import TYPE_CHECKING, Any, Callable

from ..errors import FastMQError
from ..protocol.bodies import DataVersion, TopicConfig, loads_lenient
from ..protocol.codes import RequestCode, ResponseCode
from ..protocol.command import RemotingCommand, create_request, response_for
from ..remoting import Connection
from ..store.json_file import read_json, write_json_atomic
from .processors.base import BrokerCodeDispatchProcessor
from .subscription_group import SubscriptionGroupConfig

if TYPE_CHECKING:
    from .controller import BrokerController

__all__ = ["SlaveSynchronize", "MasterSyncProcessor", "SYNC_INTERVAL", "delay_offset_path"]

log = logging.getLogger("fastmq.broker")

SYNC_INTERVAL = 60.0  # seconds (BrokerController's slave sync timer: 10 s delay, then every 60 s)


def _compact(obj: Any) -> bytes:
    return json.dumps(obj, separators=(",", ":")).encode("utf-8")


def delay_offset_path(broker: "BrokerController") -> str:
    """Where the delay-level service keeps its offsets (``config/delayOffset.json``)."""
    schedule = broker.schedule
    path = getattr(schedule, "path", None)
    return path or os.path.join(broker.store_config.storePathRootDir, "config", "delayOffset.json")


class MasterSyncProcessor(BrokerCodeDispatchProcessor):
    """The master answers a slave's metadata sync."""

    def __init__(self, broker: "BrokerController") -> None:
        super().__init__(broker)
        self.handlers = {
            RequestCode.GET_ALL_CONSUMER_OFFSET: self.get_all_consumer_offset,
            RequestCode.GET_ALL_DELAY_OFFSET: self.get_all_delay_offset,
            RequestCode.GET_ALL_SUBSCRIPTIONGROUP_CONFIG: self.get_all_subscription_group,
        }

    def get_all_consumer_offset(self, conn: Connection, request: RemotingCommand) -> RemotingCommand:
        offsets = self.broker.offsets
        table = {k: {str(q): o for q, o in v.items()} for k, v in list(offsets.table.items())}
        return response_for(request, ResponseCode.SUCCESS, body=_compact({"offsetTable": table}))

    def get_all_delay_offset(self, conn: Connection, request: RemotingCommand) -> RemotingCommand:
        schedule = self.broker.schedule
        table = getattr(schedule, "offset_table", None)
        if table is None:
            return response_for(request, ResponseCode.SYSTEM_ERROR, "No delay offset in this broker")
        body = {"offsetTable": {str(k): v for k, v in sorted(dict(table).items())}}
        return response_for(request, ResponseCode.SUCCESS, body=_compact(body))

    def get_all_subscription_group(self, conn: Connection, request: RemotingCommand) -> RemotingCommand:
        sg = self.broker.subscription_groups
        with sg._lock:
            body = {"subscriptionGroupTable": {k: v.to_obj() for k, v in sg.table.items()},
                    "dataVersion": sg.data_version.to_obj()}
        return response_for(request, ResponseCode.SUCCESS, body=_compact(body))


class SlaveSynchronize:
    """The slave's side: pull the four tables from ``master_addr()`` and take them over."""

    def __init__(self, broker: "BrokerController", master_addr: Callable[[], str | None]) -> None:
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
                om.table[k] = {int(q): int(o) for q, o in v.items()}
            om._dirty = True
        om.persist()

    def _delay_offsets(self, obj: dict[str, Any]) -> None:
        table = {str(k): int(v) for k, v in (obj.get("offsetTable") or {}).items()}
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
