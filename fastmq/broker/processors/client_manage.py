"""HEART_BEAT, UNREGISTER_CLIENT and CHECK_CLIENT_CONFIG: clients announcing who they are.

A consumer's heartbeat also creates its group's ``%RETRY%`` topic (so its first send-back has
somewhere to go; a new one is registered with the NameServers before the answer) and, when the
group's members or topics changed, makes the consumer manager tell the group to rebalance.
"""
from __future__ import annotations

import json
import logging
from typing import TYPE_CHECKING, Any

from ...errors import FilterExpressionError
from ...protocol import topic as tv
from ...protocol.codes import RequestCode, ResponseCode
from ...protocol.command import RemotingCommand, response_for
from ...protocol.headers import UnregisterClientRequestHeader
from ...protocol.heartbeat import ConsumerData, HeartbeatData
from ...remoting import Connection
from ..consumer_manager import ClientChannelInfo
from .base import BrokerCodeDispatchProcessor, log_refusal

if TYPE_CHECKING:
    from .base import BrokerContext

__all__ = ["ClientManageProcessor"]

log = logging.getLogger("fastmq.broker")

#: TopicSysFlag.buildSysFlag(false, true): the unit-subscription bit.
_UNIT_SUB_FLAG = 0x2


def _check_heartbeat_names(hb: HeartbeatData) -> str | None:
    """Why a heartbeat's group or topic names are refused, or None (the header gate's rules)."""
    for p in hb.producers:
        remark = tv.validate_group(p.group_name)
        if remark is not None:
            return remark
    for c in hb.consumers:
        remark = tv.validate_group(c.group_name)
        if remark is not None:
            return remark
        for sub in c.subscriptions:
            remark = tv.validate_topic_ref(sub.topic)
            if remark is not None:
                return remark
    return None


class ClientManageProcessor(BrokerCodeDispatchProcessor):
    def __init__(self, broker: "BrokerContext") -> None:
        super().__init__(broker)
        self.handlers = {RequestCode.HEART_BEAT: self.heart_beat,
                         RequestCode.UNREGISTER_CLIENT: self.unregister_client,
                         RequestCode.CHECK_CLIENT_CONFIG: self.check_client_config}
        self._warned_filters: set[tuple[str, str, str]] = set()

    def heart_beat(self, conn: Connection, request: RemotingCommand) -> Any:
        hb = HeartbeatData.from_json(request.body)
        remark = _check_heartbeat_names(hb)
        if remark is not None:  # nothing of a heartbeat with a bad name is registered
            log_refusal(request.code, f"{conn.remote_addr} ({hb.client_id[:100]})", remark)
            return response_for(request, ResponseCode.SYSTEM_ERROR, remark)
        b = self.broker
        info = ClientChannelInfo(conn, hb.client_id, request.language, request.version)
        created = False
        for data in hb.consumers:
            self._warn_filter(data)
            sgc = b.subscription_groups.find(data.group_name)
            notify = True
            if sgc is not None:
                notify = sgc.notify_consumer_ids_changed_enable
                retry = tv.retry_topic(data.group_name)
                # A legal group of more than 120 characters has no legal retry topic: its
                # consumers are served, their send-backs refused (see consumer_send_msg_back).
                if tv.validate_topic(retry) is None:
                    created = created or b.topic_config.select(retry) is None
                    b.topic_config.create_in_send_back(retry, sgc.retry_queue_nums, tv.PERM_WRITE | tv.PERM_READ,
                                                       _UNIT_SUB_FLAG if data.unit_mode else 0)
            b.consumer_manager.register(info, data, notify and b.config.notifyConsumerIdsChangedEnable)
        for p in hb.producers:
            b.producer_manager.register(p.group_name, info)
        response = response_for(request, ResponseCode.SUCCESS)
        return self._registered_first(response) if created else response

    def _warn_filter(self, data: ConsumerData) -> None:
        """A SQL92 subscription is compiled when its heartbeat registers it (4.9.8's
        ConsumerFilterManager); one that does not compile, or that this broker does not serve
        (enablePropertyFilter off: its pulls are refused), is logged once."""
        on = self.broker.config.enablePropertyFilter
        for sub in data.subscriptions:
            etype = sub.expression_type or "TAG"
            if etype == "TAG":
                continue
            why = None
            if not on:
                why = f"The broker does not support consumer to filter message by {etype}; its pulls are refused"
            else:
                try:
                    self.broker.consumer_filters.compile(etype, sub.sub_string)
                except FilterExpressionError as exc:
                    why = f"its expression does not compile ({exc}); its pulls get FILTER_DATA_NOT_EXIST"
            key = (data.group_name, sub.topic, f"{etype}:{sub.sub_string}")
            if why is not None and key not in self._warned_filters and len(self._warned_filters) < 4096:
                self._warned_filters.add(key)
                log.warning("consumer group %s subscribes %s by %s: %s", data.group_name, sub.topic, etype, why)

    async def _registered_first(self, response: RemotingCommand) -> RemotingCommand:
        # A group's retry topic made by its first heartbeat reaches the NameServers before the
        # answer, as 4.9 registers it inside the heartbeat: the Java consumer looks its route up
        # right after, and would otherwise wait for its 30 s route poll to find it.
        await self.broker.registered()  # only the new topics: the whole table grows with the groups
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
        """4.9.8's checkClientConfig: a TAG subscription passes; a SQL92 one needs
        enablePropertyFilter (else SYSTEM_ERROR) and an expression that compiles (else
        SUBSCRIPTION_PARSE_FAILED with the parser's text)."""
        try:
            body = json.loads(request.body or b"{}")
        except ValueError:
            return response_for(request, ResponseCode.SYSTEM_ERROR, "check client config body is not JSON")
        sub = body.get("subscriptionData") if isinstance(body, dict) else None
        if not isinstance(sub, dict):
            return response_for(request, ResponseCode.SUCCESS)
        etype = sub.get("expressionType") or "TAG"
        if etype == "TAG":
            return response_for(request, ResponseCode.SUCCESS)
        if not self.broker.config.enablePropertyFilter:
            return response_for(request, ResponseCode.SYSTEM_ERROR,
                                f"The broker does not support consumer to filter message by {etype}")
        expr = sub.get("subString")
        try:
            self.broker.consumer_filters.compile(str(etype), expr if isinstance(expr, str) else None)
        except FilterExpressionError as exc:
            log.warning("Client %s@%s filter message, but failed to compile expression! sub=%s, error=%s",
                        str(body.get("clientId"))[:100], str(body.get("group"))[:100], str(expr)[:200], exc)
            return response_for(request, ResponseCode.SUBSCRIPTION_PARSE_FAILED, str(exc))
        return response_for(request, ResponseCode.SUCCESS)
