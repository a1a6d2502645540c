"""The master's side of a slave's metadata sync: the consumer offsets, the delay-level offsets and
the subscription groups (GET_ALL_TOPIC_CONFIG, the fourth table, is the admin processor's). The
slave's side is :mod:`fastmq.broker.slave_sync`.
"""
from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

from ...protocol.codes import RequestCode, ResponseCode
from ...protocol.command import RemotingCommand, response_for
from ...remoting import Connection
from .base import BrokerCodeDispatchProcessor

if TYPE_CHECKING:
    from .base import BrokerContext

__all__ = ["MasterSyncProcessor"]


def _compact(obj: Any) -> bytes:
    return json.dumps(obj, separators=(",", ":")).encode("utf-8")


class MasterSyncProcessor(BrokerCodeDispatchProcessor):
    """The master answers a slave's metadata sync."""

    def __init__(self, broker: "BrokerContext") -> None:
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
