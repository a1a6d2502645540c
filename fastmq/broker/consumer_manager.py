"""ConsumerManager and ProducerManager: who is connected, for which group, subscribed to what.

Fed by HEART_BEAT (every 30 s from every client) and UNREGISTER_CLIENT, and by connection close.
When a group's membership or topic set changes, its members are told with a oneway
NOTIFY_CONSUMER_IDS_CHANGED so they rebalance at once instead of at their next 20 s tick. A member
silent for 120 s is dropped (RocketMQ's channel expiry), as is every member whose connection closes.
"""
from __future__ import annotations

import logging
import time
from dataclasses import dataclass, field
from typing import Any, Callable, Iterable

from ..common.server_log import RepeatedLog
from ..protocol.heartbeat import ConsumerData, SubscriptionData

__all__ = ["ClientChannelInfo", "ConsumerGroupInfo", "ConsumerManager", "ProducerManager", "CHANNEL_EXPIRED_MS"]

log = logging.getLogger("fastmq.broker")
_client_id_changes = RepeatedLog(log)

#: A client that has not sent a heartbeat for this long is considered gone (ConsumerManager).
CHANNEL_EXPIRED_MS = 120_000


def _now_ms() -> int:
    return int(time.time() * 1000)


@dataclass
class ClientChannelInfo:
    conn: Any  # fastmq.remoting.Connection; typed loosely to keep this module free of the transport
    client_id: str
    language: int = 0
    version: int = 0
    last_update_ms: int = field(default_factory=_now_ms)


@dataclass
class ConsumerGroupInfo:
    group: str
    consume_type: str = "CONSUME_PASSIVELY"
    message_model: str = "CLUSTERING"
    consume_from_where: str = "CONSUME_FROM_LAST_OFFSET"
    channels: dict[Any, ClientChannelInfo] = field(default_factory=dict)
    subscriptions: dict[str, SubscriptionData] = field(default_factory=dict)
    last_update_ms: int = field(default_factory=_now_ms)

    def client_ids(self) -> list[str]:
        return [c.client_id for c in self.channels.values()]

    def update_channel(self, info: ClientChannelInfo, data: ConsumerData) -> bool:
        """Record a heartbeat; True when this is a member we did not know."""
        self.consume_type = data.consume_type
        self.message_model = data.message_model
        self.consume_from_where = data.consume_from_where
        old = self.channels.get(info.conn)
        self.last_update_ms = info.last_update_ms
        if old is None:
            self.channels[info.conn] = info
            log.info("new consumer connected, group: %s %s %s channel: %s", self.group, data.consume_type,
                     data.message_model, info.client_id)
            return True
        if old.client_id != info.client_id:
            # 4.9.8's line, once a minute per group: a client that changes its id at every
            # heartbeat would otherwise write one ERROR line per heartbeat.
            _client_id_changes.error(self.group, "[BUG] consumer channel exist in broker, but clientId not equal. "
                                     "GROUP: %s OLD: %s NEW: %s", self.group, old.client_id, info.client_id)
            self.channels[info.conn] = info
        old.last_update_ms = info.last_update_ms
        return False

    def update_subscriptions(self, subs: Iterable[SubscriptionData]) -> bool:
        """Take the subscriptions of a heartbeat; True when the set of topics changed."""
        changed = False
        new = {s.topic: s for s in subs}
        for topic, sub in new.items():
            old = self.subscriptions.get(topic)
            if old is None:
                self.subscriptions[topic] = sub
                changed = True
                log.info("subscription changed, add new topic, group: %s %s", self.group, topic)
            elif sub.sub_version > old.sub_version:
                self.subscriptions[topic] = sub
        for topic in [t for t in self.subscriptions if t not in new]:
            log.warning("subscription changed, group: %s remove topic %s", self.group, topic)
            del self.subscriptions[topic]
            changed = True
        self.last_update_ms = _now_ms()
        return changed

    def remove_channel(self, conn: Any) -> ClientChannelInfo | None:
        return self.channels.pop(conn, None)


class ConsumerManager:
    """Consumer groups by name. ``notify(group, conns)`` is called when a group must rebalance."""

    def __init__(self, notify: Callable[[str, list[Any]], None] | None = None,
                 expire_ms: int = CHANNEL_EXPIRED_MS) -> None:
        self.groups: dict[str, ConsumerGroupInfo] = {}
        self.notify = notify
        self.expire_ms = expire_ms

    def find(self, group: str) -> ConsumerGroupInfo | None:
        return self.groups.get(group)

    def find_subscription(self, group: str, topic: str) -> SubscriptionData | None:
        g = self.groups.get(group)
        return g.subscriptions.get(topic) if g else None

    def _notify(self, g: ConsumerGroupInfo) -> None:
        if self.notify is not None and g.channels:
            self.notify(g.group, list(g.channels))

    def register(self, info: ClientChannelInfo, data: ConsumerData, notify_enabled: bool = True) -> bool:
        """Apply one group's part of a heartbeat; True when membership or topics changed."""
        g = self.groups.get(data.group_name)
        if g is None:
            g = self.groups[data.group_name] = ConsumerGroupInfo(data.group_name)
        r1 = g.update_channel(info, data)
        r2 = g.update_subscriptions(data.subscriptions)
        if (r1 or r2) and notify_enabled:
            self._notify(g)
        return r1 or r2

    def unregister(self, group: str, conn: Any, notify_enabled: bool = True) -> None:
        g = self.groups.get(group)
        if g is None:
            return
        if g.remove_channel(conn) is None:
            return
        if not g.channels:
            log.info("unregister consumer ok, no any connection, and remove consumer group, %s", group)
            del self.groups[group]
        elif notify_enabled:
            self._notify(g)

    def on_connection_closed(self, conn: Any) -> None:
        """A closed connection leaves every group it was in; the rest of each group rebalances."""
        for name in list(self.groups):
            g = self.groups[name]
            if g.remove_channel(conn) is None:
                continue
            if not g.channels:
                log.info("unregister consumer ok, no any connection, and remove consumer group, %s", name)
                del self.groups[name]
            else:
                self._notify(g)

    def scan_not_active(self, now_ms: int | None = None) -> list[Any]:
        """Drop members silent past the expiry; returns their connections (the caller closes them)."""
        now = _now_ms() if now_ms is None else now_ms
        dropped = []
        for name in list(self.groups):
            g = self.groups[name]
            for conn, info in list(g.channels.items()):
                if now - info.last_update_ms > self.expire_ms:
                    log.warning("SCAN: remove expired channel from ConsumerManager consumerTable. channel=%s, "
                                "consumerGroup=%s", info.client_id, name)
                    del g.channels[conn]
                    dropped.append(conn)
            if not g.channels:
                del self.groups[name]
        return dropped


class ProducerManager:
    """Producer groups by name (for connection listings and channel expiry), and the connection
    of each producer's client id (where a reply to its requests is pushed, ``find_channel``)."""

    def __init__(self, expire_ms: int = CHANNEL_EXPIRED_MS) -> None:
        self.groups: dict[str, dict[Any, ClientChannelInfo]] = {}
        self.expire_ms = expire_ms
        self.clients: dict[str, Any] = {}  # client id -> connection (4.9.8's clientChannelTable)

    def register(self, group: str, info: ClientChannelInfo) -> None:
        chans = self.groups.setdefault(group, {})
        old = chans.get(info.conn)
        if old is None:
            chans[info.conn] = info
            self.clients[info.client_id] = info.conn
        else:
            old.last_update_ms = info.last_update_ms

    def find_channel(self, client_id: str) -> Any:
        """The connection of the producer client ``client_id`` (its heartbeat's), or None."""
        return self.clients.get(client_id)

    def unregister(self, group: str, conn: Any) -> None:
        chans = self.groups.get(group)
        if chans is not None:
            info = chans.pop(conn, None)
            if not chans:
                del self.groups[group]
            # (kept while another group of the client still has the connection: 4.9.8 drops it
            # with any one group, and the client's other producers would lose their replies)
            if (info is not None and self.clients.get(info.client_id) is conn
                    and not any(conn in other for other in self.groups.values())):
                del self.clients[info.client_id]

    def on_connection_closed(self, conn: Any) -> None:
        for group in list(self.groups):
            self.unregister(group, conn)

    def scan_not_active(self, now_ms: int | None = None) -> list[Any]:
        now = _now_ms() if now_ms is None else now_ms
        dropped = []
        for group in list(self.groups):
            for conn, info in list(self.groups[group].items()):
                if now - info.last_update_ms > self.expire_ms:
                    dropped.append(conn)
                    self.unregister(group, conn)
        return dropped
