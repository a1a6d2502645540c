"""Reading a message's trace: what 4.9.8's ``mqadmin queryMsgTraceById`` does, as a function.

The trace topic's route names its brokers; each is asked QUERY_MESSAGE for the trace messages
indexed under the message id (the dispatcher makes every traced message id a key of the trace
message that carries its records), each answer's bodies are decoded, and the records about that
message are returned, oldest first. A trace message whose body cannot be read (not UTF-8, bad
fields, a broken compressed body) is skipped and logged: one bad writer does not hide the rest.
"""
from __future__ import annotations

import logging
import time
import zlib
from dataclasses import dataclass

from ..errors import NoRouteError
from ..protocol.message import MessageExt, MessageSysFlag
from .instance import ClientConfig, ClientInstance
from .pull_service import inflate_body
from .trace_data import DEFAULT_TRACE_TOPIC, TraceContext, decode_trace

__all__ = ["TraceRecord", "query_trace", "trace_records"]

log = logging.getLogger("fastmq.client")

#: what queryMsgTraceById asks each broker for
MAX_NUM = 64


@dataclass
class TraceRecord:
    """One record of a message's trace, with where its trace message came from."""

    #: the record (its ``beans[0]`` is the traced message)
    context: TraceContext
    #: the client that wrote it: the trace message's born host, ``ip:port``
    client_host: str
    #: the broker that stored the trace message, ``ip:port``
    trace_store_host: str

    @property
    def trace_type(self) -> str:
        return self.context.trace_type.value


def trace_records(msg_id: str, trace_msgs: list[MessageExt]) -> list[TraceRecord]:
    """The records about ``msg_id`` in ``trace_msgs`` (TraceView.decodeFromTraceTransData), each
    trace message once, oldest record first; unreadable bodies are skipped."""
    out: list[TraceRecord] = []
    seen: set[tuple[str, int]] = set()
    for m in trace_msgs:
        where = (f"{m.store_host[0]}:{m.store_host[1]}", m.commit_log_offset)
        if where in seen:
            continue
        seen.add(where)
        try:
            body = inflate_body(m.body) if m.sys_flag & MessageSysFlag.COMPRESSED else m.body
            contexts = decode_trace(body.decode("utf-8"))
        except (UnicodeDecodeError, ValueError, zlib.error) as exc:
            log.warning("trace message at %s:%d skipped: %s", where[0], where[1], exc)
            continue
        client = f"{m.born_host[0]}:{m.born_host[1]}"
        out.extend(TraceRecord(c, client, where[0]) for c in contexts
                   if c.beans and c.beans[0].msg_id == msg_id)
    out.sort(key=lambda r: r.context.time_stamp)
    return out


async def query_trace(msg_id: str, *, namesrv_addr: str | list[str] | None = None,
                      client_config: ClientConfig | None = None, instance: ClientInstance | None = None,
                      trace_topic: str | None = None, max_num: int = MAX_NUM,
                      timeout_ms: int = 3000) -> list[TraceRecord]:
    """The trace of message ``msg_id`` (its UNIQ_KEY, as SendResult.msg_id gives it): its
    ``Pub``, ``SubBefore``, ``SubAfter`` and ``EndTransaction`` records, oldest first.

    Args:
        msg_id: the traced message's id.
        namesrv_addr: NameServers, used when neither ``client_config`` nor ``instance`` is given.
        client_config: connection settings (credentials for a cluster with ACL...).
        instance: a started or unstarted ClientInstance to use (it is not shut down here).
        trace_topic: the trace topic; default ``RMQ_SYS_TRACE_TOPIC``.
        max_num: trace messages asked of each broker.
        timeout_ms: each request's timeout.

    Raises:
        NoRouteError: no NameServer knows the trace topic.
        FastMQError: a broker could not be asked (the brokers that answered are not enough to
            say the trace is complete).
    """
    topic = trace_topic or DEFAULT_TRACE_TOPIC
    own = instance is None
    inst = instance or ClientInstance(client_config or ClientConfig(namesrv_addr=namesrv_addr))
    try:
        route = await inst.fetch_route(topic, timeout_ms / 1000)
        if route is None:
            raise NoRouteError(f"No route info of this topic: {topic}")
        found: list[MessageExt] = []
        end = int(time.time() * 1000) + 60_000
        for bd in route.broker_datas:
            addr = bd.select_broker_addr()
            if addr is None:
                continue
            found.extend(await inst.api.query_message(addr, topic, msg_id, max_num, 0, end, timeout_ms / 1000))
        return trace_records(msg_id, found)
    finally:
        if own:
            await inst.shutdown()
