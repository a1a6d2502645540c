"""The broker's side of the NameServer protocol: register, heartbeat, unregister, find the NameServers.

RocketMQ's AP design: the broker registers with every NameServer on its own (they never talk to
each other), in parallel, waiting at most ``registerBrokerTimeoutMills`` for all of them — a slow or
dead NameServer must not hold up the others. Every ``registerNameServerPeriod`` (30 s) it registers
again; unless ``forceRegister`` is set it first asks each NameServer for the data version it holds
(QUERY_DATA_VERSION) and skips the full registration when none of them is behind.

The NameServer list comes from ``namesrvAddr`` (``;``-separated), or — with
``fetchNamesrvAddrByAddressServer`` — from an HTTP address server polled every two minutes
(``http://<rmqAddressServerDomain>:8080/rocketmq/<rmqAddressServerSubGroup>``, RocketMQ's
TopAddressing).
"""
from __future__ import annotations

import asyncio
import logging
import zlib
from dataclasses import dataclass, replace
from typing import Callable

from ..errors import FastMQError
from ..protocol.bodies import DataVersion, RegisterBrokerBody, TopicConfig
from ..protocol.codes import RequestCode, ResponseCode
from ..protocol.command import create_request, ext_bool, ext_str
from ..remoting import RemotingClient
from .config import PERM_READ, PERM_WRITE, BrokerConfig

__all__ = ["NamesrvLink", "RegisterResult", "parse_namesrv_addrs", "fetch_namesrv_addr"]

log = logging.getLogger("fastmq.broker")


@dataclass
class RegisterResult:
    namesrv: str
    ha_server_addr: str | None
    master_addr: str | None


def parse_namesrv_addrs(text: str | None) -> list[str]:
    """``"a:9876;b:9876"`` -> ``["a:9876", "b:9876"]``; blanks dropped."""
    return [a.strip() for a in (text or "").split(";") if a.strip()]


async def fetch_namesrv_addr(domain: str, subgroup: str, timeout: float = 3.0, port: int = 8080) -> str | None:
    """GET the NameServer list from an address server; None when it cannot be had.

    A tiny HTTP/1.0 client rather than a dependency: one GET of a short text body.
    """
    path = f"/rocketmq/{subgroup}"
    try:
        reader, writer = await asyncio.wait_for(asyncio.open_connection(domain, port), timeout)
    except (OSError, asyncio.TimeoutError) as exc:
        log.warning("fetch name server address from %s:%d failed: %s", domain, port, exc)
        return None
    try:
        writer.write(f"GET {path} HTTP/1.0\r\nHost: {domain}\r\nConnection: close\r\n\r\n".encode("ascii"))
        raw = await asyncio.wait_for(reader.read(1 << 16), timeout)
    except (OSError, asyncio.TimeoutError) as exc:
        log.warning("fetch name server address from %s:%d failed: %s", domain, port, exc)
        return None
    finally:
        writer.close()
    head, _, body = raw.partition(b"\r\n\r\n")
    status = head.split(b"\r\n", 1)[0].split()
    if len(status) < 2 or status[1] != b"200":
        log.warning("address server %s answered %r", domain, head[:64])
        return None
    text = body.decode("utf-8", "replace").strip()
    return text or None


class NamesrvLink:
    """Registration with every NameServer. ``topics`` gives a snapshot (table, data version)."""

    def __init__(self, cfg: BrokerConfig, client: RemotingClient,
                 topics: Callable[[], tuple[dict[str, TopicConfig], DataVersion]], ha_server_addr: str) -> None:
        self.cfg = cfg
        self.client = client
        self.topics = topics
        self.ha_server_addr = ha_server_addr
        self.namesrv_addrs = parse_namesrv_addrs(cfg.namesrvAddr)
        self.master_addr: str | None = None
        self._timeout = cfg.registerBrokerTimeoutMills / 1000

    def update_namesrv_addrs(self, addrs: list[str]) -> None:
        if addrs != self.namesrv_addrs:
            log.info("name server address changed, old: %s new: %s", self.namesrv_addrs, addrs)
            self.namesrv_addrs = addrs
            self.client.set_namesrv_addrs(addrs)

    async def poll_address_server(self) -> None:
        text = await fetch_namesrv_addr(self.cfg.rmqAddressServerDomain, self.cfg.rmqAddressServerSubGroup)
        if text:
            self.update_namesrv_addrs(parse_namesrv_addrs(text))

    def _header(self) -> dict[str, object]:
        c = self.cfg
        return {"brokerAddr": c.broker_addr, "brokerId": c.brokerId, "brokerName": c.brokerName,
                "clusterName": c.brokerClusterName}

    async def _one(self, addr: str, header: dict[str, object], body: bytes) -> RegisterResult | None:
        try:
            resp = await self.client.invoke(addr, create_request(RequestCode.REGISTER_BROKER, header, body),
                                            self._timeout)
        except FastMQError as exc:
            log.warning("registerBroker Exception, %s: %s", addr, exc)
            return None
        if resp.code == ResponseCode.NO_PERMISSION:
            # Another live broker holds our brokerName and brokerId (the remark names both
            # addresses). Exiting would keep a replacement down while the NameServer has not yet
            # seen a dead holder go, so this broker stays up, unrouted by that NameServer, and
            # tries again every registerNameServerPeriod.
            log.error("registerBroker to name server %s refused, this broker is not routed there; retrying every "
                      "%d ms: %s", addr, self.cfg.registerNameServerPeriod, resp.remark)
            return None
        if resp.code == ResponseCode.SYSTEM_ERROR and "AclException" in (resp.remark or ""):
            # a NameServer with aclEnable: this broker stays up, unrouted there, and tries again
            log.error("registerBroker to name server %s refused by its ACL, this broker is not routed there; "
                      "innerClientAuthenticationCredentials must name an admin account of its ACL file: %s",
                      addr, resp.remark)
            return None
        if resp.code != ResponseCode.SUCCESS:
            log.warning("registerBroker to %s refused: %s %s", addr, resp.code, resp.remark)
            return None
        log.info("register broker[%d]to name server %s OK", self.cfg.brokerId, addr)
        return RegisterResult(addr, ext_str(resp, "haServerAddr"), ext_str(resp, "masterAddr"))

    async def register_all(self, force: bool = True, topics: dict[str, TopicConfig] | None = None
                           ) -> list[RegisterResult]:
        """Register with every NameServer in parallel; returns those that answered in time."""
        if not self.namesrv_addrs:
            return []
        table, version = self.topics()
        if topics is not None:  # a single new topic: send only it, as registerIncrementBrokerData does
            table = topics
        if not force and not await self.need_register(version):
            return []
        perm = self.cfg.brokerPermission
        if perm & (PERM_READ | PERM_WRITE) != PERM_READ | PERM_WRITE:
            # A broker that may not be read or written says so in every topic's route, so clients
            # keep away from it: 4.9's registerBrokerAll sends the broker's permission as each
            # topic's (replacing, not masking, the topic's own).
            table = {k: replace(tc, perm=perm) for k, tc in table.items()}
        body = RegisterBrokerBody(topic_config_table=table, data_version=version).encode(self.cfg.compressedRegister)
        # UtilAll.crc32: the CRC32 with its top bit cleared, which is what a Java NameServer compares.
        header = {**self._header(), "haServerAddr": self.ha_server_addr,
                  "compressed": self.cfg.compressedRegister, "bodyCrc32": zlib.crc32(body) & 0x7FFFFFFF}
        tasks = [asyncio.ensure_future(self._one(a, header, body)) for a in self.namesrv_addrs]
        done, pending = await asyncio.wait(tasks, timeout=self._timeout)
        for t in pending:
            t.cancel()
        results = [r for t in done if (r := t.result()) is not None]
        for r in results:
            if r.master_addr:
                self.master_addr = r.master_addr
        return results

    async def need_register(self, version: DataVersion) -> bool:
        """True when some NameServer's copy of our data version differs, or cannot be read."""
        async def ask(addr: str) -> bool:
            try:
                resp = await self.client.invoke(
                    addr, create_request(RequestCode.QUERY_DATA_VERSION, self._header(), version.to_json()),
                    self._timeout)
            except FastMQError as exc:
                log.error("Query data version from name server %s Exception, %s", addr, exc)
                return True
            if resp.code != ResponseCode.SUCCESS:
                return False
            changed = ext_bool(resp, "changed", False)
            if resp.body:
                try:
                    changed = changed or DataVersion.from_json(resp.body) != version
                except ValueError:
                    changed = True
            return changed
        answers = await asyncio.gather(*(ask(a) for a in self.namesrv_addrs))
        return any(answers)

    async def unregister_all(self) -> None:
        """UNREGISTER_BROKER to every NameServer (at shutdown), bounded by the register timeout."""
        if not self.namesrv_addrs:
            return
        header = self._header()

        async def one(addr: str) -> None:
            try:
                await self.client.invoke(addr, create_request(RequestCode.UNREGISTER_BROKER, header), self._timeout)
                log.info("unregisterBroker OK, NamesrvAddr: %s", addr)
            except FastMQError as exc:
                log.warning("unregisterBroker Exception, %s: %s", addr, exc)
        await asyncio.wait([asyncio.ensure_future(one(a)) for a in self.namesrv_addrs], timeout=self._timeout)
