"""Issue 31: the address brokers and clients advertise follows 4.9.8's getLocalAddress (interfaces
first), so a host with no default route still finds its reachable address."""
from __future__ import annotations

from fastmq.broker.controller import loopback_warning
from fastmq.remoting import address
from fastmq.remoting.address import choose_address, interface_addresses


def _no_bridge(name: str) -> bool:
    return name.startswith("br")


def test_no_default_route_takes_the_interface_address() -> None:
    ifs = [("lo", "127.0.0.1"), ("veth0", "10.200.0.3")]
    assert choose_address(ifs, None, _no_bridge) == "10.200.0.3"


def test_bridges_loopback_and_192_168_are_skipped_like_4_9_8() -> None:
    ifs = [("lo", "127.0.0.1"), ("br-fmq", "10.200.0.1"), ("wlan0", "192.168.1.4"), ("eth1", "172.16.0.9")]
    assert choose_address(ifs, None, _no_bridge) == "172.16.0.9"


def test_only_192_168_takes_the_last_one() -> None:
    ifs = [("eth0", "192.168.1.4"), ("eth1", "192.168.7.2")]
    assert choose_address(ifs, None, _no_bridge) == "192.168.7.2"


def test_the_route_breaks_a_tie_but_does_not_override_the_rule() -> None:
    ifs = [("eth0", "10.0.0.5"), ("eth1", "172.16.0.9"), ("wlan0", "192.168.1.4")]
    assert choose_address(ifs, "172.16.0.9", _no_bridge) == "172.16.0.9"
    assert choose_address(ifs, "192.168.1.4", _no_bridge) == "10.0.0.5"   # rule first


def test_nothing_but_loopback_falls_back_to_the_route_then_loopback() -> None:
    assert choose_address([("lo", "127.0.0.1")], None, _no_bridge) == "127.0.0.1"
    assert choose_address([], "10.1.2.3", _no_bridge) == "10.1.2.3"


def test_local_address_reads_the_interfaces(monkeypatch) -> None:  # type: ignore[no-untyped-def]
    monkeypatch.setattr(address, "interface_addresses", lambda: [("lo", "127.0.0.1"), ("veth1", "10.200.0.4")])
    monkeypatch.setattr(address, "_route_address", lambda: None)
    monkeypatch.setattr(address, "_is_bridge", lambda name: False)
    assert address.local_address() == "10.200.0.4"


def test_this_host_lists_loopback() -> None:
    assert ("lo", "127.0.0.1") in interface_addresses()


def test_broker_warns_once_when_advertising_loopback_to_a_remote_namesrv() -> None:
    line = loopback_warning("127.0.0.1", ["10.200.0.1:9876"])
    assert line is not None and "brokerIP1" in line and "10.200.0.1:9876" in line
    assert loopback_warning("127.0.0.1", ["127.0.0.1:9876", "localhost:9877"]) is None
    assert loopback_warning("10.200.0.1", ["10.200.0.1:9876"]) is None
