"""The broker's Prometheus metrics (``metricsExporterType=PROM``): RocketMQ 5's names and labels
for what fastmq keeps, collected when a scrape arrives.

Nothing here runs per message. Each figure is read at scrape time from what the broker keeps
anyway: the stats items of VIEW_BROKER_STATS_DATA (messages in per topic, out per topic and
group), the consumer offsets and consume queues (lag), the store's counters and files (sizes,
flush behind), the client tables (connections), the DLQ and transaction tallies, and the RPC
latency histograms (kept only while metrics are on, see :mod:`fastmq.remoting.rpc_latency`).
Bytes in per topic are summed from the consume queues' entry sizes: each scrape (and each stats
snapshot) reads only the entries written since the one before, so the send path pays nothing.

Names RocketMQ 5 does not have start with ``fastmq_``.
"""
from __future__ import annotations

import os
import time
from typing import TYPE_CHECKING, Iterator

from ..common.prometheus import Exposition, pairs
from ..protocol import topic as tv
from ..protocol.codes import LANGUAGE_NAMES
from ..remoting.rpc_latency import BUCKETS_MS, RpcLatency
from .stats import BROKER_GET_NUMS, BROKER_PUT_NUMS, GROUP_GET_NUMS, TOPIC_PUT_NUMS, TOPIC_PUT_SIZE
from .timer import SNAPSHOT_BOUNDS_S

if TYPE_CHECKING:
    from ..store.consume_queue import ConsumeQueueTable
    from .processors.base import BrokerContext

__all__ = ["BrokerMetrics", "InBytes", "LAG_READ_BUDGET_S"]

#: seconds of one scrape's reads of lag timestamps (see BrokerMetrics._lag_rows)
LAG_READ_BUDGET_S = 0.01


class InBytes:
    """Bytes put into each topic since the broker started, summed from its consume queues'
    entry sizes; each call reads only the entries written since the last call."""

    def __init__(self, queues: "ConsumeQueueTable") -> None:
        self.queues = queues
        #: (topic, queue id) -> [queue offset read up to, bytes]
        self.seen: dict[tuple[str, int], list[int]] = {}
        #: what the last :meth:`per_topic` saw of every queue, (first offset, next offset), and
        #: the entries they hold: the scrape's other readers take them instead of a pass of their own
        self.bounds: dict[tuple[str, int], tuple[int, int]] = {}
        self.entries = 0

    def start(self) -> None:
        """Count from here on (called once the store has loaded its queues)."""
        for key, cq in list(self.queues.queues.items()):
            self.seen[key] = [cq.max_offset, 0]

    def per_topic(self) -> dict[str, int]:
        totals: dict[str, int] = {}
        seen = self.seen
        self.bounds = bounds = {}
        entries = 0
        for key, cq in list(self.queues.queues.items()):
            s = seen.get(key)
            bounds[key] = lo, hi = cq.bounds()
            entries += hi - lo
            if s is None or hi < s[0]:  # a queue made since the start (or deleted and made again)
                s = seen[key] = [lo, 0]
            if hi > s[0]:
                for arr in cq.iter_entries(max(s[0], lo), hi):
                    s[1] += int(arr["size"].sum(dtype="int64"))
                s[0] = hi
            topic = key[0]
            totals[topic] = totals.get(topic, 0) + s[1]
        self.entries = entries
        return totals


def _language(code: int) -> str:
    return (LANGUAGE_NAMES[code] if 0 <= code < len(LANGUAGE_NAMES) else "OTHER").lower()


def _group_topic(key: str) -> tuple[str, str]:
    topic, _, group = key.rpartition("@")
    return topic, group


def _group_labels(key: str) -> str:
    """The rendered labels of a ``topic@group`` key."""
    topic, group = _group_topic(key)
    return pairs({"topic": topic, "consumer_group": group, "is_retry": tv.is_retry_topic(topic),
                  "is_system": tv.is_system_topic(topic)})


def _message_type(topic: str) -> str:
    if topic == tv.TRANS_HALF_TOPIC:
        return "transaction"
    if topic == tv.SCHEDULE_TOPIC:
        return "delay"
    return "normal"


class BrokerMetrics:
    """Renders one scrape of ``broker`` (its controller, seen through :class:`BrokerContext`)."""

    def __init__(self, broker: "BrokerContext", in_bytes: InBytes, rpc: RpcLatency) -> None:
        self.broker = broker
        self.in_bytes = in_bytes
        self.rpc = rpc
        #: (topic, queue id, queue offset) -> store time of the message there (see _lag_rows)
        self._lag_ts: dict[tuple[str, int, int], int] = {}
        #: the same for the first unpulled message of each queue (see _flight_rows)
        self._flight_ts: dict[tuple[str, int, int], int] = {}

    def store_totals(self) -> dict[str, dict[str, int]]:
        """The stats items read from the store (:meth:`BrokerStatsManager.feed`)."""
        b = self.broker
        st = b.store.stats
        cluster = b.config.brokerClusterName
        return {TOPIC_PUT_SIZE: self.in_bytes.per_topic(),
                BROKER_PUT_NUMS: {cluster: st["putMessageTimesTotal"]},
                BROKER_GET_NUMS: {cluster: st["getMessageTransferedMsgCount"]}}

    def render(self) -> bytes:
        b = self.broker
        cfg = b.config
        out = Exposition({"cluster": cfg.brokerClusterName, "node_type": "broker", "node_id": cfg.brokerName})
        self._traffic(out)
        self._lag(out)
        self._clients(out)
        self._store(out)
        self._timer(out)
        out.histogram("rocketmq_rpc_latency", "RPC latency in milliseconds, per request and response code",
                      BUCKETS_MS, self.rpc.rows())
        return out.text()

    # ------------------------------------------------------------------ families
    def _traffic(self, out: Exposition) -> None:
        stats = self.broker.stats.items
        puts = stats[TOPIC_PUT_NUMS]
        sizes = self.in_bytes.per_topic()

        rendered: dict[str, str] = {}

        def topic_labels(topic: str) -> str:  # (each topic's labels rendered once a scrape)
            text = rendered.get(topic)
            if text is None:
                text = rendered[topic] = pairs({"topic": topic, "message_type": _message_type(topic),
                                                "is_system": tv.is_system_topic(topic)})
            return text

        out.gauge("rocketmq_messages_in_total", "Messages put, per topic, since the broker started",
                  ((topic_labels(t), item.value) for t, item in sorted(puts.items())), "counter")
        out.gauge("rocketmq_throughput_in_total", "Bytes put, per topic, since the broker started",
                  ((topic_labels(t), n) for t, n in sorted(sizes.items()) if n or t in puts), "counter")
        gets = stats[GROUP_GET_NUMS]

        def group_labels(key: str) -> str:
            text = rendered.get(key)
            if text is None:
                text = rendered[key] = _group_labels(key)
            return text

        out.gauge("rocketmq_messages_out_total", "Messages pulled, per topic and consumer group",
                  ((group_labels(k), item.value) for k, item in sorted(gets.items())), "counter")
        out.gauge("rocketmq_throughput_out_total", "Bytes pulled, per topic and consumer group",
                  ((group_labels(k), item.extra) for k, item in sorted(gets.items())), "counter")
        out.gauge("rocketmq_send_to_dlq_messages_total", "Messages moved to a consumer group's DLQ, per group and "
                  "original topic", (({"consumer_group": g, "topic": t, "is_system": tv.is_system_topic(t)}, n)
                                     for (g, t), n in sorted(self.broker.dlq_sends.counts.items())), "counter")
        ends = sorted(self.broker.tx_ends.counts.items())
        out.gauge("rocketmq_commit_messages_total", "Transactional messages committed, per topic",
                  (({"topic": t}, n) for (kind, t), n in ends if kind == "commit"), "counter")
        out.gauge("rocketmq_rollback_messages_total", "Transactional messages rolled back, per topic",
                  (({"topic": t}, n) for (kind, t), n in ends if kind == "rollback"), "counter")
        # halves stored less those ended or given up (RocketMQ 5's count, kept since the start)
        ended: dict[str, int] = dict(self.broker.transactions.check_service.stats.discarded_topics)
        for (_, t), n in ends:
            ended[t] = ended.get(t, 0) + n
        out.gauge("rocketmq_half_messages", "Half messages not yet committed, rolled back or given up, per topic",
                  (({"topic": t}, max(0, n - ended.get(t, 0)))
                   for (t,), n in sorted(self.broker.half_puts.counts.items())))

    def _lag_rows(self) -> Iterator[tuple[str, int, int]]:
        """(labels, messages behind, ms since the oldest unconsumed message was stored) per
        group and topic with committed offsets.

        The store time of a queue's first unconsumed message is read from the consume queue and
        the commit log, pages an idle queue may have left on disk (milliseconds each on a cold
        cache), so it is kept per queue and offset and read again only when the offset moved,
        and the reads of one scrape stop after LAG_READ_BUDGET_S: a broker with 10^4 lagging
        queues fills its latencies in over a few scrapes, its loop never stalled by one. A queue
        not yet read counts in the lag in messages only."""
        b = self.broker
        bounds = self.in_bytes.bounds  # (read by _traffic, earlier in this scrape)
        now = int(time.time() * 1000)
        known = self._lag_ts
        kept: dict[tuple[str, int, int], int] = {}
        stop = time.perf_counter() + LAG_READ_BUDGET_S
        for key, offsets in sorted(b.offsets.table.items()):
            topic, group = _group_topic(key)
            lag = 0
            oldest = 0
            for qid, offset in list(offsets.items()):
                lo_hi = bounds.get((topic, qid))
                if lo_hi is None:
                    continue
                lo, hi = lo_hi
                first = max(offset, lo)
                behind = hi - first
                if behind <= 0:
                    continue
                lag += behind
                ts = self._store_ts(topic, qid, first, known, kept, stop)
                if ts > 0 and (oldest == 0 or ts < oldest):
                    oldest = ts
            yield _group_labels(key), lag, now - oldest if oldest else 0
        self._lag_ts = kept  # (the queues of this scrape only: deleted ones drop out)

    def _store_ts(self, topic: str, qid: int, offset: int, known: dict[tuple[str, int, int], int],
                  kept: dict[tuple[str, int, int], int], stop: float) -> int:
        """The store time of the message at ``offset`` (0: not read, see :meth:`_lag_rows`):
        taken from ``known``, else read while the scrape's budget lasts; kept in ``kept``."""
        qkey = (topic, qid, offset)
        ts = known.get(qkey, 0)
        if not ts and time.perf_counter() < stop:
            try:
                cq = self.broker.store.queues.get(topic, qid)
                assert cq is not None  # (seen by per_topic in this scrape)
                phys, size, _ = cq.get_entry(offset)
                ts = self.broker.store.commit_log.store_timestamp_at(phys, size)
            except Exception:  # removed by retention meanwhile, or unreadable
                ts = 0
        if ts > 0:
            kept[qkey] = ts
        return ts

    def _subscribed(self) -> Iterator[tuple[str, str, int]]:
        """(group, topic, write queues) per subscription group with consumers online and each
        topic they subscribe to, as 5.x's lag calculator walks them: retry topics left out, and
        topics neither readable nor writable (with the broker's permission)."""
        b = self.broker
        perm = b.config.brokerPermission
        topics = b.topic_config.table
        online = b.consumer_manager.groups
        for group in sorted(b.subscription_groups.table):
            g = online.get(group)
            if g is None:
                continue
            for topic in sorted(g.subscriptions):
                if tv.is_retry_topic(topic):
                    continue
                tc = topics.get(topic)
                if tc is None or not tc.perm & perm & (tv.PERM_READ | tv.PERM_WRITE):
                    continue
                yield group, topic, tc.write_queue_nums

    def _flight_rows(self) -> Iterator[tuple[str, int, int, int]]:
        """(labels, in flight, ready, ms since the first unpulled message was stored) per group
        and subscribed topic: in flight is pulled but not committed (pull offset - committed
        offset), ready is stored but not pulled (max offset - pull offset), as 5.x counts them."""
        bounds = self.in_bytes.bounds  # (read by _traffic, earlier in this scrape)
        offsets = self.broker.offsets
        now = int(time.time() * 1000)
        known = self._flight_ts
        kept: dict[tuple[str, int, int], int] = {}
        stop = time.perf_counter() + LAG_READ_BUDGET_S
        for group, topic, nqueues in self._subscribed():
            flight = ready = 0
            oldest = 0
            for qid in range(nqueues):
                hi = bounds.get((topic, qid), (0, 0))[1]
                commit = offsets.query(group, topic, qid)
                pulled = offsets.pulled.get((group, topic, qid), commit)
                if pulled >= 0:
                    flight += max(0, pulled - (commit if commit >= 0 else pulled))
                    ready += max(0, hi - pulled)
                first = max(pulled, 0)  # (a group that never pulled waits from offset 0, as in 5.x)
                if first < hi:
                    ts = self._store_ts(topic, qid, first, known, kept, stop)
                    if ts > 0 and (oldest == 0 or ts < oldest):
                        oldest = ts
            yield _group_labels(f"{topic}@{group}"), flight, ready, now - oldest if oldest else 0
        self._flight_ts = kept

    def _lag(self, out: Exposition) -> None:
        rows = list(self._lag_rows())
        out.gauge("rocketmq_consumer_lag_messages", "Messages stored past the group's committed offset",
                  ((labels, lag) for labels, lag, _ in rows))
        out.gauge("rocketmq_consumer_lag_latency", "Milliseconds since the oldest unconsumed message was stored",
                  ((labels, ms) for labels, _, ms in rows))
        flights = list(self._flight_rows())
        out.gauge("rocketmq_consumer_inflight_messages", "Messages pulled but not yet committed, per group and "
                  "subscribed topic", ((labels, n) for labels, n, _, _ in flights))
        out.gauge("rocketmq_consumer_ready_messages", "Messages stored but not yet pulled, per group and "
                  "subscribed topic", ((labels, n) for labels, _, n, _ in flights))
        out.gauge("rocketmq_consumer_queueing_latency", "Milliseconds since the first message not yet pulled "
                  "was stored", ((labels, ms) for labels, _, _, ms in flights))

    def _clients(self, out: Exposition) -> None:
        b = self.broker
        producers: dict[tuple[str, str], int] = {}
        for chans in b.producer_manager.groups.values():
            for info in chans.values():
                pk = (_language(info.language), str(info.version))
                producers[pk] = producers.get(pk, 0) + 1
        out.gauge("rocketmq_producer_connections", "Producer connections, per language and version",
                  (({"language": lang, "version": ver, "protocol_type": "remoting"}, n)
                   for (lang, ver), n in sorted(producers.items())))
        consumers: dict[tuple[str, str, str, str], int] = {}
        for group, g in b.consumer_manager.groups.items():
            mode = "push" if g.consume_type == "CONSUME_PASSIVELY" else "pull"
            for info in g.channels.values():
                k = (group, _language(info.language), str(info.version), mode)
                consumers[k] = consumers.get(k, 0) + 1
        out.gauge("rocketmq_consumer_connections", "Consumer connections, per group, language and version",
                  (({"consumer_group": grp, "language": lang, "version": ver, "consume_mode": mode,
                     "protocol_type": "remoting", "is_system": tv.is_system_topic(grp)}, n)
                   for (grp, lang, ver, mode), n in sorted(consumers.items())))
        out.gauge("rocketmq_topic_number", "Topics on this broker", [(None, len(b.topic_config.table))])
        out.gauge("rocketmq_consumer_group_number", "Subscription groups on this broker",
                  [(None, len(b.subscription_groups.table))])
        out.gauge("rocketmq_broker_permission", "The broker's permission (READ 4 | WRITE 2)",
                  [(None, b.config.brokerPermission)])

    def _store(self, out: Exposition) -> None:
        store = self.broker.store
        cl = store.commit_log
        local = {"storage_type": "local", "storage_medium": "disk"}
        try:
            sv = os.statvfs(store.config.storePathRootDir)
            used = (sv.f_blocks - sv.f_bfree) * sv.f_frsize
        except OSError:
            used = 0
        out.gauge("rocketmq_storage_size", "Bytes used on the store's file system", [(local, used)])
        out.gauge("rocketmq_storage_flush_behind_bytes", "Commit-log bytes written but not yet flushed",
                  [(local, max(0, cl.max_offset - cl.flushed_offset))])
        # the consume queues are written in the same call as the commit log: nothing waits for dispatch
        out.gauge("rocketmq_storage_dispatch_behind_bytes", "Commit-log bytes not yet dispatched to the consume "
                  "queues", [(local, 0)])
        earliest = store.earliest_message_time_in_log()
        out.gauge("rocketmq_storage_message_reserve_time", "Milliseconds since the oldest stored message was stored",
                  [(local, int(time.time() * 1000) - earliest if earliest > 0 else 0)])
        out.gauge("fastmq_commitlog_size_bytes", "Bytes the commit log holds (max offset - min offset)",
                  [(None, max(0, cl.max_offset - cl.min_offset))])
        out.gauge("fastmq_consumequeue_size_bytes", "Bytes of consume-queue entries held (20 per message)",
                  [(None, self.in_bytes.entries * 20)])  # (counted by _traffic's pass over the queues)
        out.gauge("fastmq_disk_ratio", "Used fraction of the disk holding the commit log / the consume queues",
                  [({"storage": "commitlog"}, store.disk_ratio_fn(store.config.commit_log_dir)),
                   ({"storage": "consumequeue"}, store.disk_ratio_fn(store.config.consume_queue_dir))])
        rt = store.stats
        out.gauge("fastmq_put_messages_total", "Messages the store appended since the broker started",
                  [(None, rt["putMessageTimesTotal"])], "counter")
        out.gauge("fastmq_put_bytes_total", "Bytes the store appended since the broker started",
                  [(None, rt["putMessageSizeTotal"])], "counter")
        out.gauge("fastmq_get_messages_total", "Messages pulls took from the store since the broker started",
                  [(None, rt["getMessageTransferedMsgCount"])], "counter")

    def _timer(self, out: Exposition) -> None:
        """RocketMQ 5's timer figures (with timerWheelEnable, on a master: the service that holds
        timer messages runs there only), read from the held set the timer service keeps."""
        b = self.broker
        timer = b.timer
        if not b.store.config.timerWheelEnable or not timer.running:
            return
        local = {"storage_type": "local", "storage_medium": "disk"}
        now = int(time.time() * 1000)
        behind, behind_ms = timer.enqueue_behind()
        out.gauge("rocketmq_timer_enqueue_lag", "Timer messages stored but not yet read into the held set",
                  [(local, behind)])
        out.gauge("rocketmq_timer_enqueue_latency", "Milliseconds since the first timer message not yet read "
                  "into the held set was stored", [(local, behind_ms)])
        out.gauge("rocketmq_timer_dequeue_lag", "Timer messages held, not yet delivered", [(local, timer.held)])
        out.gauge("rocketmq_timer_dequeue_latency", "Seconds since the earliest held timer message fell due "
                  "(seconds, as RocketMQ 5 records it)", [(local, timer.dequeue_behind_ms(now) // 1000)])
        names = timer.topic_names()
        if names:
            timing = timer.timing_by_topic().tolist()
            enq, deq = timer.enqueued_by_topic.tolist(), timer.dequeued_by_topic.tolist()
            rows = sorted(range(len(names)), key=names.__getitem__)
            out.gauge("rocketmq_timing_messages", "Timer messages held, per real topic",
                      (({**local, "topic": names[i]}, timing[i]) for i in rows))
            out.gauge("rocketmq_timer_enqueue_total", "Timer messages read into the held set, per real topic",
                      (({**local, "topic": names[i]}, enq[i] if i < len(enq) else 0) for i in rows), "counter")
            out.gauge("rocketmq_timer_dequeue_total", "Timer messages gone out of the held set, per real topic",
                      (({**local, "topic": names[i]}, deq[i] if i < len(deq) else 0) for i in rows), "counter")
        out.gauge("rocketmq_timer_message_snapshot", "Timer messages held, per band of deliver time ahead (24 h)",
                  (({**local, "timer_bound_s": bound}, n)
                   for bound, n in zip(SNAPSHOT_BOUNDS_S, timer.distribution(now))))
