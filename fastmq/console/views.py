"""The console's JSON: each page's data, asked of :class:`Admin` (every request goes out through
the client API) and shaped for the page. No HTML here: the page renders every value as text."""
from __future__ import annotations

import asyncio
import time
from typing import Any

from ..client.admin import Admin, TopicNotFoundError, message_obj, trace_obj
from ..errors import BrokerError, ClientError, ConsumerNotOnlineError, RemotingError
from ..protocol.bodies import MASTER_ID
from ..protocol.message import MessageFormatError, decode_offset_msg_id

__all__ = ["cluster", "topics", "topic", "group", "message_lookup", "messages_by_time", "producers", "dlq",
           "broker_addrs", "acl_enabled", "topic_kind", "TIME_QUERY_MAX"]

#: The most messages the query by topic and time lists (rocketmq-dashboard's bound).
TIME_QUERY_MAX = 2000

#: Prefixes of the topics RocketMQ keeps for a group: retries and dead letters.
_GROUP_TOPICS = (("%RETRY%", "retry"), ("%DLQ%", "dlq"))
#: Topics the brokers keep for themselves (TopicValidator's system topics and their families).
_SYSTEM = ("RMQ_SYS_", "SCHEDULE_TOPIC_XXXX", "TBW102", "BenchmarkTest", "OFFSET_MOVED_EVENT", "SELF_TEST_TOPIC",
           "TRANS_CHECK_MAX_TIME_TOPIC", "rmq_sys_")


def topic_kind(name: str) -> str:
    """normal, retry, dlq or system (what the topic list filters by)."""
    for prefix, kind in _GROUP_TOPICS:
        if name.startswith(prefix):
            return kind
    if name.startswith(_SYSTEM) or name.endswith("_REPLY_TOPIC") or "%" in name:
        return "system"
    return "normal"


def _first_number(text: str | None) -> float:
    try:
        return float((text or "").split(" ")[0])
    except ValueError:
        return 0.0


async def broker_addrs(admin: Admin) -> dict[str, dict[str, Any]]:
    """Every broker address the NameServer knows: ``{addr: {cluster, brokerName, brokerId}}``."""
    info = await admin.cluster_info()
    out: dict[str, dict[str, Any]] = {}
    for cluster_name, names in info.cluster_addr_table.items():
        for name in names:
            bd = info.broker_addr_table.get(name)
            for bid, addr in (bd.broker_addrs if bd else {}).items():
                out[addr] = {"cluster": cluster_name, "brokerName": name, "brokerId": bid}
    return out


async def _runtime(admin: Admin, addr: str) -> dict[str, str] | None:
    try:
        return await admin.broker_runtime_info(addr)
    except (RemotingError, BrokerError, ClientError, asyncio.TimeoutError):
        return None


async def cluster(admin: Admin) -> dict[str, Any]:
    """Cluster page: each broker's health (answers or not), TPS in and out, disk use, today's
    message counts; brokers asked at once."""
    known = await broker_addrs(admin)
    order = sorted(known, key=lambda a: (known[a]["cluster"], known[a]["brokerName"], known[a]["brokerId"]))
    infos = await asyncio.gather(*(_runtime(admin, a) for a in order))
    now_ms = int(time.time() * 1000)
    brokers = []
    for addr, kv in zip(order, infos):
        row: dict[str, Any] = {**known[addr], "addr": addr, "up": kv is not None}
        if kv is not None:
            row.update(version=kv.get("brokerVersionDesc", ""), inTps=_first_number(kv.get("putTps")),
                       outTps=_first_number(kv.get("getTransferedTps")),
                       diskRatio=_first_number(kv.get("commitLogDiskRatio")),
                       putToday=int(_first_number(kv.get("msgPutTotalTodayNow"))),
                       getToday=int(_first_number(kv.get("msgGetTotalTodayNow"))),
                       runtime=kv.get("runtime", ""),
                       commitLogMaxOffset=int(_first_number(kv.get("commitLogMaxOffset"))))
        brokers.append(row)
    return {"brokers": brokers, "time": now_ms}


async def topics(admin: Admin) -> dict[str, Any]:
    """Topic list: every topic with its kind (a cluster's and a broker's own name are topics the
    brokers make for themselves: system)."""
    info = await admin.cluster_info()
    own = set(info.cluster_addr_table) | set(info.broker_addr_table)
    return {"topics": [{"topic": t, "kind": "system" if t in own else topic_kind(t)} for t in await admin.topic_list()]}


async def topic(admin: Admin, name: str) -> dict[str, Any]:
    """One topic: its route (brokers, queues, permissions) and every queue's offsets."""
    route = await admin.topic_route(name)
    queues = await admin.topic_status(name)
    return {"topic": name, "kind": topic_kind(name), "route": route.to_obj(),
            "queues": [{"brokerName": q.queue.broker_name, "queueId": q.queue.queue_id, "minOffset": q.min_offset,
                        "maxOffset": q.max_offset, "lastUpdateTimestamp": q.last_update_timestamp}
                       for q in queues],
            "messages": sum(q.max_offset - q.min_offset for q in queues)}


async def _connection(admin: Admin, name: str) -> dict[str, Any]:
    try:
        return await admin.consumer_connection(name)
    except (ConsumerNotOnlineError, TopicNotFoundError):
        return {}


async def group(admin: Admin, name: str) -> dict[str, Any]:
    """One consumer group: lag per queue, consume TPS, connected clients and subscriptions."""
    queues, tps = await admin.consume_stats(name)
    cc = await _connection(admin, name)
    conns = sorted(cc.get("connectionSet") or [], key=lambda c: str(c.get("clientId")))
    return {"group": name, "consumeTps": tps, "diffTotal": sum(q.diff for q in queues),
            "queues": [{"topic": p.queue.topic, "brokerName": p.queue.broker_name, "queueId": p.queue.queue_id,
                        "brokerOffset": p.broker_offset, "consumerOffset": p.consumer_offset, "diff": p.diff,
                        "lastTimestamp": p.last_timestamp} for p in queues],
            "clients": [{"clientId": c.get("clientId"), "clientAddr": c.get("clientAddr"),
                         "language": c.get("language"), "version": c.get("version")} for c in conns],
            "subscriptions": [{"topic": t, "expression": (sd or {}).get("subString")}
                              for t, sd in sorted((cc.get("subscriptionTable") or {}).items())],
            "consumeType": cc.get("consumeType"), "messageModel": cc.get("messageModel")}


def _store_addr(msg_id: str) -> str | None:
    try:
        host, port, _ = decode_offset_msg_id(msg_id)
    except MessageFormatError:  # not an offset id: looked up as a producer's id within its topic
        return None
    return f"{host}:{port}"


async def message_lookup(admin: Admin, *, msg_id: str = "", topic: str = "", key: str = "",
                         trace_topic: str | None = None) -> dict[str, Any]:
    """Message page: by offset message id (the broker that stored it is asked; only a broker of
    this cluster), by message id (UNIQ_KEY) or key within a topic; each found message with its
    trace (the records the trace topic indexes under its UNIQ_KEY)."""
    found = []
    if msg_id:
        addr = _store_addr(msg_id)
        if addr is not None and addr in await broker_addrs(admin):
            found = [await admin.view_message(msg_id)]
        if not found and topic:  # a producer's message id: its UNIQ_KEY, indexed as a key
            found = [m for m in await admin.query_message_by_key(topic, msg_id)
                     if m.properties.get("UNIQ_KEY") == msg_id]
        if not found and not topic:
            raise ClientError(f"{msg_id} is no offset message id of this cluster's brokers: give its topic "
                              "to look it up as a producer's message id (UNIQ_KEY)")
    elif key:
        if not topic:
            raise ClientError("a key lookup needs the topic")
        found = await admin.query_message_by_key(topic, key)
    else:
        raise ClientError("give a message id or a key")
    out = []
    for m in found[:32]:
        obj = message_obj(m)
        uniq = m.properties.get("UNIQ_KEY")
        try:
            trace = [trace_obj(r) for r in await admin.query_msg_trace(uniq, trace_topic)] if uniq else []
        except TopicNotFoundError:  # trace is off on this cluster: no trace topic
            trace = []
        obj["trace"] = trace
        out.append(obj)
    return {"messages": out}


async def messages_by_time(admin: Admin, topic: str, begin_ms: int, end_ms: int,
                           max_num: int = TIME_QUERY_MAX) -> dict[str, Any]:
    """Message page, by topic and time: the messages stored between the two times, newest first,
    at most ``max_num`` (one more is asked for, to say whether the bound cut the list)."""
    if not topic:
        raise ClientError("a query by time needs the topic")
    max_num = max(1, min(max_num, TIME_QUERY_MAX))
    found = await admin.messages_by_time(topic, begin_ms, end_ms, max_num + 1)
    return {"topic": topic, "begin": begin_ms, "end": end_ms, "max": max_num, "more": len(found) > max_num,
            "messages": [message_obj(m) for m in found[:max_num]]}


async def producers(admin: Admin, topic: str, group: str) -> dict[str, Any]:
    """Producer page: the connections of a producer group, from a broker of the topic (as
    ``mqadmin producerConnection``); an empty list when none is online."""
    if not topic or not group:
        raise ClientError("name the topic and the producer group")
    conns = sorted(await admin.producer_connection(group, topic), key=lambda c: str(c.get("clientId")))
    return {"topic": topic, "group": group,
            "connections": [{"clientId": c.get("clientId"), "clientAddr": c.get("clientAddr"),
                             "language": c.get("language"), "version": c.get("version")} for c in conns]}


async def dlq(admin: Admin, name: str, max_num: int = 32) -> dict[str, Any]:
    """DLQ page: the group's newest dead letters and its connected clients (a resend goes to one)."""
    msgs = await admin.dlq_messages(name, max_num)
    cc = await _connection(admin, name)
    return {"group": name, "messages": [message_obj(m) for m in msgs],
            "clients": sorted(str(c.get("clientId")) for c in cc.get("connectionSet") or [])}


async def acl_enabled(admin: Admin) -> bool:
    """Whether a master of the cluster runs with ``aclEnable=true`` (its config says so)."""
    for addr, where in (await broker_addrs(admin)).items():
        if where["brokerId"] != MASTER_ID:
            continue
        try:
            if (await admin.broker_config(addr)).get("aclEnable", "false").lower() == "true":
                return True
        except (BrokerError, RemotingError, ClientError):
            return True  # a refusal to even show the config: assume the cluster guards itself
    return False
