"""The NameServer's Prometheus metrics (``metricsExporterType=PROM`` in namesrv.properties):
brokers, clusters and topics registered, connections, and RPC latency per request code (whose
``_count`` is the requests served). Collected from the route tables at scrape time.

RocketMQ 5's NameServer serves no metrics; the labels follow its broker's (``node_type`` is
``nameserver``) and the names of what only fastmq serves start with ``fastmq_``.
"""
from __future__ import annotations

from ..common.prometheus import Exposition
from ..remoting.rpc_latency import BUCKETS_MS, RpcLatency
from ..remoting.server import RemotingServer
from .route_info import RouteInfoManager

__all__ = ["NamesrvMetrics"]


class NamesrvMetrics:
    """Renders one scrape of a NameServer's routes and server (the parts it reads, not the
    controller that builds it)."""

    def __init__(self, route_info: RouteInfoManager, server: RemotingServer, rpc: RpcLatency) -> None:
        self.route_info = route_info
        self.server = server
        self.rpc = rpc

    def render(self) -> bytes:
        ri = self.route_info
        out = Exposition({"node_type": "nameserver", "node_id": f"{self.server.host}:{self.server.port}"})
        brokers_of: dict[str, int] = {}
        for cluster, names in sorted(ri.cluster_addr_table.items()):
            n = 0
            for name in names:
                bd = ri.broker_addr_table.get(name)
                n += len(bd.broker_addrs) if bd is not None else 0
            brokers_of[cluster] = n
        out.gauge("fastmq_namesrv_brokers", "Brokers (masters and slaves) registered, per cluster",
                  (({"cluster": c}, n) for c, n in brokers_of.items()))
        out.gauge("fastmq_namesrv_live_brokers", "Broker addresses whose registration has not expired",
                  [(None, len(ri.broker_live_table))])
        out.gauge("fastmq_namesrv_broker_names", "Broker names (a master and its slaves) registered",
                  [(None, len(ri.broker_addr_table))])
        out.gauge("fastmq_namesrv_topics", "Topics with a route", [(None, len(ri.topic_queue_table))])
        out.gauge("fastmq_namesrv_connections", "Open remoting connections (brokers and clients)",
                  [(None, len(self.server.connections))])
        out.histogram("rocketmq_rpc_latency", "RPC latency in milliseconds, per request and response code",
                      BUCKETS_MS, self.rpc.rows())
        return out.text()
