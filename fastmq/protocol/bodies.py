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
from typing import Any

from ..errors import RemotingCommandError

__all__ = ["loads_lenient", "dumps", "DataVersion", "TopicConfig", "QueueData", "BrokerData", "TopicRouteData",
           "RegisterBrokerBody", "ClusterInfo", "KVTable", "TopicList", "MASTER_ID"]

MASTER_ID = 0

# A JSON string literal, or a bare integer key after "{" or "," (the fastjson form).
_TOKEN = re.compile(r'"(?:[^"\\]|\\.)*"|([{,]\s*)(-?\d+)(\s*:)', re.S)


def _quote_keys(m: re.Match[str]) -> str:
    if m.group(2) is None:
        return m.group(0)  # a string literal: left as it is
    return f'{m.group(1)}"{m.group(2)}"{m.group(3)}'


def loads_lenient(data: bytes | bytearray | memoryview | str) -> Any:
    """Parse JSON, also accepting fastjson's unquoted integer map keys."""
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
        return json.loads(text)
    except ValueError:
        pass
    try:
        return json.loads(_TOKEN.sub(_quote_keys, text))
    except ValueError as exc:
        raise RemotingCommandError(f"body is not valid JSON: {exc}") from None
    except RecursionError:
        raise RemotingCommandError("body JSON nests too deeply") from None


def dumps(obj: Any) -> bytes:
    """Compact standard JSON, UTF-8."""
    return json.dumps(obj, separators=(",", ":"), ensure_ascii=False).encode("utf-8")


def _obj(obj: Any, what: str) -> dict[str, Any]:
    if not isinstance(obj, dict):
        raise RemotingCommandError(f"{what} must be a JSON object, not {type(obj).__name__}")
    return obj


def _int(obj: dict[str, Any], key: str, what: str, default: int | None = None) -> int:
    v = obj.get(key)
    if v is None:
        if default is None:
            raise RemotingCommandError(f"{what}.{key} is missing")
        return default
    if isinstance(v, bool):
        raise RemotingCommandError(f"{what}.{key} must be a number, not a boolean")
    if isinstance(v, int):
        return v
    if isinstance(v, str):
        try:
            return int(v.strip())
        except ValueError:
            pass
    raise RemotingCommandError(f"{what}.{key} must be a number, not {v!r}")


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
    def from_obj(cls, obj: Any) -> Any:
        raise NotImplementedError

    def to_json(self) -> bytes:
        return dumps(self.to_obj())

    @classmethod
    def from_json(cls, data: bytes | bytearray | memoryview | str) -> Any:
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
    def from_obj(cls, obj: Any) -> "DataVersion":
        o = _obj(obj, "dataVersion")
        return cls(timestamp=_int(o, "timestamp", "dataVersion", 0), counter=_int(o, "counter", "dataVersion", 0))


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

    @classmethod
    def from_obj(cls, obj: Any) -> "TopicConfig":
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
    def decode_compact(cls, text: str) -> "TopicConfig":
        parts = text.split(" ")
        if len(parts) != 5:
            raise RemotingCommandError(f"compressed topic config {text!r} does not have 5 fields")
        try:
            return cls(parts[0], int(parts[1]), int(parts[2]), int(parts[3]), parts[4])
        except ValueError:
            raise RemotingCommandError(f"compressed topic config {text!r} has a non-numeric field") from None


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
    def from_obj(cls, obj: Any) -> "QueueData":
        o = _obj(obj, "queueData")
        w = "queueData"
        flag = o.get("topicSysFlag", o.get("topicSynFlag", 0))
        return cls(broker_name=_str(o, "brokerName", w), read_queue_nums=_int(o, "readQueueNums", w, 0),
                   write_queue_nums=_int(o, "writeQueueNums", w, 0), perm=_int(o, "perm", w, 0),
                   topic_sys_flag=_int({"f": flag}, "f", w, 0))


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
    def from_obj(cls, obj: Any) -> "BrokerData":
        o = _obj(obj, "brokerData")
        addrs = _obj(o.get("brokerAddrs") or {}, "brokerData.brokerAddrs")
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
    def from_obj(cls, obj: Any) -> "TopicRouteData":
        o = _obj(obj, "topicRouteData")
        qds, bds = o.get("queueDatas"), o.get("brokerDatas")
        qds = [] if qds is None else qds
        bds = [] if bds is None else bds
        if not isinstance(qds, list) or not isinstance(bds, list):
            raise RemotingCommandError("topicRouteData.queueDatas and brokerDatas must be lists")
        fst = _obj(o.get("filterServerTable") or {}, "topicRouteData.filterServerTable")
        conf = o.get("orderTopicConf")
        if conf is not None and not isinstance(conf, str):
            raise RemotingCommandError("topicRouteData.orderTopicConf must be a string")
        return cls(queue_datas=[QueueData.from_obj(q) for q in qds], broker_datas=[BrokerData.from_obj(b) for b in bds],
                   filter_server_table={str(k): list(v) for k, v in fst.items()}, order_topic_conf=conf)


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
    def from_obj(cls, obj: Any) -> "RegisterBrokerBody":
        o = _obj(obj, "registerBrokerBody")
        wrapper = _obj(o.get("topicConfigSerializeWrapper") or {}, "topicConfigSerializeWrapper")
        table = _obj(wrapper.get("topicConfigTable") or {}, "topicConfigTable")
        fsl = o.get("filterServerList") or []
        if not isinstance(fsl, list) or not all(isinstance(a, str) for a in fsl):
            raise RemotingCommandError("filterServerList must be a list of addresses")
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
    def decode(cls, data: bytes, compressed: bool) -> "RegisterBrokerBody":
        if not compressed:
            return cls.from_json(data)
        try:
            raw = zlib.decompress(data)
        except zlib.error as exc:
            raise RemotingCommandError(f"compressed register body does not inflate: {exc}") from None
        view, pos = memoryview(raw), 0

        def take(n: int) -> bytes:
            nonlocal pos
            if n < 0 or pos + n > len(view):
                raise RemotingCommandError("compressed register body is truncated")
            chunk = bytes(view[pos:pos + n])
            pos += n
            return chunk

        def take_int() -> int:
            return _I32.unpack(take(4))[0]

        dv = DataVersion.from_json(take(take_int()))
        table: dict[str, TopicConfig] = {}
        for _ in range(take_int()):
            tc = TopicConfig.decode_compact(take(take_int()).decode("utf-8", "replace"))
            table[tc.topic_name] = tc
        fsl = loads_lenient(take(take_int()))
        if not isinstance(fsl, list):
            fsl = []
        return cls(topic_config_table=table, data_version=dv, filter_server_list=[str(a) for a in fsl])


@dataclass
class ClusterInfo(_Json):
    broker_addr_table: dict[str, BrokerData] = field(default_factory=dict)
    cluster_addr_table: dict[str, set[str]] = field(default_factory=dict)

    def to_obj(self) -> dict[str, Any]:
        return {"brokerAddrTable": {k: v.to_obj() for k, v in self.broker_addr_table.items()},
                "clusterAddrTable": {k: sorted(v) for k, v in self.cluster_addr_table.items()}}

    @classmethod
    def from_obj(cls, obj: Any) -> "ClusterInfo":
        o = _obj(obj, "clusterInfo")
        bat = _obj(o.get("brokerAddrTable") or {}, "clusterInfo.brokerAddrTable")
        cat = _obj(o.get("clusterAddrTable") or {}, "clusterInfo.clusterAddrTable")
        return cls(broker_addr_table={k: BrokerData.from_obj(v) for k, v in bat.items()},
                   cluster_addr_table={k: set(v) for k, v in cat.items()})


@dataclass
class KVTable(_Json):
    table: dict[str, str] = field(default_factory=dict)

    def to_obj(self) -> dict[str, Any]:
        return {"table": self.table}

    @classmethod
    def from_obj(cls, obj: Any) -> "KVTable":
        t = _obj(_obj(obj, "kvTable").get("table") or {}, "kvTable.table")
        return cls({str(k): str(v) for k, v in t.items()})


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
    def from_obj(cls, obj: Any) -> "TopicList":
        o = _obj(obj, "topicList")
        tl = o.get("topicList") or []
        if not isinstance(tl, list):
            raise RemotingCommandError("topicList.topicList must be a list")
        ba = o.get("brokerAddr")
        return cls({str(t) for t in tl}, ba if isinstance(ba, str) else None)
