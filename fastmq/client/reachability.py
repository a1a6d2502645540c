"""Which brokers a producer can reach, and how one comes back (RocketMQ 5's reachable flag and
fault detector, on top of 4.9's latency fault tolerance).

A try that fails on the connection itself (refused, reset, lost, connect timeout) marks its broker
unreachable in the producer's FaultTable. Unreachable is not slow: a refused connection is fast,
so ranked by latency a dead broker would beat a slow live one, and a retry would go straight back
to it. The selector twins pass over an unreachable broker while any reachable one has a queue for
the topic, whatever ``send_latency_fault_enable`` says (with it off a dead broker would otherwise
take every other first try until the NameServer forgets it).

Only an answer clears the mark: a probe (one HEART_BEAT, which also registers the producer group
with a broker that restarted) to each unreachable broker's master, at most once a second and one
broker at a time, each bounded by :data:`PROBE_TIMEOUT_S`, or a send that gets through. The
probe runs only while some broker is marked. A broker the producer's routes no longer list has
nothing to probe and is unmarked (it cannot be chosen anyway).

The same failure asks the NameServer for the topic's route again, at most once per
``instance.ROUTE_REFRESH_MIN_INTERVAL_S`` per topic, rather than at the next 30 s poll: a NameServer
drops a broker as soon as its connection closes, so a dead broker leaves the producer's tables
within a round trip. The first refresh may beat the NameServer to it (and no further send fails
on a broker that is passed over), so each probe round also refreshes, rate-limited the same way,
the routes that still list an unreachable broker.
"""
from __future__ import annotations

import asyncio
import logging
from typing import TYPE_CHECKING, Mapping, Protocol

from ..errors import BrokerError, FastMQError, NoRouteError, RemotingConnectError, RemotingSendRequestError

if TYPE_CHECKING:
    from .._ext.fault import FaultTable
    from .instance import ClientInstance
    from .publish_info import BrokerNumbers, TopicPublishInfo

__all__ = ["Reachability", "is_connection_failure", "PROBE_INTERVAL_S", "PROBE_TIMEOUT_S"]

log = logging.getLogger("fastmq.client")

#: Seconds between two probe rounds of the unreachable brokers.
PROBE_INTERVAL_S = 1.0
#: How long one probe may take (connect and answer).
PROBE_TIMEOUT_S = 1.0
_MAX_REFRESH_PER_ROUND = 64  # a producer of thousands of topics refreshes a bounded number a round


def is_connection_failure(exc: BaseException | None) -> bool:
    """True when ``exc`` says the broker could not be reached (not that it was slow or refused the message)."""
    return isinstance(exc, (RemotingConnectError, RemotingSendRequestError))


class SendPathFlags(Protocol):
    """What this reads and sets on the producer's send fast path (``_ext.produce.SendFastPath``)."""

    loop: asyncio.AbstractEventLoop | None
    #: tells the queue selection to pass over brokers the fault table marks unreachable
    avoid_unreachable: bool


class Reachability:
    """The producer's unreachable brokers: marking, probing, and the route refresh a failure asks for.

    It is handed the producer's parts it works on rather than the producer (which builds it), so
    neither module needs the other. Used on the producer's event loop only.
    """

    def __init__(self, instance: "ClientInstance", numbers: "BrokerNumbers", faults: "FaultTable",
                 publish: Mapping[str, "TopicPublishInfo"], fast: SendPathFlags) -> None:
        self._instance = instance
        self._numbers = numbers
        self._faults = faults
        self._publish = publish  # the producer's live table, topic -> publish info
        self._fast = fast
        #: broker number -> loop time at which it was marked unreachable
        self._since: dict[int, float] = {}
        self._probe_task: asyncio.Task[None] | None = None
        self._closed = False
        #: tries started on a broker already marked unreachable (only when no reachable one had a queue)
        self.tries_on_unreachable = 0

    @property
    def marked(self) -> bool:
        return bool(self._since)

    def unreachable_names(self) -> list[str]:
        names = self._numbers.names
        return sorted(names[b] for b in self._since)

    def try_failed(self, broker_name: str, topic: str, began: float, exc: BaseException | None) -> None:
        """A try to ``broker_name`` that started at loop time ``began`` failed with ``exc``."""
        if isinstance(exc, NoRouteError):  # the route names no master for it: ask again
            self.refresh_soon(topic)
            return
        if not is_connection_failure(exc):
            return  # slow or refusing: the latency buckets deal with it, it is not dead
        loop = self._fast.loop
        if loop is None:
            return
        b = self._numbers.number(broker_name)
        since = self._since.get(b)
        if since is not None:
            if began >= since:
                self.tries_on_unreachable += 1
                log.warning("a send tried broker %s although it is marked unreachable (no reachable broker "
                            "had a queue for %s)", broker_name, topic)
        else:
            self._since[b] = loop.time()
            self._faults.mark_unreachable(b)
            self._fast.avoid_unreachable = True
            log.warning("broker %s is unreachable (%s): passed over until a probe reaches it", broker_name, exc)
            if self._probe_task is None and not self._closed:  # (a send failing at shutdown starts none)
                self._probe_task = loop.create_task(self._probe())
        self.refresh_soon(topic)

    def reached(self, broker_name: str) -> None:
        """A send to ``broker_name`` got an answer: it is reachable."""
        b = self._numbers.number(broker_name)
        if b in self._since:
            self._clear(b, "answered a send")

    def _clear(self, b: int, why: str) -> None:
        del self._since[b]
        self._faults.mark_reachable(b)
        self._fast.avoid_unreachable = bool(self._since)
        log.warning("broker %s is reachable again (%s)", self._numbers.names[b], why)

    def refresh_soon(self, topic: str) -> None:
        """Fetch ``topic``'s route now (the instance rate-limits it per topic)."""
        self._instance.refresh_route_soon(topic)

    def _master_of(self, broker_name: str) -> str | None:
        for info in list(self._publish.values()):
            addr = info.masters.get(broker_name)
            if addr is not None:
                return addr
        return None

    async def _probe(self) -> None:
        try:
            while self._since and not self._closed:
                await asyncio.sleep(PROBE_INTERVAL_S)
                self._refresh_routes_listing(self._since)
                for b in list(self._since):
                    if b not in self._since:
                        continue  # a send's answer cleared it meanwhile
                    name = self._numbers.names[b]
                    addr = self._master_of(name)
                    if addr is None:
                        self._clear(b, "no route lists its master any more")
                    elif await self._answers(addr) and b in self._since:
                        self._clear(b, f"probe of {addr} answered")
        finally:
            self._probe_task = None

    def _refresh_routes_listing(self, brokers: dict[int, float]) -> None:
        names = {self._numbers.names[b] for b in brokers}
        stale = [topic for topic, info in list(self._publish.items())
                 if not names.isdisjoint(info.masters)]
        for topic in stale[:_MAX_REFRESH_PER_ROUND]:
            self.refresh_soon(topic)

    async def _answers(self, addr: str) -> bool:
        instance = self._instance
        try:
            await instance.api.send_heartbeat(addr, instance.heartbeat_data().to_json(), PROBE_TIMEOUT_S)
        except BrokerError:
            return True  # a refusal is an answer: the broker is there
        except FastMQError:
            return False
        return True

    async def close(self) -> None:
        """Stop the probe (for good: the producer is shutting down)."""
        self._closed = True
        task, self._probe_task = self._probe_task, None
        if task is not None:
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)
