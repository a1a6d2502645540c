"""TopicPublishInfo: a topic's route turned into the queues a producer may send to.

Built as RocketMQ's topicRouteData2TopicPublishInfo does: an ``orderTopicConf`` ("brokerA:4;
brokerB:4") names the queues outright; otherwise every writable queue of every broker that has a
master, brokers in name order. The queues' broker numbers go into a compiled QueueTable so a
send picks its queue with one call.
"""
from __future__ import annotations

from dataclasses import dataclass, field

from .._ext.selector import QueueTable
from ..protocol.bodies import MASTER_ID, TopicRouteData
from ..protocol.message_queue import MessageQueue
from ..protocol.topic import is_writeable

__all__ = ["TopicPublishInfo", "BrokerNumbers"]


class BrokerNumbers:
    """Small integers for broker names, shared by every topic of a producer (the fault table's index)."""

    def __init__(self) -> None:
        self._by_name: dict[str, int] = {}
        self.names: list[str] = []

    def number(self, name: str) -> int:
        n = self._by_name.get(name)
        if n is None:
            n = self._by_name[name] = len(self.names)
            self.names.append(name)
        return n


@dataclass
class TopicPublishInfo:
    topic: str
    route: TopicRouteData
    queues: list[MessageQueue] = field(default_factory=list)
    order_topic: bool = False
    table: QueueTable | None = None
    #: broker name -> its master's address (the send path's lookup)
    masters: dict[str, str] = field(default_factory=dict)

    @classmethod
    def from_route(cls, topic: str, route: TopicRouteData, numbers: BrokerNumbers) -> "TopicPublishInfo":
        info = cls(topic, route)
        if route.order_topic_conf:
            for item in route.order_topic_conf.split(";"):
                name, _, n = item.partition(":")
                if name and n.strip().isdigit():
                    info.queues += [MessageQueue(topic, name, i) for i in range(int(n))]
            info.order_topic = True
        else:
            brokers = {b.broker_name: b for b in route.broker_datas}
            for qd in sorted(route.queue_datas, key=lambda q: q.broker_name):
                if not is_writeable(qd.perm):
                    continue
                bd = brokers.get(qd.broker_name)
                if bd is None or MASTER_ID not in bd.broker_addrs:
                    continue  # a broker without a master cannot take writes
                info.queues += [MessageQueue(topic, qd.broker_name, i) for i in range(qd.write_queue_nums)]
        info.table = QueueTable([numbers.number(mq.broker_name) for mq in info.queues])
        info.masters = {b.broker_name: b.broker_addrs[MASTER_ID] for b in route.broker_datas
                        if MASTER_ID in b.broker_addrs}
        return info

    @property
    def ok(self) -> bool:
        return bool(self.queues)

    def master_addr(self, broker_name: str) -> str | None:
        return self.masters.get(broker_name)

    def write_queue_nums(self, broker_name: str) -> int:
        return sum(1 for mq in self.queues if mq.broker_name == broker_name)
