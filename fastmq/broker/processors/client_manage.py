"""HEART_BEAT, UNREGISTER_CLIENT and CHECK_CLIENT_CONFIG: clients announcing who they are.

A consumer's heartbeat also creates its group's ``%RETRY%`` topic (so its first send-back has
somewhere to go; a new one is registered with the NameServers before the answer) and, when the
group's members or topics changed, makes the consumer manager tell the group to rebalance.
"""
from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

from ...protocol import topic as tv
from ...protocol.codes import RequestCode, ResponseCode
from ...protocol.command import RemotingCommand, response_for
from ...protocol.headers import UnregisterClientRequestHeader
from ...protocol.heartbeat import HeartbeatData
from ...remoting import Connection
from ..consumer_manager import ClientChannelInfo
from .base import CodeDispatchProcessor

if TYPE_CHECKING:
    from ..controller import BrokerController

__all__ = ["ClientManageProcessor"]

#: TopicSysFlag.buildSysFlag(false, true): the unit-subscription bit.
_UNIT_SUB_FLAG = 0x2


class ClientManageProcessor(CodeDispatchProcessor):
    def __init__(self, broker: "BrokerController") -> None:
        super().__init__(broker)
        self.handlers = {RequestCode.HEART_BEAT: self.heart_beat,
                         RequestCode.UNREGISTER_CLIENT: self.unregister_client,
                         RequestCode.CHECK_CLIENT_CONFIG: self.check_client_config}

    def heart_beat(self, conn: Connection, request: RemotingCommand) -> Any:
        hb = HeartbeatData.from_json(request.body)
        b = self.broker
        info = ClientChannelInfo(conn, hb.client_id, request.language, request.version)
        created = False
        for data in hb.consumers:
            sgc = b.subscription_groups.find(data.group_name)
            notify = True
            if sgc is not None:
                notify = sgc.notify_consumer_ids_changed_enable
                retry = tv.retry_topic(data.group_name)
                created = created or b.topic_config.select(retry) is None
                b.topic_config.create_in_send_back(retry, sgc.retry_queue_nums, tv.PERM_WRITE | tv.PERM_READ,
                                                   _UNIT_SUB_FLAG if data.unit_mode else 0)
            b.consumer_manager.register(info, data, notify and b.config.notifyConsumerIdsChangedEnable)
        for p in hb.producers:
            b.producer_manager.register(p.group_name, info)
        response = response_for(request, ResponseCode.SUCCESS)
        return self._registered_first(response) if created else response

    async def _registered_first(self, response: RemotingCommand) -> RemotingCommand:
        # A group's retry topic made by its first heartbeat reaches the NameServers before the
        # answer, as 4.9 registers it inside the heartbeat: the Java consumer looks its route up
        # right after, and would otherwise wait for its 30 s route poll to find it.
        await self.broker.register_all(True)
        return response

    def unregister_client(self, conn: Connection, request: RemotingCommand) -> RemotingCommand:
        h = UnregisterClientRequestHeader.decode(request)
        b = self.broker
        if h.producerGroup:
            b.producer_manager.unregister(h.producerGroup, conn)
        if h.consumerGroup:
            sgc = b.subscription_groups.table.get(h.consumerGroup)
            notify = sgc.notify_consumer_ids_changed_enable if sgc else True
            b.consumer_manager.unregister(h.consumerGroup, conn, notify and b.config.notifyConsumerIdsChangedEnable)
        return response_for(request, ResponseCode.SUCCESS)

    def check_client_config(self, conn: Connection, request: RemotingCommand) -> RemotingCommand:
        # Only TAG expressions are supported (no SQL92 filter), which RocketMQ reports the same way
        # when enablePropertyFilter is off; a TAG subscription always passes.
        try:
            body = json.loads(request.body or b"{}")
        except ValueError:
            return response_for(request, ResponseCode.SYSTEM_ERROR, "check client config body is not JSON")
        sub = body.get("subscriptionData") or {}
        etype = sub.get("expressionType") or "TAG"
        if etype != "TAG":
            return response_for(request, ResponseCode.SYSTEM_ERROR,
                                f"The broker does not support consumer to filter message by {etype}")
        return response_for(request, ResponseCode.SUCCESS)
