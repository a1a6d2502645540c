"""GET_CONSUMER_LIST_BY_GROUP, QUERY_CONSUMER_OFFSET and UPDATE_CONSUMER_OFFSET."""
from __future__ import annotations

import json
from typing import TYPE_CHECKING

from ...protocol.codes import RequestCode, ResponseCode
from ...protocol.command import RemotingCommand, response_for
from ...protocol.headers import (GetConsumerListByGroupRequestHeader, QueryConsumerOffsetRequestHeader,
                                 UpdateConsumerOffsetRequestHeader)
from ...remoting import Connection
from .base import BrokerCodeDispatchProcessor

if TYPE_CHECKING:
    from .base import BrokerContext

__all__ = ["ConsumerManageProcessor"]


class ConsumerManageProcessor(BrokerCodeDispatchProcessor):
    def __init__(self, broker: "BrokerContext") -> None:
        super().__init__(broker)
        self.handlers = {RequestCode.GET_CONSUMER_LIST_BY_GROUP: self.get_consumer_list_by_group,
                         RequestCode.QUERY_CONSUMER_OFFSET: self.query_consumer_offset,
                         RequestCode.UPDATE_CONSUMER_OFFSET: self.update_consumer_offset}

    def get_consumer_list_by_group(self, conn: Connection, request: RemotingCommand) -> RemotingCommand:
        h = GetConsumerListByGroupRequestHeader.decode(request)
        g = self.broker.consumer_manager.find(h.consumerGroup)
        ids = g.client_ids() if g else []
        if ids:
            body = json.dumps({"consumerIdList": ids}, separators=(",", ":")).encode("utf-8")
            return response_for(request, ResponseCode.SUCCESS, body=body)
        return response_for(request, ResponseCode.SYSTEM_ERROR, f"no consumer for this group, {h.consumerGroup}")

    def query_consumer_offset(self, conn: Connection, request: RemotingCommand) -> RemotingCommand:
        h = QueryConsumerOffsetRequestHeader.decode(request)
        offset = self.broker.offsets.query(h.consumerGroup, h.topic, h.queueId)
        if offset >= 0:
            return response_for(request, ResponseCode.SUCCESS, ext_fields={"offset": offset})
        # Never committed: a queue whose first message is still here starts at 0, as RocketMQ does
        # (its extra "is offset 0 still in memory" test is always true for a store that keeps
        # every file mapped).
        if self.broker.store.min_offset_in_queue(h.topic, h.queueId) <= 0:
            return response_for(request, ResponseCode.SUCCESS, ext_fields={"offset": 0})
        return response_for(request, ResponseCode.QUERY_NOT_FOUND,
                            "Not found, V3_0_6_SNAPSHOT maybe this group consumer boot first")

    def update_consumer_offset(self, conn: Connection, request: RemotingCommand) -> RemotingCommand:
        h = UpdateConsumerOffsetRequestHeader.decode(request)
        self.broker.offsets.commit(h.consumerGroup, h.topic, h.queueId, h.commitOffset)
        return response_for(request, ResponseCode.SUCCESS)
