"""JSON bodies of the NameServer and admin protocol, with RocketMQ's field names.

We write standard JSON. We read standard JSON and also what a Java NameServer's fastjson writes for
clients older than 4.9.4: maps with integer keys left unquoted (``{"brokerAddrs":{0:"ip:port"}}``).
:func:`loads_lenient` quotes such keys before parsing, touching only text outside string literals,
in one linear pass. Old spellings are read too (``topicSynFlag`` beside ``topicSysFlag``).

Every ``from_json`` / ``from_obj`` raises :class:`RemotingCommandError` naming what is wrong.
"""
from __future__ import annotations

import json
import random
import re
import struct
import time
import zlib
from dataclasses import dataclass, field
from typing import Any, Iterable, Self

from ..errors import RemotingCommandError
from .java_number import JavaNumberFormatError, json_int, json_long
from .message_queue import MessageQueue

__all__ = ["loads_lenient", "loads_mq_keyed", "mq_map_json", "compact_json", "dumps", "DataVersion", "TopicConfig", "QueueData", "BrokerData", "TopicRouteData",
           "RegisterBrokerBody", "ClusterInfo", "KVTable", "TopicList", "MASTER_ID", "TOPIC_FILTER_TYPES",
           "MAX_INFLATED_REGISTER_BODY", "SubscriptionGroupConfig"]

MASTER_ID = 0
_JAVA_INT = re.compile(r"[+-]?[0-9]{1,10}")  # what Integer.parseInt takes (range checked by int32 users)
#: TopicFilterType's constants: a compressed registration naming anything else fails in Java (valueOf).
TOPIC_FILTER_TYPES = frozenset({"SINGLE_TAG", "MULTI_TAG"})
#: Upper bound on an inflated compressed registration. A 16 MiB frame of zeros would inflate to
#: about 16 GiB; a real broker needs ~40 bytes per topic, so 256 MiB is ~6 million topics.
MAX_INFLATED_REGISTER_BODY = 256 * 1024 * 1024

# One token per match, and every character belongs to exactly one token, so a scan is linear:
#   1. a string literal, unrolled so it never backtracks; an unterminated one runs to the end of the
#      text (otherwise every later quote would start a new scan to the end: quadratic);
#   2. a bare integer key after "{" or "," (the fastjson form), with possessive quantifiers;
#   3. a run of anything else, or a lone "{" / "," that did not start a key.
_TOKEN = re.compile(r'"[^"\\]*+(?:\\.[^"\\]*+)*+(?:"|\\?\Z)'
                    r'|([{,]\s*+)(-?\d++)(\s*+:)'
                    r'|[^"{,]++|[{,]', re.S)


def _quote_keys(text: str) -> str:
    out: list[str] = []
    for m in _TOKEN.finditer(text):
        if m.group(2) is None:
            out.append(m.group(0))
        else:
            out.append(f'{m.group(1)}"{m.group(2)}"{m.group(3)}')
    return "".join(out)


def _parse(text: str) -> Any:
    try:
        return json.loads(text)
    except RecursionError:
        raise RemotingCommandError("body JSON nests too deeply") from None


def loads_lenient(data: bytes | bytearray | memoryview | str) -> Any:
    """Parse a JSON body, also accepting fastjson's unquoted integer map keys.

    Args:
        data: UTF-8 bytes or text; surrounding whitespace (jsoncpp's trailing newline) is fine.
    Returns:
        The parsed value (dicts, lists, str, int, float, bool, None).
    Raises:
        RemotingCommandError: not UTF-8, not JSON even after quoting bare integer keys, or too deep.
    """
    if isinstance(data, (bytes, bytearray, memoryview)):
        try:
            text = bytes(data).decode("utf-8")
        except UnicodeDecodeError as exc:
            raise RemotingCommandError(f"body is not valid UTF-8: {exc.reason} at byte {exc.start}") from None
    elif isinstance(data, str):
        text = data
    else:
        raise RemotingCommandError(f"body must be bytes or str, not {type(data).__name__}")
    try:
        return _parse(text)
    except ValueError:
        pass  # standard JSON failed: try the fastjson form, the rare case, only then
    try:
        return _parse(_quote_keys(text))
    except ValueError as exc:
        raise RemotingCommandError(f"body is not valid JSON: {exc}") from None


_WS = re.compile(r"[ \t\n\r]+")
_BARE_KEY = re.compile(r"-?[0-9]+")
_SCALARS = json.JSONDecoder()
_MAX_DEPTH = 200


def loads_mq_keyed(data: bytes | bytearray | memoryview | str) -> Any:
    """Parse a body holding fastjson's ``Map<MessageQueue, X>``, whose keys are the queue objects
    themselves (``{{"brokerName":"b","queueId":0,"topic":"T"}:...}``); such keys come back as
    :class:`MessageQueue`, and bare integer keys as strings (as :func:`loads_lenient` reads them).

    Raises:
        RemotingCommandError: not UTF-8, not that JSON, a key object that is not a queue, or
            nesting past 200 levels.
    """
    try:
        text = bytes(data).decode("utf-8") if isinstance(data, (bytes, bytearray, memoryview)) else data
        value, end = _mq_value(text, 0, 0)
        if _skip_ws(text, end) != len(text):
            raise ValueError(f"extra data at {end}")
    except ValueError as exc:
        raise RemotingCommandError(f"body is not valid JSON: {exc}") from None
    return value


def _skip_ws(s: str, i: int) -> int:
    m = _WS.match(s, i)
    return i if m is None else m.end()


def _mq_value(s: str, i: int, depth: int) -> tuple[Any, int]:
    i = _skip_ws(s, i)
    c = s[i:i + 1]
    if depth > _MAX_DEPTH:
        raise ValueError(f"nests deeper than {_MAX_DEPTH} levels")
    if c == "{":
        return _mq_object(s, i + 1, depth + 1)
    if c == "[":
        out: list[Any] = []
        i = _skip_ws(s, i + 1)
        if s[i:i + 1] == "]":
            return out, i + 1
        while True:
            v, i = _mq_value(s, i, depth + 1)
            out.append(v)
            ended, i = _after_item(s, i, "]")
            if ended:
                return out, i
    return _SCALARS.raw_decode(s, i)


def _after_item(s: str, i: int, close: str) -> tuple[bool, int]:
    """Past the separator after an array or object item: (whether ``close`` ended it, where next)."""
    i = _skip_ws(s, i)
    c = s[i:i + 1]
    if c != close and c != ",":
        raise ValueError(f"expected ',' or '{close}' at {i}")
    return c == close, i + 1


def _mq_object(s: str, i: int, depth: int) -> tuple[dict[Any, Any], int]:
    out: dict[Any, Any] = {}
    i = _skip_ws(s, i)
    if s[i:i + 1] == "}":
        return out, i + 1
    while True:
        i = _skip_ws(s, i)
        c = s[i:i + 1]
        key: Any
        if c == "{":
            at = i
            obj, i = _mq_object(s, i + 1, depth + 1)
            try:
                key = MessageQueue.from_obj(obj)
            except (KeyError, ValueError, TypeError) as exc:
                raise ValueError(f"the key object at {at} is not a MessageQueue: {type(exc).__name__} {exc}") from None
        elif c == '"':
            key, i = _SCALARS.raw_decode(s, i)
        else:
            m = _BARE_KEY.match(s, i)
            if m is None:
                raise ValueError(f"expected a key at {i}")
            key, i = m.group(), m.end()
        i = _skip_ws(s, i)
        if s[i:i + 1] != ":":
            raise ValueError(f"expected ':' at {i}")
        out[key], i = _mq_value(s, i + 1, depth)
        ended, i = _after_item(s, i, "}")
        if ended:
            return out, i


def mq_map_json(entries: Iterable[tuple[MessageQueue, Any]]) -> str:
    """fastjson's text of a ``Map<MessageQueue, X>`` (each value already JSON-ready), in the order
    given: the queue object itself is the key, which standard JSON cannot say."""
    return "{" + ",".join(f"{compact_json(mq.to_obj())}:{compact_json(v)}" for mq, v in entries) + "}"


def compact_json(obj: Any) -> str:
    """Compact standard JSON text (no spaces, non-ASCII kept), as fastjson writes it."""
    return json.dumps(obj, separators=(",", ":"), ensure_ascii=False)


def dumps(obj: Any) -> bytes:
    """Compact standard JSON, UTF-8, keys as given (the classes below write them sorted, like fastjson)."""
    return compact_json(obj).encode("utf-8")


def _obj(obj: Any, what: str) -> dict[str, Any]:
    if not isinstance(obj, dict):
        raise RemotingCommandError(f"{what} must be a JSON object, not {type(obj).__name__}")
    return obj


def _opt_obj(o: dict[str, Any], key: str, what: str) -> dict[str, Any]:
    v = o.get(key)
    return {} if v is None else _obj(v, f"{what}.{key}")


def _str_list(v: Any, what: str) -> list[str]:
    if v is None:
        return []
    if not isinstance(v, list) or not all(isinstance(a, str) for a in v):
        raise RemotingCommandError(f"{what} must be a list of strings")
    return list(v)


def _int(obj: dict[str, Any], key: str, what: str, default: int | None = None, *, long: bool = False) -> int:
    """``obj[key]`` as fastjson binds it to a Java ``int`` field (``long``: a ``long`` one)."""
    v = obj.get(key)
    if v is None:
        if default is None:
            raise RemotingCommandError(f"{what}.{key} is missing")
        return default
    if isinstance(v, bool):
        raise RemotingCommandError(f"{what}.{key} must be a number, not a boolean")
    try:
        return json_long(v) if long else json_int(v)
    except JavaNumberFormatError as exc:
        raise RemotingCommandError(f"{what}.{key} must be a number (a Java {'long' if long else 'int'}): "
                                   f"{exc.java_text}") from None


def _str(obj: dict[str, Any], key: str, what: str, default: str | None = None) -> str:
    v = obj.get(key)
    if v is None:
        if default is None:
            raise RemotingCommandError(f"{what}.{key} is missing")
        return default
    if not isinstance(v, str):
        raise RemotingCommandError(f"{what}.{key} must be a string, not {type(v).__name__}")
    return v


def _bool(obj: dict[str, Any], key: str, what: str, default: bool = False) -> bool:
    v = obj.get(key)
    if v is None:
        return default
    if isinstance(v, bool):
        return v
    if isinstance(v, str) and v.lower() in ("true", "false"):
        return v.lower() == "true"
    raise RemotingCommandError(f"{what}.{key} must be a boolean, not {v!r}")


class _Json:
    """to_json / from_json on top of each class's to_obj / from_obj."""

    def to_obj(self) -> Any:
        raise NotImplementedError

    @classmethod
    def from_obj(cls, obj: Any) -> Self:
        raise NotImplementedError

    def to_json(self) -> bytes:
        """Standard JSON, UTF-8, RocketMQ's field names."""
        return dumps(self.to_obj())

    @classmethod
    def from_json(cls, data: bytes | bytearray | memoryview | str) -> Self:
        """Parse standard or fastjson-lenient JSON; raises RemotingCommandError on bad input."""
        return cls.from_obj(loads_lenient(data))


@dataclass
class DataVersion(_Json):
    """A broker's topic-table version: the NameServer compares it to skip unchanged registrations."""

    timestamp: int = field(default_factory=lambda: int(time.time() * 1000))
    counter: int = 0

    def next_version(self) -> None:
        self.timestamp = int(time.time() * 1000)
        self.counter += 1

    def to_obj(self) -> dict[str, Any]:
        return {"counter": self.counter, "timestamp": self.timestamp}

    @classmethod
    def from_obj(cls, obj: Any) -> Self:
        o = _obj(obj, "dataVersion")
        return cls(timestamp=_int(o, "timestamp", "dataVersion", 0, long=True),
                   counter=_int(o, "counter", "dataVersion", 0, long=True))


@dataclass
class TopicConfig(_Json):
    topic_name: str
    read_queue_nums: int = 16
    write_queue_nums: int = 16
    perm: int = 6
    topic_filter_type: str = "SINGLE_TAG"
    topic_sys_flag: int = 0
    order: bool = False

    def to_obj(self) -> dict[str, Any]:
        return {"order": self.order, "perm": self.perm, "readQueueNums": self.read_queue_nums,
                "topicFilterType": self.topic_filter_type, "topicName": self.topic_name,
                "topicSysFlag": self.topic_sys_flag, "writeQueueNums": self.write_queue_nums}

    def __str__(self) -> str:
        """Java's TopicConfig.toString, which error remarks quote."""
        from .topic import perm_to_string
        return (f"TopicConfig [topicName={self.topic_name}, readQueueNums={self.read_queue_nums}, "
                f"writeQueueNums={self.write_queue_nums}, perm={perm_to_string(self.perm)}, "
                f"topicFilterType={self.topic_filter_type}, topicSysFlag={self.topic_sys_flag}, "
                f"order={'true' if self.order else 'false'}]")

    @classmethod
    def from_obj(cls, obj: Any) -> Self:
        o = _obj(obj, "topicConfig")
        w = "topicConfig"
        return cls(topic_name=_str(o, "topicName", w), read_queue_nums=_int(o, "readQueueNums", w, 16),
                   write_queue_nums=_int(o, "writeQueueNums", w, 16), perm=_int(o, "perm", w, 6),
                   topic_filter_type=_str(o, "topicFilterType", w, "SINGLE_TAG"),
                   topic_sys_flag=_int(o, "topicSysFlag", w, 0), order=_bool(o, "order", w))

    def encode_compact(self) -> str:
        """TopicConfig.encode(): the space-separated form inside compressed registrations."""
        return f"{self.topic_name} {self.read_queue_nums} {self.write_queue_nums} {self.perm} {self.topic_filter_type}"

    @classmethod
    def decode_compact(cls, text: str) -> Self:
        """TopicConfig.decode(): exactly five space-separated fields, a known filter type."""
        parts = text.split(" ")
        if len(parts) != 5:
            raise RemotingCommandError(f"compressed topic config {text!r} does not have 5 fields")
        if not all(_JAVA_INT.fullmatch(p) for p in parts[1:4]):
            raise RemotingCommandError(f"compressed topic config {text!r} has a non-numeric field")
        if parts[4] not in TOPIC_FILTER_TYPES:
            raise RemotingCommandError(f"compressed topic config {text!r} has an unknown filter type")
        return cls(parts[0], int(parts[1]), int(parts[2]), int(parts[3]), parts[4])


@dataclass
class QueueData(_Json):
    broker_name: str
    read_queue_nums: int
    write_queue_nums: int
    perm: int
    topic_sys_flag: int = 0

    def to_obj(self) -> dict[str, Any]:
        # topicSynFlag is the field's old misspelling; 4.x clients before the fix read only it.
        return {"brokerName": self.broker_name, "perm": self.perm, "readQueueNums": self.read_queue_nums,
                "topicSynFlag": self.topic_sys_flag, "topicSysFlag": self.topic_sys_flag,
                "writeQueueNums": self.write_queue_nums}

    @classmethod
    def from_obj(cls, obj: Any) -> Self:
        o = _obj(obj, "queueData")
        w = "queueData"
        flag_key = "topicSysFlag" if o.get("topicSysFlag") is not None else "topicSynFlag"
        return cls(broker_name=_str(o, "brokerName", w), read_queue_nums=_int(o, "readQueueNums", w, 0),
                   write_queue_nums=_int(o, "writeQueueNums", w, 0), perm=_int(o, "perm", w, 0),
                   topic_sys_flag=_int(o, flag_key, w, 0))


@dataclass
class BrokerData(_Json):
    cluster: str
    broker_name: str
    broker_addrs: dict[int, str] = field(default_factory=dict)

    def select_broker_addr(self) -> str | None:
        """The master's address, else any slave's (BrokerData.selectBrokerAddr)."""
        addr = self.broker_addrs.get(MASTER_ID)
        if addr is None and self.broker_addrs:
            return random.choice(list(self.broker_addrs.values()))
        return addr

    def to_obj(self) -> dict[str, Any]:
        return {"brokerAddrs": {str(k): v for k, v in sorted(self.broker_addrs.items())},
                "brokerName": self.broker_name, "cluster": self.cluster}

    @classmethod
    def from_obj(cls, obj: Any) -> Self:
        o = _obj(obj, "brokerData")
        addrs = _opt_obj(o, "brokerAddrs", "brokerData")
        parsed: dict[int, str] = {}
        for k, v in addrs.items():
            try:
                bid = int(k)
            except ValueError:
                raise RemotingCommandError(f"brokerAddrs key {k!r} is not a broker id") from None
            if not isinstance(v, str):
                raise RemotingCommandError(f"brokerAddrs[{k}] must be an address string")
            parsed[bid] = v
        return cls(cluster=_str(o, "cluster", "brokerData", ""), broker_name=_str(o, "brokerName", "brokerData"),
                   broker_addrs=parsed)


@dataclass
class TopicRouteData(_Json):
    queue_datas: list[QueueData] = field(default_factory=list)
    broker_datas: list[BrokerData] = field(default_factory=list)
    filter_server_table: dict[str, list[str]] = field(default_factory=dict)
    order_topic_conf: str | None = None

    def to_obj(self) -> dict[str, Any]:
        obj: dict[str, Any] = {"brokerDatas": [b.to_obj() for b in self.broker_datas],
                               "filterServerTable": self.filter_server_table,
                               "queueDatas": [q.to_obj() for q in self.queue_datas]}
        if self.order_topic_conf is not None:
            obj["orderTopicConf"] = self.order_topic_conf
        return obj

    @classmethod
    def from_obj(cls, obj: Any) -> Self:
        o = _obj(obj, "topicRouteData")
        qds, bds = o.get("queueDatas"), o.get("brokerDatas")
        qds = [] if qds is None else qds
        bds = [] if bds is None else bds
        if not isinstance(qds, list) or not isinstance(bds, list):
            raise RemotingCommandError("topicRouteData.queueDatas and brokerDatas must be lists")
        fst = _opt_obj(o, "filterServerTable", "topicRouteData")
        conf = o.get("orderTopicConf")
        if conf is not None and not isinstance(conf, str):
            raise RemotingCommandError("topicRouteData.orderTopicConf must be a string")
        return cls(queue_datas=[QueueData.from_obj(q) for q in qds], broker_datas=[BrokerData.from_obj(b) for b in bds],
                   filter_server_table={k: _str_list(v, f"filterServerTable[{k}]") for k, v in fst.items()}, order_topic_conf=conf)


_I32 = struct.Struct(">i")


@dataclass
class RegisterBrokerBody(_Json):
    """What a broker sends with REGISTER_BROKER: its topics, their data version, filter servers."""

    topic_config_table: dict[str, TopicConfig] = field(default_factory=dict)
    data_version: DataVersion = field(default_factory=DataVersion)
    filter_server_list: list[str] = field(default_factory=list)

    def to_obj(self) -> dict[str, Any]:
        return {"filterServerList": self.filter_server_list,
                "topicConfigSerializeWrapper": {
                    "dataVersion": self.data_version.to_obj(),
                    "topicConfigTable": {k: v.to_obj() for k, v in self.topic_config_table.items()}}}

    @classmethod
    def from_obj(cls, obj: Any) -> Self:
        o = _obj(obj, "registerBrokerBody")
        wrapper = _opt_obj(o, "topicConfigSerializeWrapper", "registerBrokerBody")
        table = _opt_obj(wrapper, "topicConfigTable", "topicConfigSerializeWrapper")
        fsl = _str_list(o.get("filterServerList"), "filterServerList")
        dv = wrapper.get("dataVersion")
        return cls(topic_config_table={k: TopicConfig.from_obj(v) for k, v in table.items()},
                   data_version=DataVersion.from_obj(dv) if dv is not None else DataVersion(0, 0),
                   filter_server_list=list(fsl))

    def encode(self, compress: bool = False) -> bytes:
        """The body as RocketMQ 4.9 sends it: JSON, or its deflated binary form."""
        if not compress:
            return self.to_json()
        out = bytearray()
        dv = self.data_version.to_json()
        out += _I32.pack(len(dv)) + dv
        out += _I32.pack(len(self.topic_config_table))
        for tc in self.topic_config_table.values():
            b = tc.encode_compact().encode("utf-8")
            out += _I32.pack(len(b)) + b
        fsl = dumps(self.filter_server_list)
        out += _I32.pack(len(fsl)) + fsl
        return zlib.compress(bytes(out), 9)

    @classmethod
    def decode(cls, data: bytes | bytearray | memoryview, compressed: bool,
               max_inflated: int = MAX_INFLATED_REGISTER_BODY) -> Self:
        """RegisterBrokerBody.decode(data, compressed).

        Compressed layout, zlib-deflated as a whole (java.util.zip.Deflater, BEST_COMPRESSION):
        int32 BE length + DataVersion JSON; int32 BE topic count; per topic int32 BE length +
        TopicConfig.encode() text ("name read write perm filterType"); int32 BE length + the
        filter-server list as JSON. Bytes after that are ignored, as Java ignores them.

        Raises:
            RemotingCommandError: does not inflate, inflates past ``max_inflated``, is truncated,
                or carries a malformed field.
        """
        if not compressed:
            return cls.from_json(data)
        inflater = zlib.decompressobj()
        try:
            raw = inflater.decompress(data, max_inflated)
        except zlib.error as exc:
            raise RemotingCommandError(f"compressed register body does not inflate: {exc}") from None
        if inflater.unconsumed_tail:
            raise RemotingCommandError(f"compressed register body inflates past {max_inflated} bytes")
        view, pos = memoryview(raw), 0

        def take(n: int) -> bytes:
            nonlocal pos
            if n < 0 or pos + n > len(view):
                raise RemotingCommandError("compressed register body is truncated")
            chunk = bytes(view[pos:pos + n])
            pos += n
            return chunk

        def take_int() -> int:
            n: int = _I32.unpack(take(4))[0]
            return n

        dv = DataVersion.from_json(take(take_int()))
        table: dict[str, TopicConfig] = {}
        for _ in range(take_int()):
            tc = TopicConfig.decode_compact(take(take_int()).decode("utf-8", "replace"))
            table[tc.topic_name] = tc
        fsl = loads_lenient(take(take_int()))
        # Java's JSON.parseArray failing leaves the list empty; "null" stays empty here too.
        fsl = [] if not isinstance(fsl, list) else _str_list(fsl, "filterServerList")
        return cls(topic_config_table=table, data_version=dv, filter_server_list=fsl)


@dataclass
class ClusterInfo(_Json):
    broker_addr_table: dict[str, BrokerData] = field(default_factory=dict)
    cluster_addr_table: dict[str, set[str]] = field(default_factory=dict)

    def to_obj(self) -> dict[str, Any]:
        return {"brokerAddrTable": {k: v.to_obj() for k, v in self.broker_addr_table.items()},
                "clusterAddrTable": {k: sorted(v) for k, v in self.cluster_addr_table.items()}}

    @classmethod
    def from_obj(cls, obj: Any) -> Self:
        o = _obj(obj, "clusterInfo")
        bat = _opt_obj(o, "brokerAddrTable", "clusterInfo")
        cat = _opt_obj(o, "clusterAddrTable", "clusterInfo")
        return cls(broker_addr_table={k: BrokerData.from_obj(v) for k, v in bat.items()},
                   cluster_addr_table={k: set(_str_list(v, f"clusterAddrTable[{k}]")) for k, v in cat.items()})


@dataclass
class KVTable(_Json):
    table: dict[str, str] = field(default_factory=dict)

    def to_obj(self) -> dict[str, Any]:
        return {"table": self.table}

    @classmethod
    def from_obj(cls, obj: Any) -> Self:
        t = _opt_obj(_obj(obj, "kvTable"), "table", "kvTable")
        out: dict[str, str] = {}
        for k, v in t.items():
            if isinstance(v, str):
                out[k] = v
            elif isinstance(v, (int, float)) and not isinstance(v, bool):
                out[k] = str(v)  # fastjson turns a number into the String the map holds
            else:
                raise RemotingCommandError(f"kvTable.table[{k}] must be a string, not {type(v).__name__}")
        return cls(out)


@dataclass
class TopicList(_Json):
    topic_list: set[str] = field(default_factory=set)
    broker_addr: str | None = None

    def to_obj(self) -> dict[str, Any]:
        obj: dict[str, Any] = {"topicList": sorted(self.topic_list)}
        if self.broker_addr is not None:
            obj["brokerAddr"] = self.broker_addr
        return obj

    @classmethod
    def from_obj(cls, obj: Any) -> Self:
        o = _obj(obj, "topicList")
        tl = _str_list(o.get("topicList"), "topicList.topicList")
        ba = o.get("brokerAddr")
        if ba is not None and not isinstance(ba, str):
            raise RemotingCommandError("topicList.brokerAddr must be a string")
        return cls(set(tl), ba)


_GROUP_JSON_KEYS = {"group_name": "groupName", "consume_enable": "consumeEnable",
              "consume_from_min_enable": "consumeFromMinEnable", "consume_broadcast_enable": "consumeBroadcastEnable",
              "retry_queue_nums": "retryQueueNums", "retry_max_times": "retryMaxTimes", "broker_id": "brokerId",
              "which_broker_when_consume_slowly": "whichBrokerWhenConsumeSlowly",
              "notify_consumer_ids_changed_enable": "notifyConsumerIdsChangedEnable"}

_GROUP_LONG_FIELDS = {"broker_id", "which_broker_when_consume_slowly"}


@dataclass
class SubscriptionGroupConfig:
    """One group's settings (SubscriptionGroupConfig, 4.9.8's defaults): the JSON body of
    UPDATE_AND_CREATE_SUBSCRIPTIONGROUP, an entry of the broker's subscriptionGroup.json."""

    group_name: str
    consume_enable: bool = True
    consume_from_min_enable: bool = True
    consume_broadcast_enable: bool = True
    retry_queue_nums: int = 1
    retry_max_times: int = 16
    broker_id: int = 0
    which_broker_when_consume_slowly: int = 1
    notify_consumer_ids_changed_enable: bool = True

    def to_obj(self) -> dict[str, Any]:
        return {j: getattr(self, a) for a, j in _GROUP_JSON_KEYS.items()}

    @classmethod
    def from_obj(cls, obj: Any) -> "SubscriptionGroupConfig":
        if not isinstance(obj, dict) or not isinstance(obj.get("groupName"), str):
            raise RemotingCommandError("subscription group config needs a string groupName")
        kw: dict[str, Any] = {}
        for attr, key in _GROUP_JSON_KEYS.items():
            if key in obj and obj[key] is not None:
                default = getattr(cls, attr, None)
                v = obj[key]
                if isinstance(default, bool) and not isinstance(v, bool):
                    raise RemotingCommandError(f"subscription group field {key} must be a boolean")
                if isinstance(default, int) and not isinstance(default, bool):
                    # as fastjson binds the Java field: brokerId and whichBrokerWhenConsumeSlowly are longs
                    java_long = attr in _GROUP_LONG_FIELDS
                    try:
                        v = json_long(v) if java_long else json_int(v)
                    except JavaNumberFormatError as exc:
                        raise RemotingCommandError(f"subscription group field {key} must be an integer (a Java "
                                                   f"{'long' if java_long else 'int'}): {exc.java_text}") from None
                kw[attr] = v
        return cls(**kw)

    @classmethod
    def from_json(cls, data: bytes | str) -> "SubscriptionGroupConfig":
        return cls.from_obj(loads_lenient(data))
