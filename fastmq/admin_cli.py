"""``fastmq-admin``: mqadmin's most used commands in Python, over :class:`fastmq.client.admin.Admin`.

    fastmq-admin clusterList -n 127.0.0.1:9876
    fastmq-admin topicStatus -n 127.0.0.1:9876 -t TopicTest --json

The command names and one-letter flags are mqadmin's (4.9.8); ``-n`` falls back to the
NAMESRV_ADDR environment variable, as mqadmin's does. Tables go to stdout for people, ``--json``
prints one JSON document for scripts. Exit codes (docs/admin.md): 0 done, 1 refused or failed,
2 bad usage, 3 no NameServer / broker reachable, 4 no such topic; every error is one line on stderr.
"""
from __future__ import annotations

import argparse
import asyncio
import codecs
import json
import logging
import os
import sys
import time
from typing import Any, Callable, Coroutine, Sequence, TypeVar

from .client.admin import (TOOLS_CONSUMER_GROUP, Admin, SubscriptionGroupConfig, TopicNotFoundError, message_obj,
                           trace_obj)
from .client.acl import SessionCredentials
from .client.trace_query import TraceRecord
from .common.progress import Progress
from .errors import BrokerError, ClientError, RemotingError, TopicNotExistError
from .protocol.message import Message, MessageExt, java_string_hash
from .protocol.message_queue import MessageQueue

__all__ = ["main", "EXIT_OK", "EXIT_FAILED", "EXIT_USAGE", "EXIT_UNREACHABLE", "EXIT_NOT_FOUND"]

EXIT_OK, EXIT_FAILED, EXIT_USAGE, EXIT_UNREACHABLE, EXIT_NOT_FOUND = 0, 1, 2, 3, 4


class _Usage(Exception):
    """A flag missing or wrong for the command (exit 2)."""


def _table(header: Sequence[str], rows: Sequence[Sequence[Any]]) -> str:
    widths = [max([len(h)] + [len(str(r[i])) for r in rows]) for i, h in enumerate(header)]
    lines = ["  ".join(f"#{h}".ljust(w + 1) for h, w in zip(header, widths)).rstrip()]
    lines += ["  ".join(str(v).ljust(w + 1) for v, w in zip(r, widths)).rstrip() for r in rows]
    return "\n".join(lines)


def _when(ms: int) -> str:
    if ms <= 0:
        return "-"
    return time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(ms / 1000)) + f",{ms % 1000:03d}"


# ------------------------------------------------------------------ the commands: (json, text)

Result = tuple[Any, str]


def _first_number(text: str | None) -> float:
    try:
        return float((text or "").split(" ")[0])
    except ValueError:
        return 0.0


async def cluster_list(admin: Admin, a: argparse.Namespace) -> Result:
    info = await admin.cluster_info()
    data: list[dict[str, Any]] = []
    brokers = [(cluster, name, bid, addr) for cluster in sorted(info.cluster_addr_table)
               for name in sorted(info.cluster_addr_table[cluster])
               for bid, addr in sorted(getattr(info.broker_addr_table.get(name), "broker_addrs", {}).items())]
    with Progress("clusterList: asking brokers") as progress:
        for cluster, name, bid, addr in brokers:
            progress(len(data), len(brokers))
            row: dict[str, Any] = {"cluster": cluster, "brokerName": name, "brokerId": bid, "addr": addr}
            try:
                kv = await admin.broker_runtime_info(addr)
            except (RemotingError, BrokerError):
                kv = None
            if kv is None:
                row["version"] = "unreachable"
            else:  # mqadmin's columns: the runtime table's TPS, queue waits, age and disk use
                earliest = kv.get("earliestMessageTimeStamp") or ""
                row.update(version=kv.get("brokerVersionDesc", ""), inTps=_first_number(kv.get("putTps")),
                           outTps=_first_number(kv.get("getTransferedTps")),
                           sendQueue=f"{kv.get('sendThreadPoolQueueSize')},"
                                     f"{kv.get('sendThreadPoolQueueHeadWaitTimeMills')}ms",
                           pullQueue=f"{kv.get('pullThreadPoolQueueSize')},"
                                     f"{kv.get('pullThreadPoolQueueHeadWaitTimeMills')}ms",
                           pageCacheLockTimeMills=kv.get("pageCacheLockTimeMills"),
                           hour=(time.time() * 1000 - int(earliest)) / 3_600_000 if earliest.isdigit() else 0.0,
                           space=_first_number(kv.get("commitLogDiskRatio")))
            data.append(row)
    rows = [(r["cluster"], r["brokerName"], r["brokerId"], r["addr"], r["version"],
             f"{r['inTps']:.2f}({r['sendQueue']})" if "inTps" in r else "",
             f"{r['outTps']:.2f}({r['pullQueue']})" if "outTps" in r else "",
             r.get("pageCacheLockTimeMills", ""), f"{r['hour']:.2f}" if "hour" in r else "",
             f"{r['space']:.4f}" if "space" in r else "") for r in data]
    return data, _table(("Cluster Name", "Broker Name", "BID", "Addr", "Version", "InTPS(LOAD)", "OutTPS(LOAD)",
                         "PCWait(ms)", "Hour", "SPACE"), rows)


async def topic_list(admin: Admin, a: argparse.Namespace) -> Result:
    topics = await admin.topic_list()
    return topics, "\n".join(topics)


async def topic_route(admin: Admin, a: argparse.Namespace) -> Result:
    route = await admin.topic_route(_need(a, "topic"))
    return route.to_obj(), json.dumps(route.to_obj(), indent=2, sort_keys=True)


async def topic_status(admin: Admin, a: argparse.Namespace) -> Result:
    qs = await admin.topic_status(_need(a, "topic"))
    rows = [(q.queue.broker_name, q.queue.queue_id, q.min_offset, q.max_offset, _when(q.last_update_timestamp))
            for q in qs]
    data = [{"brokerName": q.queue.broker_name, "queueId": q.queue.queue_id, "minOffset": q.min_offset,
             "maxOffset": q.max_offset, "lastUpdateTimestamp": q.last_update_timestamp} for q in qs]
    return data, _table(("Broker Name", "QID", "Min Offset", "Max Offset", "Last Updated"), rows)


async def update_topic(admin: Admin, a: argparse.Namespace) -> Result:
    topic = _need(a, "topic")
    addrs = await admin.update_topic(topic, broker_addr=a.broker, cluster=a.cluster, read_queue_nums=a.read,
                                     write_queue_nums=a.write, perm=a.perm, order=a.order == "true")
    return ({"topic": topic, "brokers": addrs},
            "\n".join(f"create topic to {addr} success." for addr in addrs))


async def delete_topic(admin: Admin, a: argparse.Namespace) -> Result:
    topic, cluster = _need(a, "topic"), _need(a, "cluster")
    addrs = await admin.delete_topic(topic, cluster)
    return ({"topic": topic, "brokers": addrs},
            f"delete topic [{topic}] from cluster [{cluster}] success.\n"
            f"delete topic [{topic}] from NameServer success.")


async def update_sub_group(admin: Admin, a: argparse.Namespace) -> Result:
    group = SubscriptionGroupConfig(_need(a, "group"))
    for attr, flag in (("consume_enable", "consume_enable"), ("consume_from_min_enable", "from_min"),
                       ("consume_broadcast_enable", "broadcast")):
        v = getattr(a, flag)
        if v is not None:
            setattr(group, attr, v == "true")
    for attr, flag in (("retry_queue_nums", "retry_queues"), ("retry_max_times", "retry_max"),
                       ("broker_id", "broker_id"), ("which_broker_when_consume_slowly", "slowly")):
        v = getattr(a, flag)
        if v is not None:
            setattr(group, attr, v)
    addrs = await admin.update_sub_group(group, broker_addr=a.broker, cluster=a.cluster)
    return ({"group": group.to_obj(), "brokers": addrs},
            "\n".join(f"create subscription group to {addr} success." for addr in addrs))


async def delete_sub_group(admin: Admin, a: argparse.Namespace) -> Result:
    group = _need(a, "group")
    addrs = await admin.delete_sub_group(group, broker_addr=a.broker, cluster=a.cluster,
                                         remove_offset=a.remove_offset == "true")
    return ({"group": group, "brokers": addrs},
            "\n".join(f"delete subscription group [{group}] from broker [{addr}] success." for addr in addrs))


_TYPE = {"CONSUME_ACTIVELY": "PULL", "CONSUME_PASSIVELY": "PUSH"}


async def consumer_progress(admin: Admin, a: argparse.Namespace) -> Result:
    if not a.group:  # every group, one line each (mqadmin's consumerProgress with no -g)
        with Progress("consumerProgress: asking groups") as progress:
            groups = await admin.consumer_groups(progress)
        group_rows: list[tuple[Any, ...]] = [(g["group"], g["count"], g["version"] if g["count"] else "OFFLINE",
                 _TYPE.get(g["consumeType"] or "", ""), g["messageModel"] or "", g["consumeTps"], g["diffTotal"])
                for g in groups]
        return groups, _table(("Group", "Count", "Version", "Type", "Model", "TPS", "Diff Total"), group_rows)
    ps, tps = await admin.consume_stats(a.group, a.topic)
    rows = [(p.queue.topic, p.queue.broker_name, p.queue.queue_id, p.broker_offset, p.consumer_offset, p.diff,
             _when(p.last_timestamp)) for p in ps]
    total = sum(p.diff for p in ps)
    data = {"group": a.group, "diffTotal": total,
            "queues": [{"topic": p.queue.topic, "brokerName": p.queue.broker_name, "queueId": p.queue.queue_id,
                        "brokerOffset": p.broker_offset, "consumerOffset": p.consumer_offset, "diff": p.diff,
                        "lastTimestamp": p.last_timestamp} for p in ps]}
    text = _table(("Topic", "Broker Name", "QID", "Broker Offset", "Consumer Offset", "Diff", "LastTime"), rows)
    data["consumeTps"] = tps
    return data, f"{text}\n\nConsume TPS: {tps:.2f}\nDiff Total: {total}"


async def _each_broker(command: str, addrs: list[str],
                       ask: Callable[[str], Coroutine[Any, Any, dict[str, str]]]) -> dict[str, dict[str, str]]:
    """``ask(addr)`` of each broker in turn, with a progress line on a terminal."""
    out: dict[str, dict[str, str]] = {}
    with Progress(f"{command}: asking brokers") as progress:
        for addr in addrs:
            progress(len(out), len(addrs))
            out[addr] = await ask(addr)
    return out


async def broker_status(admin: Admin, a: argparse.Namespace) -> Result:
    addrs = await admin.master_addrs(broker_addr=a.broker, cluster=a.cluster)
    data = await _each_broker("brokerStatus", addrs, admin.broker_runtime_info)
    if len(addrs) == 1:
        return data[addrs[0]], "\n".join(f"{k:<32}: {v}" for k, v in data[addrs[0]].items())
    return data, "\n".join(f"{addr:<24}{k:<32}: {v}" for addr, t in data.items() for k, v in t.items())


async def get_broker_config(admin: Admin, a: argparse.Namespace) -> Result:
    addrs = await admin.master_addrs(broker_addr=a.broker, cluster=a.cluster)
    data = await _each_broker("getBrokerConfig", addrs, admin.broker_config)
    parts = [f"============{addr}============\n" + "\n".join(f"{k:<50}=  {v}" for k, v in t.items())
             for addr, t in data.items()]
    return (data[addrs[0]] if len(addrs) == 1 else data), "\n".join(parts)


async def consumer_connection(admin: Admin, a: argparse.Namespace) -> Result:
    cc = await admin.consumer_connection(_need(a, "group"))
    conns = sorted(cc.get("connectionSet") or [], key=lambda c: str(c.get("clientId")))
    rows = [(f"{i:03d}", c.get("clientId"), c.get("clientAddr"), c.get("language"), c.get("version"))
            for i, c in enumerate(conns, 1)]
    subs = sorted((cc.get("subscriptionTable") or {}).items())
    text = _table(("", "ClientId", "ClientAddr", "Language", "Version"), rows)
    text += "\n\nBelow is subscription:\n" + _table(
        ("", "Topic", "SubExpression"), [(f"{i:03d}", t, (sd or {}).get("subString")) for i, (t, sd) in
                                          enumerate(subs, 1)])
    text += (f"\n\nConsumeType: {cc.get('consumeType')}\nMessageModel: {cc.get('messageModel')}"
             f"\nConsumeFromWhere: {cc.get('consumeFromWhere')}")
    return cc, text


async def producer_connection(admin: Admin, a: argparse.Namespace) -> Result:
    conns = await admin.producer_connection(_need(a, "group"), _need(a, "topic"))
    conns = sorted(conns, key=lambda c: str(c.get("clientId")))
    rows = [(f"{i:04d}", c.get("clientId"), c.get("clientAddr"), c.get("language"), c.get("version"))
            for i, c in enumerate(conns, 1)]
    return conns, _table(("", "ClientId", "ClientAddr", "Language", "Version"), rows)


async def update_broker_config(admin: Admin, a: argparse.Namespace) -> Result:
    key, value = _need(a, "cfg_key"), getattr(a, "cfg_value", None)
    if value is None:
        raise _Usage(f"{a.command} needs -v")
    addrs = await admin.update_broker_config(key, value, broker_addr=a.broker, cluster=a.cluster)
    return ({"key": key, "value": value, "brokers": addrs},
            "\n".join(f"update broker config success, {addr}" for addr in addrs))


async def wipe_write_perm(admin: Admin, a: argparse.Namespace) -> Result:
    name = _need(a, "broker_name")
    counts = await admin.wipe_write_perm(name)
    return counts, "\n".join(f"wipe write perm of broker[{name}] in name server[{ns}] OK, {n}"
                              for ns, n in counts.items())


async def add_write_perm(admin: Admin, a: argparse.Namespace) -> Result:
    name = _need(a, "broker_name")
    counts = await admin.add_write_perm(name)
    return counts, "\n".join(f"add write perm of broker[{name}] in name server[{ns}] OK, {n}"
                              for ns, n in counts.items())


def _timestamp(raw: str, flag: str = "-s", now_ok: bool = True) -> int:
    """mqadmin's ``-s``: ms since the epoch, ``now`` (resetOffsetByTime only), or
    ``yyyy-MM-dd#HH:mm:ss:SSS`` (local time)."""
    if raw == "now" and now_ok:
        return int(time.time() * 1000)
    if raw.lstrip("-").isdigit():
        return int(raw)
    try:
        day, ms = raw.rsplit(":", 1)
        return int(time.mktime(time.strptime(day, "%Y-%m-%d#%H:%M:%S")) * 1000) + int(ms)
    except ValueError:
        now = "'now' " if now_ok else ""
        raise _Usage(f"{flag} {raw!r}: give ms since the epoch, {now}or yyyy-MM-dd#HH:mm:ss:SSS") from None


async def reset_offset_by_time(admin: Admin, a: argparse.Namespace) -> Result:
    group, topic = _need(a, "group"), _need(a, "topic")
    if not a.timestamp:
        raise _Usage(f"{a.command} needs -s")
    table = await admin.reset_offset_by_time(group, topic, _timestamp(a.timestamp), a.force != "false")
    rows = [(mq.topic, mq.broker_name, mq.queue_id, off) for mq, off in table]
    data = [{"topic": t, "brokerName": b, "queueId": q, "offset": o} for t, b, q, o in rows]
    return data, _table(("Topic", "Broker Name", "QID", "Offset"), rows)


def _message_text(m: MessageExt) -> str:
    o = message_obj(m)
    pairs = [("OffsetID:", o["msgId"]), ("Topic:", o["topic"]), ("Tags:", f"[{o['tags'] or ''}]"),
             ("Keys:", f"[{' '.join(o['keys'])}]"), ("Queue ID:", o["queueId"]), ("Queue Offset:", o["queueOffset"]),
             ("CommitLog Offset:", o["commitLogOffset"]), ("Reconsume Times:", o["reconsumeTimes"]),
             ("Born Timestamp:", _when(o["bornTimestamp"])), ("Store Timestamp:", _when(o["storeTimestamp"])),
             ("Born Host:", o["bornHost"]), ("Store Host:", o["storeHost"]), ("System Flag:", o["sysFlag"]),
             ("Properties:", o["properties"]), ("Message Body:", o["body"])]
    return "\n".join(f"{k:<20}{v}" for k, v in pairs)


async def query_msg_by_id(admin: Admin, a: argparse.Namespace) -> Result:
    ids = [i.strip() for i in _need(a, "msg_id").split(",") if i.strip()]
    if a.group or a.client_id:  # -g and -d: consume it directly in that client
        if not (a.group and a.client_id):
            raise _Usage(f"{a.command}: -g and -d go together")
        results = [await admin.consume_message_directly(i, a.group, a.client_id) for i in ids]
        return results, "\n".join(json.dumps(r, sort_keys=True) for r in results)
    msgs = [await admin.view_message(i) for i in ids]
    return [message_obj(m) for m in msgs], "\n\n".join(_message_text(m) for m in msgs)


async def query_msg_by_key(admin: Admin, a: argparse.Namespace) -> Result:
    msgs = await admin.query_message_by_key(_need(a, "topic"), _need(a, "key"))
    rows = [(m.msg_id, m.queue_id, m.queue_offset) for m in msgs]
    return [message_obj(m) for m in msgs], _table(("Message ID", "QID", "Offset"), rows)


async def query_msg_by_offset(admin: Admin, a: argparse.Namespace) -> Result:
    if a.broker_name is None or a.queue_id is None or a.offset is None:
        raise _Usage(f"{a.command} needs -t, -b, -i and -o")
    m = await admin.query_message_by_offset(_need(a, "topic"), a.broker_name, a.queue_id, a.offset)
    return message_obj(m), _message_text(m)


_T = TypeVar("_T")


def _java_hash_order(items: Sequence[_T], hashes: Sequence[int]) -> list[_T]:
    """The order a java.util.HashMap or HashSet that ``items`` were added to in turn iterates
    them (mqadmin prints properties and walks queues in it): by bucket, the hash spread as
    HashMap.hash does and masked by the table size the count grew it to; a bucket keeps its
    insertion order (a resize splits buckets without reordering)."""
    cap = 16
    while len(items) > cap * 3 // 4:
        cap *= 2

    def bucket(h: int) -> int:
        h &= 0xFFFFFFFF
        return (h ^ (h >> 16)) & (cap - 1)
    return [items[i] for i in sorted(range(len(items)), key=lambda i: bucket(hashes[i]))]


def _java_queue_order(mqs: Sequence[MessageQueue]) -> list[MessageQueue]:
    """fetchSubscribeMessageQueues' HashSet order (MessageQueue.hashCode: broker name, queue id,
    topic, 31 apart)."""
    return _java_hash_order(mqs, [(31 * (31 * (31 + java_string_hash(q.broker_name)) + q.queue_id)
                                   + java_string_hash(q.topic)) for q in mqs])


def _java_message(m: MessageExt, broker_name: str, charset: str = "utf-8", body: bool = True) -> str:
    """A pulled message as mqadmin's printMessage prints it: its id (UNIQ_KEY, else the offset
    id), Java's MessageExt.toString() and the body decoded with ``charset`` (or NOT PRINT BODY)."""
    keys = list(m.properties)
    props = ", ".join(f"{k}={m.properties[k]}" for k in _java_hash_order(keys, [java_string_hash(k) for k in keys]))
    raw = bytes(m.body)
    fields = (f"brokerName={broker_name}, queueId={m.queue_id}, storeSize={m.store_size}, "
              f"queueOffset={m.queue_offset}, sysFlag={m.sys_flag}, bornTimestamp={m.born_timestamp}, "
              f"bornHost=/{m.born_host[0]}:{m.born_host[1]}, storeTimestamp={m.store_timestamp}, "
              f"storeHost=/{m.store_host[0]}:{m.store_host[1]}, msgId={m.msg_id}, "
              f"commitLogOffset={m.commit_log_offset}, bodyCRC={m.body_crc}, reconsumeTimes={m.reconsume_times}, "
              f"preparedTransactionOffset={m.prepared_transaction_offset}")
    java_bytes = ", ".join(str(b - 256 if b > 127 else b) for b in raw)
    inner = (f"Message{{topic='{m.topic}', flag={m.flag}, properties={{{props}}}, body=[{java_bytes}], "
             f"transactionId='null'}}")
    msg_id = m.properties.get("UNIQ_KEY") or m.msg_id
    text = raw.decode(charset, "replace") if body else "NOT PRINT BODY"
    return f"MSGID: {msg_id} MessageExt [{fields}, toString()={inner}] BODY: {text}"


class _Pulls:
    """consumeMessage's and printMsg's pulls of a queue and what they print (their
    pullMessageByQueue / READQ loops)."""

    def __init__(self, admin: Admin, group: str = TOOLS_CONSUMER_GROUP, sub: str = "*", charset: str = "utf-8",
                 body: bool = True) -> None:
        self.admin, self.group, self.sub, self.charset, self.body = admin, group, sub, charset, body
        self.lines: list[str] = []
        self.notes: list[str] = []  # the lines about the range, not a pull's
        self.pulls: list[dict[str, Any]] = []

    def note(self, line: str) -> None:
        self.lines.append(line)
        self.notes.append(line)

    async def queue(self, mq: MessageQueue, offset: int, end: int, batch: int | None = None,
                    found_line: bool = True) -> None:
        """Pull ``mq`` from ``offset`` while below ``end``, ``batch`` at a time (else the rest)."""
        # every pull moves ``offset`` on (a FOUND past its messages); a broker that answered
        # without moving would loop for ever: the count bounds it
        for _ in range(max(0, end - offset + 1)):
            if offset >= end:
                return
            r = await self.admin.pull(mq, offset, batch or end - offset, sub_expression=self.sub, group=self.group)
            moved, offset = r.next_begin_offset > offset, r.next_begin_offset
            self.pulls.append({"topic": mq.topic, "brokerName": mq.broker_name, "queueId": mq.queue_id,
                               "status": r.status, "nextBeginOffset": offset,
                               "messages": [message_obj(m) for m in r.messages]})
            if r.status == "FOUND":
                if found_line:
                    self.lines.append("Consume ok")
                self.lines += [_java_message(m, mq.broker_name, self.charset, self.body) for m in r.messages]
            elif r.status == "NO_MATCHED_MSG":
                self.lines.append(f"{mq} no matched msg. status={r.status}, offset={offset}")
            else:  # NO_NEW_MSG, OFFSET_ILLEGAL
                self.lines.append(f"{mq} print msg finished. status={r.status}, offset={offset}")
                return
            if not moved:
                return

    async def bounds(self, mq: MessageQueue, begin: int, end: int) -> tuple[int, int]:
        lo = await self.admin.search_offset(mq, begin) if begin > 0 else await self.admin.min_offset(mq)
        hi = await self.admin.search_offset(mq, end) if end > 0 else await self.admin.max_offset(mq)
        return lo, hi


async def consume_message(admin: Admin, a: argparse.Namespace) -> Result:
    # ConsumeMessageCommand: its checks in its order, each refusal its text
    topic = _need(a, "topic").strip()
    count = 128 if a.count is None else a.count
    if count <= 0:
        raise _Usage("Please input a positive messageNumber!")
    if a.queue_id is not None and a.broker_name is None:
        raise _Usage("Please set the brokerName before queueId!")
    if a.offset is not None and a.queue_id is None:
        raise _Usage("Please set queueId before offset!")
    now, begin, end = int(time.time() * 1000), 0, 0
    if a.begin is not None:
        begin = _timestamp(a.begin.strip(), "-s", now_ok=False)
        if begin > now:
            raise _Usage("Please set the beginTimestamp before now!")
    if a.end is not None:
        end = _timestamp(a.end.strip(), "-e", now_ok=False)
        if end > now:
            raise _Usage("Please set the endTimestamp before now!")
        if begin > end:
            raise _Usage("Please make sure that the beginTimestamp is less than or equal to the endTimestamp")
    run = _Pulls(admin, (a.consumer_group or "").strip() or TOOLS_CONSUMER_GROUP)
    if a.queue_id is None:  # DEFAULT: every queue, oldest first, ``count`` in all
        left = count
        for mq in _java_queue_order(await admin.subscribe_queues(topic)):
            if left == 0:
                break
            lo, hi = await run.bounds(mq, begin, end)
            if hi - lo > left:
                run.note(f"The older {left} message of the {mq.queue_id} queue will be provided")
                hi, left = lo + left - 1, 0
            else:  # as 4.9.8 counts: the queue's span and one more
                left -= hi - lo + 1
            await run.queue(mq, lo, hi + 1)  # up to ``hi`` itself, as 4.9.8 reads
    else:  # BYQUEUE, or BYOFFSET from ``-o`` on
        mq = MessageQueue(topic, a.broker_name.strip(), a.queue_id)
        offset = a.offset or 0
        lo, hi = await run.bounds(mq, begin, end)
        if offset > hi:
            run.note(f"{mq} no matched msg, offset={offset}")
        else:
            lo = max(lo, offset)
            if hi - lo > count:
                run.note(f"The oldler {count} message will be provided")
                hi = lo + count - 1
            await run.queue(mq, lo, hi + 1)
    return {"pulls": run.pulls, "notes": run.notes}, "\n".join(run.lines)


async def print_msg(admin: Admin, a: argparse.Namespace) -> Result:
    # PrintMessageSubCommand: every queue from -b to -e (ms or yyyy-MM-dd#HH:mm:ss:SSS), 32 a pull
    topic = _need(a, "topic").strip()
    charset = (a.charset or "UTF-8").strip()
    try:
        codecs.lookup(charset)
    except LookupError:
        raise _Usage(f"{a.command}: -c {charset!r}: no such charset") from None
    begin = None if a.begin is None else _timestamp(a.begin.strip(), "-b", now_ok=False)
    end = None if a.end is None else _timestamp(a.end.strip(), "-e", now_ok=False)
    run = _Pulls(admin, sub=(a.sub or "*").strip(), charset=charset,
                 body=a.print_body is None or a.print_body.strip().lower() == "true")
    queues: list[dict[str, Any]] = []
    for mq in _java_queue_order(await admin.subscribe_queues(topic)):
        lo = await admin.min_offset(mq) if begin is None else await admin.search_offset(mq, begin)
        hi = await admin.max_offset(mq) if end is None else await admin.search_offset(mq, end)
        queues.append({**mq.to_obj(), "minOffset": lo, "maxOffset": hi})
        run.lines.append(f"minOffset={lo}, maxOffset={hi}, {mq}")
        await run.queue(mq, lo, hi, batch=32, found_line=False)
        run.lines.append("-" * 56)
    return {"queues": queues, "pulls": run.pulls}, "\n".join(run.lines)


def _namesrv_list(a: argparse.Namespace) -> list[str]:
    return [x.strip() for x in str(a.namesrv).split(";") if x.strip()]


async def get_namesrv_config(admin: Admin, a: argparse.Namespace) -> Result:
    data = await admin.namesrv_config(_namesrv_list(a))
    parts = [f"============{ns}============\n" + "\n".join(f"{k:<50}=  {v}" for k, v in t.items())
             for ns, t in data.items()]
    return data, "\n".join(parts)


async def update_namesrv_config(admin: Admin, a: argparse.Namespace) -> Result:
    key, value = _need(a, "cfg_key").strip(), getattr(a, "cfg_value", None)
    if value is None:
        raise _Usage(f"{a.command} needs -v")
    addrs = await admin.update_namesrv_config({key: value.strip()}, _namesrv_list(a))
    return ({"key": key, "value": value.strip(), "namesrvs": addrs},
            f"update name server config success![{', '.join(addrs)}]\n{key} : {value.strip()}")


async def update_kv_config(admin: Admin, a: argparse.Namespace) -> Result:
    namespace, key = _need(a, "namespace").strip(), _need(a, "cfg_key").strip()
    if a.cfg_value is None:
        raise _Usage(f"{a.command} needs -v")
    addrs = await admin.put_kv_config(namespace, key, a.cfg_value.strip())
    return ({"namespace": namespace, "key": key, "value": a.cfg_value.strip(), "namesrvs": addrs},
            "create or update kv config to namespace success.")


async def delete_kv_config(admin: Admin, a: argparse.Namespace) -> Result:
    namespace, key = _need(a, "namespace").strip(), _need(a, "cfg_key").strip()
    addrs = await admin.delete_kv_config(namespace, key)
    return {"namespace": namespace, "key": key, "namesrvs": addrs}, "delete kv config from namespace success."


async def send_message(admin: Admin, a: argparse.Namespace) -> Result:
    topic = _need(a, "topic")
    if a.body is None:
        raise _Usage(f"{a.command} needs -p")
    props = {}
    if a.tags:
        props["TAGS"] = a.tags
    if a.keys:
        props["KEYS"] = a.keys
    r = await admin.send_message(Message(topic, a.body.encode("utf-8"), properties=props),
                                 broker_name=a.broker_name, queue_id=a.queue_id)
    row = (r.message_queue.broker_name, r.message_queue.queue_id, r.status, r.msg_id)
    data = {"brokerName": row[0], "queueId": row[1], "sendStatus": row[2], "msgId": row[3],
            "offsetMsgId": r.offset_msg_id, "queueOffset": r.queue_offset}
    return data, _table(("Broker Name", "QID", "Send Result", "MsgId"), [row])


def _trace_row(kind: str, r: TraceRecord) -> str:
    c = r.context
    when = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(c.time_stamp / 1000))
    status = "success" if c.success else "failed"
    return f"{kind:<10} {c.group_name or '':<20} {r.client_host:<20} {when:<20} {str(c.cost_time) + 'ms':<10} {status:<10}"


async def query_msg_trace_by_id(admin: Admin, a: argparse.Namespace) -> Result:
    records = await admin.query_msg_trace(_need(a, "msg_id").strip(), a.trace_topic)
    data = [trace_obj(r) for r in records]
    # QueryMsgTraceByIdSubCommand: a Pub table per Pub record, then one Sub table per consumer
    # group from its SubAfter records (SubBefore and EndTransaction are in --json only)
    blocks: list[str] = []
    subs: dict[str, list[TraceRecord]] = {}
    head = "%-10s %-20s %-20s %-20s %-10s %-10s"
    for r in records:
        if r.trace_type == "Pub":
            blocks.append("\n".join([head % ("#Type", "#ProducerGroup", "#ClientHost", "#SendTime", "#CostTimes",
                                               "#Status"), _trace_row("Pub", r)]))
        elif r.trace_type == "SubAfter":
            subs.setdefault(r.context.group_name or "", []).append(r)
    for rs in subs.values():
        blocks.append("\n".join([head % ("#Type", "#ConsumerGroup", "#ClientHost", "#ConsumerTime", "#CostTimes",
                                           "#Status")] + [_trace_row("Sub", r) for r in rs]))
    return data, "\n\n".join(b.rstrip() for b in blocks)


def _acl_target(a: argparse.Namespace) -> dict[str, Any]:
    if bool(a.broker) == bool(a.cluster):
        raise _Usage(f"{a.command} needs one of -b and -c")
    return {"broker_addr": a.broker, "cluster": a.cluster}


def _perms(text: str | None) -> list[str]:
    return [p.strip() for p in (text or "").split(",") if p.strip()]


async def update_acl_config(admin: Admin, a: argparse.Namespace) -> Result:
    if not a.access_key or not a.secret_key:
        raise _Usage(f"{a.command} needs -a and -s")
    target = _acl_target(a)
    config = {"accessKey": a.access_key, "secretKey": a.secret_key, "whiteRemoteAddress": a.white or "",
              "defaultTopicPerm": a.default_topic_perm, "defaultGroupPerm": a.default_group_perm,
              "topicPerms": _perms(a.topic_perms), "groupPerms": _perms(a.group_perms), "admin": a.admin == "true"}
    addrs = await admin.update_acl_config(a.access_key, a.secret_key, white_remote_address=a.white,
                                          default_topic_perm=a.default_topic_perm,
                                          default_group_perm=a.default_group_perm,
                                          topic_perms=config["topicPerms"], group_perms=config["groupPerms"],
                                          admin=config["admin"], **target)
    text = "\n".join(f"create or update plain access config to {x} success." for x in addrs)
    return {"brokers": addrs, "config": config}, text + "\n" + json.dumps(config, sort_keys=True)


async def delete_acl_config(admin: Admin, a: argparse.Namespace) -> Result:
    if not a.access_key:
        raise _Usage(f"{a.command} needs -a")
    addrs = await admin.delete_acl_config(a.access_key, **_acl_target(a))
    text = "\n".join(f"delete plain access config account from {x} success." for x in addrs)
    return {"brokers": addrs, "accessKey": a.access_key}, text + f"\naccount's accesskey is:{a.access_key}"


async def update_global_white_addr(admin: Admin, a: argparse.Namespace) -> Result:
    if a.white_addrs is None:
        raise _Usage(f"{a.command} needs -g")
    addrs = await admin.update_global_white_addrs(a.white_addrs, acl_file=a.acl_file, **_acl_target(a))
    text = "\n".join(f"update global white remote addresses to {x} success." for x in addrs)
    return {"brokers": addrs, "globalWhiteRemoteAddresses": _perms(a.white_addrs)}, text


async def cluster_acl_config_version(admin: Admin, a: argparse.Namespace) -> Result:
    infos = await admin.acl_config_versions(**_acl_target(a))
    head = "%-16s  %-22s  %-22s  %-20s  %-22s  %-22s"
    lines = [head % ("#Cluster Name", "#Broker Name", "#Broker Addr", "#AclFilePath", "#AclConfigVersionNum",
                     "#AclLastUpdateTime")]
    for i in infos:
        for path, v in i["versions"].items():
            lines.append(head % (i["clusterName"], i["brokerName"], i["brokerAddr"], path, v.get("counter"),
                                 _when(int(v.get("timestamp") or 0)).split(",")[0]))
    return infos, "\n".join(x.rstrip() for x in lines)


def tools_credentials() -> tuple[str | None, str | None]:
    """What mqadmin signs with: accessKey / secretKey of ROCKETMQ_HOME/conf/tools.yml, if any."""
    home = os.environ.get("ROCKETMQ_HOME")
    if not home:
        return None, None
    try:
        text = open(os.path.join(home, "conf", "tools.yml"), encoding="utf-8").read()
    except OSError:
        return None, None
    found: dict[str, str] = {}
    for line in text.splitlines():
        key, sep, value = line.partition(":")
        if sep and key.strip() in ("accessKey", "secretKey"):
            found[key.strip()] = value.split("#")[0].strip().strip("'\"")
    return found.get("accessKey") or None, found.get("secretKey") or None


def _need(a: argparse.Namespace, name: str) -> str:
    v = getattr(a, name, None)
    if not v:
        flag = {"topic": "-t", "group": "-g", "cluster": "-c", "msg_id": "-i", "key": "-k", "cfg_key": "-k",
                "broker_name": "-b", "namespace": "-s"}[name]
        raise _Usage(f"{a.command} needs {flag}")
    return str(v)


Command = Callable[[Admin, argparse.Namespace], Coroutine[Any, Any, Result]]

#: name -> (what, the function, the flags it takes besides -n and --json)
COMMANDS: dict[str, tuple[str, Command, str]] = {
    "clusterList": ("List the clusters, their brokers and versions", cluster_list, ""),
    "topicList": ("List every topic the NameServer knows", topic_list, "c"),
    "topicRoute": ("Show a topic's route", topic_route, "t"),
    "topicStatus": ("Min / max offset of every queue of a topic", topic_status, "t"),
    "updateTopic": ("Create or change a topic", update_topic, "tbcrwpo"),
    "deleteTopic": ("Delete a topic from a cluster and the NameServer", delete_topic, "tc"),
    "updateSubGroup": ("Create or change a subscription group", update_sub_group, "gbcsmdqriw"),
    "deleteSubGroup": ("Delete a subscription group", delete_sub_group, "gbcr"),
    "consumerProgress": ("A group's offsets and lag per queue", consumer_progress, "gt"),
    "consumerConnection": ("A consumer group's connected clients and subscriptions", consumer_connection, "g"),
    "producerConnection": ("A producer group's connected clients", producer_connection, "gt"),
    "resetOffsetByTime": ("Move a group's offsets on a topic to a time", reset_offset_by_time, "gt"),
    "brokerStatus": ("A broker's runtime information", broker_status, "bc"),
    "getBrokerConfig": ("A broker's configuration", get_broker_config, "bc"),
    "updateBrokerConfig": ("Set one configuration key of a broker", update_broker_config, "bc"),
    "wipeWritePerm": ("Stop the NameServers routing sends to a broker", wipe_write_perm, ""),
    "addWritePerm": ("Route sends to a broker again", add_write_perm, ""),
    "queryMsgById": ("A message by its offset message id", query_msg_by_id, "i"),
    "queryMsgByKey": ("A topic's messages by key", query_msg_by_key, "tk"),
    "queryMsgByOffset": ("The message at an offset of one queue", query_msg_by_offset, "t"),
    "sendMessage": ("Send one message", send_message, "t"),
    "consumeMessage": ("Pull a topic's messages and print them", consume_message, "t"),
    "printMsg": ("Print the messages of every queue of a topic", print_msg, "t"),
    "getNamesrvConfig": ("The NameServers' configuration", get_namesrv_config, ""),
    "updateNamesrvConfig": ("Set one configuration key of the NameServers", update_namesrv_config, ""),
    "updateKvConfig": ("Create or change a KV config entry on the NameServers", update_kv_config, ""),
    "deleteKvConfig": ("Delete a KV config entry from the NameServers", delete_kv_config, ""),
    "queryMsgTraceById": ("A message's trace: its Pub and Sub records", query_msg_trace_by_id, ""),
    "updateAclConfig": ("Create or change an ACL account on brokers", update_acl_config, "bc"),
    "deleteAclConfig": ("Delete an ACL account on brokers", delete_acl_config, "bc"),
    "clusterAclConfigVersion": ("The ACL files' versions of brokers", cluster_acl_config_version, "bc"),
    "updateGlobalWhiteAddr": ("Set the ACL's global white addresses on brokers", update_global_white_addr, "bc"),
}


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="fastmq-admin", description="mqadmin's commands for fastmq and RocketMQ 4.x")
    sub = p.add_subparsers(dest="command", metavar="command")
    for name, (what, _fn, flags) in COMMANDS.items():
        s = sub.add_parser(name, help=what, description=what)
        s.add_argument("-n", "--namesrvAddr", dest="namesrv", default=os.environ.get("NAMESRV_ADDR"),
                       help="NameServer address(es), 'host:port;host:port' (default: $NAMESRV_ADDR)")
        s.add_argument("--json", action="store_true", help="print JSON for scripts instead of a table")
        s.add_argument("--timeout", type=float, default=5.0, help="seconds each request may take (5)")
        s.add_argument("--access-key", dest="my_access_key",
                       help="ACL account to sign with (default: $ROCKETMQ_HOME/conf/tools.yml's accessKey)")
        s.add_argument("--secret-key", dest="my_secret_key", help="its secret key")
        if "t" in flags:
            s.add_argument("-t", "--topic", dest="topic")
        if "g" in flags:
            s.add_argument("-g", "--groupName", dest="group")
        if "b" in flags:
            s.add_argument("-b", "--brokerAddr", dest="broker")
        if "c" in flags:
            s.add_argument("-c", "--clusterName", dest="cluster")
        if name == "queryMsgById":
            s.add_argument("-i", "--msgId", dest="msg_id", help="offset message id(s), comma separated")
            s.add_argument("-g", "--consumerGroup", dest="group", help="with -d: consume it in that client")
            s.add_argument("-d", "--clientId", dest="client_id")
        if name == "queryMsgTraceById":
            s.add_argument("-i", "--msgId", dest="msg_id", help="the message id (its UNIQ_KEY)")
            s.add_argument("-t", "--traceTopic", dest="trace_topic", help="default RMQ_SYS_TRACE_TOPIC")
        if name in ("updateAclConfig", "deleteAclConfig"):
            s.add_argument("-a", "--accessKey", dest="access_key")
        if name == "updateAclConfig":
            s.add_argument("-s", "--secretKey", dest="secret_key")
            s.add_argument("-w", "--whiteRemoteAddress", dest="white")
            s.add_argument("-i", "--defaultTopicPerm", dest="default_topic_perm")
            s.add_argument("-u", "--defaultGroupPerm", dest="default_group_perm")
            s.add_argument("-t", "--topicPerms", dest="topic_perms", help="e.g. topicA=DENY,topicD=SUB")
            s.add_argument("-g", "--groupPerms", dest="group_perms", help="e.g. groupD=DENY,groupE=SUB")
            s.add_argument("-m", "--admin", dest="admin", choices=("true", "false"), default="false")
        if name == "updateGlobalWhiteAddr":
            s.add_argument("-g", "--globalWhiteRemoteAddresses", dest="white_addrs", help="e.g. 10.10.103.*,192.168.0.*")
            s.add_argument("-p", "--aclFileFullPath", dest="acl_file")
        if "k" in flags:
            s.add_argument("-k", "--msgKey", dest="key")
        if name == "updateTopic":
            s.add_argument("-r", "--readQueueNums", dest="read", type=int, default=8)
            s.add_argument("-w", "--writeQueueNums", dest="write", type=int, default=8)
            s.add_argument("-p", "--perm", dest="perm", type=int, default=6, choices=(2, 4, 6))
            s.add_argument("-o", "--order", dest="order", choices=("true", "false"), default="false")
        if name == "updateSubGroup":
            tf = ("true", "false")
            s.add_argument("-s", "--consumeEnable", dest="consume_enable", choices=tf)
            s.add_argument("-m", "--consumeFromMinEnable", dest="from_min", choices=tf)
            s.add_argument("-d", "--consumeBroadcastEnable", dest="broadcast", choices=tf)
            s.add_argument("-q", "--retryQueueNums", dest="retry_queues", type=int)
            s.add_argument("-r", "--retryMaxTimes", dest="retry_max", type=int)
            s.add_argument("-i", "--brokerId", dest="broker_id", type=int)
            s.add_argument("-w", "--whichBrokerWhenConsumeSlowly", dest="slowly", type=int)
        if name == "resetOffsetByTime":
            s.add_argument("-s", "--timestamp", dest="timestamp",
                           help="ms since the epoch, 'now', or yyyy-MM-dd#HH:mm:ss:SSS")
            s.add_argument("-f", "--force", dest="force", choices=("true", "false"), default="true")
        if name == "queryMsgByOffset":
            s.add_argument("-b", "--brokerName", dest="broker_name")
            s.add_argument("-i", "--queueId", dest="queue_id", type=int)
            s.add_argument("-o", "--offset", dest="offset", type=int)
        if name == "consumeMessage":
            s.add_argument("-b", "--brokerName", dest="broker_name")
            s.add_argument("-i", "--queueId", dest="queue_id", type=int)
            s.add_argument("-o", "--offset", dest="offset", type=int)
            s.add_argument("-g", "--consumerGroup", dest="consumer_group",
                           help=f"the group to pull as (default {TOOLS_CONSUMER_GROUP})")
            s.add_argument("-s", "--beginTimestamp", dest="begin", help="ms since the epoch or yyyy-MM-dd#HH:mm:ss:SSS")
            s.add_argument("-e", "--endTimestamp", dest="end", help="ms since the epoch or yyyy-MM-dd#HH:mm:ss:SSS")
            s.add_argument("-c", "--MessageNumber", dest="count", type=int, help="messages to print (128)")
        if name == "printMsg":
            s.add_argument("-c", "--charsetName", dest="charset", help="the bodies' charset (UTF-8)")
            s.add_argument("-s", "--subExpression", dest="sub", help="tags, e.g. 'TagA || TagB' (*)")
            s.add_argument("-b", "--beginTimestamp", dest="begin", help="ms since the epoch or yyyy-MM-dd#HH:mm:ss:SSS")
            s.add_argument("-e", "--endTimestamp", dest="end", help="ms since the epoch or yyyy-MM-dd#HH:mm:ss:SSS")
            s.add_argument("-d", "--printBody", dest="print_body", help="print the bodies (true)")
        if name in ("updateKvConfig", "deleteKvConfig"):
            s.add_argument("-s", "--namespace", dest="namespace")
        if name in ("updateNamesrvConfig", "updateKvConfig", "deleteKvConfig"):
            s.add_argument("-k", "--key", dest="cfg_key")
        if name in ("updateNamesrvConfig", "updateKvConfig"):
            s.add_argument("-v", "--value", dest="cfg_value")
        if name == "sendMessage":
            s.add_argument("-p", "--body", dest="body")
            s.add_argument("-k", "--key", dest="keys")
            s.add_argument("-c", "--tags", dest="tags")
            s.add_argument("-b", "--broker", dest="broker_name", help="brokerName (with -i: that queue)")
            s.add_argument("-i", "--qid", dest="queue_id", type=int)
        if name == "updateBrokerConfig":
            s.add_argument("-k", "--key", dest="cfg_key")
            s.add_argument("-v", "--value", dest="cfg_value")
        if name in ("wipeWritePerm", "addWritePerm"):
            s.add_argument("-b", "--brokerName", dest="broker_name")
        if name == "deleteSubGroup":
            s.add_argument("-r", "--removeOffset", dest="remove_offset", choices=("true", "false"), default="false")
    c = sub.add_parser("console", help="Serve the web console (127.0.0.1:8080 unless told)",
                       description="A small read-mostly web console over this cluster (docs/console.md)")
    c.add_argument("-n", "--namesrvAddr", dest="namesrv", default=os.environ.get("NAMESRV_ADDR"),
                   help="NameServer address(es), 'host:port;host:port' (default: $NAMESRV_ADDR)")
    c.add_argument("--host", default="127.0.0.1",
                   help="address to listen on (127.0.0.1: only this machine; 0.0.0.0 opens it to the network)")
    c.add_argument("--port", type=int, default=8080)
    c.add_argument("--timeout", type=float, default=5.0, help="seconds each request may take (5)")
    c.add_argument("--access-key", dest="my_access_key",
                   help="ACL account to sign with; writes on a cluster with ACL need an admin account's")
    c.add_argument("--secret-key", dest="my_secret_key", help="its secret key")
    c.add_argument("--refresh", type=float, default=5.0, help="seconds between a page's updates (5)")
    c.add_argument("--sample", type=float, default=10.0, help="seconds between lag samples (10)")
    c.add_argument("--history-minutes", type=float, default=30.0, help="lag kept for the charts (30)")
    c.add_argument("--trace-topic", help="the trace topic (default RMQ_SYS_TRACE_TOPIC)")
    return p


async def _console(a: argparse.Namespace, ak: str | None, sk: str | None) -> int:
    """``fastmq-admin console``: serves until interrupted."""
    if not 0 < a.port < 65536:
        return _fail(EXIT_USAGE, f"console: --port {a.port}: give 1..65535")
    try:
        from .console.app import ConsoleSettings, serve
    except ImportError as exc:
        return _fail(EXIT_USAGE, f"console: needs aiohttp ({exc}): pip install 'fastmq[console]'")
    try:
        settings = ConsoleSettings(a.namesrv, host=a.host, port=a.port, timeout=a.timeout,
                                   credentials=SessionCredentials(ak, sk) if ak and sk else None,
                                   refresh_s=a.refresh, sample_s=a.sample, history_s=a.history_minutes * 60,
                                   trace_topic=a.trace_topic)
    except ValueError as exc:
        return _fail(EXIT_USAGE, f"console: {exc}")
    try:
        await serve(settings, ready=lambda url: print(f"fastmq console on {url} (NameServer {a.namesrv})",
                                                      flush=True))
    except OSError as exc:
        return _fail(EXIT_FAILED, f"console: cannot listen on {a.host}:{a.port}: {exc}")
    return EXIT_OK


async def run(argv: Sequence[str] | None = None) -> int:
    """The command line ``argv`` run to its exit code (output on stdout, errors on stderr)."""
    parser = _parser()
    try:
        a = parser.parse_args(argv)
    except SystemExit as exc:  # argparse printed its usage line
        return int(exc.code or 0) and EXIT_USAGE
    if a.command is None:
        parser.print_help(sys.stderr)
        return EXIT_USAGE
    if not a.namesrv:
        return _fail(EXIT_USAGE, f"{a.command}: no NameServer: give -n host:port or set NAMESRV_ADDR")
    # the library's warnings (a NameServer failing over) would break the one-line error promise
    logging.getLogger("fastmq").addHandler(logging.NullHandler())
    ak, sk = (a.my_access_key, a.my_secret_key) if a.my_access_key else tools_credentials()
    if bool(ak) != bool(sk):
        return _fail(EXIT_USAGE, f"{a.command}: --access-key and --secret-key go together")
    if a.command == "console":
        return await _console(a, ak, sk)
    fn = COMMANDS[a.command][1]
    admin = Admin(a.namesrv, timeout=a.timeout,
                  credentials=SessionCredentials(ak, sk) if ak and sk else None)
    try:
        data, text = await fn(admin, a)
    except _Usage as exc:
        return _fail(EXIT_USAGE, str(exc))
    except (TopicNotFoundError, TopicNotExistError) as exc:
        return _fail(EXIT_NOT_FOUND, f"{a.command}: {exc}")
    except RemotingError as exc:
        return _fail(EXIT_UNREACHABLE, f"{a.command}: cannot reach the NameServer ({a.namesrv}) or a broker: {exc}")
    except (BrokerError, ClientError) as exc:
        return _fail(EXIT_FAILED, f"{a.command}: {exc}")
    finally:
        await admin.close()
    if a.json:
        print(json.dumps(data, indent=2, sort_keys=True, default=str))
    elif text:
        print(text)
    return EXIT_OK


def _fail(code: int, message: str) -> int:
    print("fastmq-admin: " + " ".join(message.split()), file=sys.stderr)
    return code


def main(argv: Sequence[str] | None = None) -> None:
    """``fastmq-admin``: exits with the command's code."""
    try:
        sys.exit(asyncio.run(run(argv)))
    except KeyboardInterrupt:  # the console's way to stop
        sys.exit(EXIT_OK)


if __name__ == "__main__":
    main()
