"""The IPv4 address other hosts reach this process at (RemotingUtil.getLocalAddress, 4.9.8).

Brokers stamp it into STOREHOST and register it; clients put it in their client id and UNIQ_KEY.

4.9.8 walks the network interfaces, skips Linux bridges and loopback, and takes the first IPv4
address not starting with ``127.0`` or ``192.168`` (else the last IPv4 address it saw). We follow
that rule so a host with no default route (a cluster on a private bridge) still advertises its
reachable address instead of loopback; the default route only breaks a tie between candidates.
"""
from __future__ import annotations

import array
import fcntl
import os
import socket
import struct
from collections.abc import Callable, Iterable

__all__ = ["local_address", "choose_address", "interface_addresses", "is_loopback"]

_SIOCGIFCONF = 0x8912
_IFREQ_SIZE = 40          # struct ifreq on 64-bit Linux: 16-byte name + 24-byte union
_MAX_IFREQS = 256


def is_loopback(ip: str) -> bool:
    return ip.startswith("127.")


def interface_addresses() -> list[tuple[str, str]]:
    """(interface name, IPv4 address) for every configured address, in kernel order.

    SIOCGIFCONF needs no third-party package and lists every IPv4 address of every interface that
    is up; an empty list (non-Linux, a failure) leaves the route-based guess.
    """
    try:
        buf = array.array("B", b"\0" * (_IFREQ_SIZE * _MAX_IFREQS))
        addr, _ = buf.buffer_info()
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
            out = fcntl.ioctl(s.fileno(), _SIOCGIFCONF, struct.pack("iL", len(buf), addr))
        used = struct.unpack("iL", out)[0]
    except (OSError, ValueError, struct.error):
        return []
    raw = buf.tobytes()[:used]
    result: list[tuple[str, str]] = []
    for off in range(0, used - _IFREQ_SIZE + 1, _IFREQ_SIZE):
        name = raw[off:off + 16].split(b"\0", 1)[0].decode(errors="replace")
        result.append((name, socket.inet_ntoa(raw[off + 20:off + 24])))
    return result


def _is_bridge(name: str) -> bool:
    # 4.9.8's isBridge: a Linux bridge has /sys/class/net/<name>/bridge
    return os.path.exists(f"/sys/class/net/{name}/bridge")


def _route_address() -> str | None:
    """The default route's source address, or None with no route (a UDP connect sends nothing)."""
    try:
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
            s.connect(("10.255.255.255", 1))
            ip: str = s.getsockname()[0]
    except OSError:
        return None
    return ip if ip and not ip.startswith("0.") else None


def choose_address(interfaces: Iterable[tuple[str, str]], route_ip: str | None,
                   is_bridge: Callable[[str], bool] = _is_bridge) -> str:
    """4.9.8's rule over a given interface list; ``route_ip`` wins only among equal candidates."""
    ipv4 = [ip for name, ip in interfaces if not is_bridge(name) and not is_loopback(ip)]
    preferred = [ip for ip in ipv4 if not ip.startswith("192.168")]
    if preferred:
        return route_ip if route_ip in preferred else preferred[0]
    if ipv4:
        return route_ip if route_ip in ipv4 else ipv4[-1]
    # nothing but loopback and bridges: the route's guess, else loopback (single-host setups)
    return route_ip or "127.0.0.1"


def local_address() -> str:
    return choose_address(interface_addresses(), _route_address())
