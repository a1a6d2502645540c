"""Which queues this member of a group consumes (RocketMQ's RebalanceImpl / RebalancePushImpl).

Every 20 s and at once on NOTIFY_CONSUMER_IDS_CHANGED: the topic's readable queues and the
group's client ids, sorted, through an allocation strategy; queues taken away are dropped with
their offsets persisted first, new ones start where the group left off (CONSUME_FROM_LAST_OFFSET /
FIRST_OFFSET / TIMESTAMP when it never committed). An orderly consumer locks its queues on the
master first.
"""
from __future__ import annotations

import asyncio
import logging
from typing import TYPE_CHECKING, Any, Callable, Coroutine

from ..errors import FastMQError
from ..protocol.heartbeat import SubscriptionData
from ..protocol.message_queue import MessageQueue
from ..protocol.topic import is_readable
from .allocate import AllocateStrategy
from .offset_store import RemoteBrokerOffsetStore
from .process_queue import ProcessQueue

if TYPE_CHECKING:
    from .instance import ClientInstance
    from .offset_store import OffsetStore

__all__ = ["Rebalance", "REBALANCE_INTERVAL_S"]

log = logging.getLogger("fastmq.client")

REBALANCE_INTERVAL_S = 20.0
MISSING_ROUTE_FIRST_RETRY_S = 0.05


class Rebalance:
    """The rebalance of a consumer; a part of the consumer (a mixin), which provides the
    attributes declared here."""

    group: str
    instance: ClientInstance
    subscriptions: dict[str, SubscriptionData]
    process_queues: dict[MessageQueue, ProcessQueue]
    offset_store: OffsetStore
    message_model: str
    consume_from_where: str
    consume_timestamp_ms: int | None
    allocate: AllocateStrategy
    rebalance_interval_s: float
    _rebalance_lock: asyncio.Lock
    _missing_routes: bool
    _missing_wait: float
    _assigned: set[MessageQueue] | None
    _pull_loop: Callable[[ProcessQueue], Coroutine[Any, Any, None]]

    async def _rebalance_loop(self) -> None:
        ev = self.instance._rebalance_event
        while True:
            try:
                # A topic without a route yet (just auto-created by a producer; the broker
                # registers it within moments) is retried soon: after 50 ms, then doubling to 1 s.
                if self._missing_routes:
                    wait = self._missing_wait
                    self._missing_wait = min(1.0, wait * 2)
                else:
                    wait = self.rebalance_interval_s
                    self._missing_wait = MISSING_ROUTE_FIRST_RETRY_S
                if ev is not None:
                    try:
                        async with asyncio.timeout(wait):
                            await ev.wait()
                    except TimeoutError:
                        pass
                    ev.clear()
                else:
                    await asyncio.sleep(wait)
                await self.rebalance()
            except asyncio.CancelledError:
                raise
            except Exception:
                log.exception("rebalance of %s failed", self.group)

    async def _consumer_ids(self, topic: str) -> list[str] | None:
        """The group's client ids as a broker of ``topic`` knows them; None when no broker answered."""
        route = self.instance.routes.get(topic)
        # every address, the master first: with the master gone a slave still knows the group
        addrs = [a for bd in (route.broker_datas if route else []) for _, a in sorted(bd.broker_addrs.items())]
        for addr in addrs:
            try:
                return sorted(await self.instance.api.get_consumer_id_list(addr, self.group))
            except FastMQError as exc:
                log.warning("getConsumerIdListByGroup from %s failed: %s", addr, exc)
        return None

    async def rebalance(self) -> None:
        """Recompute this member's queues and start or stop pulling accordingly."""
        async with self._rebalance_lock:  # one at a time, and never beside an offset reset
            await self._rebalance()

    async def _rebalance(self) -> None:
        self._missing_routes = False
        wanted = await (self._allocated() if self._assigned is None else self._assigned_with_routes())
        for mq in [mq for mq in self.process_queues if mq not in wanted]:
            pq = self.process_queues.pop(mq)
            await self._drop(pq)
            log.info("rebalance: %s no longer consumes %s", self.group, mq)
        new = sorted(wanted - set(self.process_queues))
        if self._orderly and self.message_model == "CLUSTERING":
            new = sorted(await self._lock(new))
        for mq in new:
            try:
                offset = await self._initial_offset(mq)
            except FastMQError as exc:
                log.warning("cannot compute where to pull %s from: %s", mq, exc)
                continue
            pq = ProcessQueue(mq, next_offset=offset, locked=self._orderly)
            self.process_queues[mq] = pq
            pq.task = asyncio.ensure_future(self._pull_loop(pq))
            log.info("rebalance: %s consumes %s from offset %d", self.group, mq, offset)

    async def _allocated(self) -> set[MessageQueue]:
        """This member's share of every subscribed topic's readable queues (all of them when
        broadcasting), by the allocation strategy over the group's sorted client ids."""
        wanted: set[MessageQueue] = set()
        for topic in list(self.subscriptions):
            route = self.instance.routes.get(topic)
            if route is None:
                try:
                    route = await self.instance.update_route(topic)
                except FastMQError:
                    route = None
            if route is None:
                self._missing_routes = True
                continue
            mqs = sorted(MessageQueue(topic, qd.broker_name, i) for qd in route.queue_datas
                         if is_readable(qd.perm) for i in range(qd.read_queue_nums))
            if not mqs:
                continue
            if self.message_model == "BROADCASTING":
                wanted.update(mqs)
                continue
            cids = await self._consumer_ids(topic)
            if cids is None:
                # As RebalanceImpl: without the group's member list (every broker of the topic
                # unreachable just now) the topic's queues stay as they are, rather than all
                # being dropped and their offsets read back from a broker later.
                log.warning("doRebalance, %s %s, get consumer id list failed", self.group, topic)
                wanted.update(mq for mq in self.process_queues if mq.topic == topic)
                continue
            if self.instance.client_id not in cids:
                continue
            wanted.update(self.allocate.allocate(self.group, self.instance.client_id, mqs, cids))
        return wanted

    async def _assigned_with_routes(self) -> set[MessageQueue]:
        """The queues given to assign(), their topics' routes fetched (the pulls need brokers)."""
        assigned = set(self._assigned or ())
        for topic in {mq.topic for mq in assigned} - set(self.instance.routes):
            try:
                route = await self.instance.update_route(topic)
            except FastMQError as exc:
                log.warning("route of %s not available yet: %s", topic, exc)
                route = None
            if route is None:
                self._missing_routes = True  # the rebalance loop asks again soon
        return assigned

    _orderly = False

    async def _lock(self, mqs: list[MessageQueue], unlock: bool = False) -> set[MessageQueue]:
        """LOCK_BATCH_MQ (or UNLOCK_BATCH_MQ) per broker; returns the queues we now hold."""
        held: set[MessageQueue] = set()
        by_broker: dict[str, list[MessageQueue]] = {}
        for mq in mqs:
            by_broker.setdefault(mq.broker_name, []).append(mq)
        for broker, group_mqs in by_broker.items():
            addr = self.instance.master_addr(broker)
            if addr is None:
                continue
            api = self.instance.api
            try:
                if unlock:
                    await api.unlock_batch_mq(addr, self.group, self.instance.client_id, group_mqs)
                else:
                    held.update(await api.lock_batch_mq(addr, self.group, self.instance.client_id, group_mqs))
            except FastMQError as exc:
                log.warning("%s of %d queues on %s failed: %s", "unlock" if unlock else "lock", len(group_mqs),
                            broker, exc)
        return held

    async def _drop(self, pq: ProcessQueue) -> None:
        pq.dropped = True
        self.instance.consumer_stats.fold(self.group, pq.mq.topic, pq.counters)
        if pq.task is not None:
            pq.task.cancel()
            await asyncio.gather(pq.task, return_exceptions=True)
        if pq.consuming is not None:
            # an orderly hand-off runs to the end of its batch in flight and commits what succeeded
            await asyncio.gather(pq.consuming, return_exceptions=True)
        # persisted before the unlock, as RebalancePushImpl.removeUnnecessaryMessageQueue: the
        # next owner can lock the queue at once and must find the offset we reached
        if isinstance(self.offset_store, RemoteBrokerOffsetStore):
            try:
                await self.offset_store.persist(pq.mq)
            except FastMQError as exc:
                log.warning("persist offset of %s failed: %s", pq.mq, exc)
        self.offset_store.remove(pq.mq)
        if pq.locked and self.message_model == "CLUSTERING":
            await self._lock([pq.mq], unlock=True)

    def _offset_addr(self, mq: MessageQueue) -> str:
        addr = self.instance.any_broker_addr(mq.broker_name)
        if addr is None:
            raise FastMQError(f"The broker[{mq.broker_name}] not exist")
        return addr

    async def _initial_offset(self, mq: MessageQueue) -> int:
        """computePullFromWhere: the committed offset, else as consume_from_where says."""
        last = await self.offset_store.read(mq, from_store=True)
        if last >= 0:
            return last
        if mq.topic.startswith("%RETRY%") or self.consume_from_where == "CONSUME_FROM_FIRST_OFFSET":
            return 0
        if self.consume_from_where == "CONSUME_FROM_TIMESTAMP" and self.consume_timestamp_ms is not None:
            return await self.instance.api.search_offset(self._offset_addr(mq), mq, self.consume_timestamp_ms)
        return await self.instance.api.get_max_offset(self._offset_addr(mq), mq)
