"""The IPv4 address other hosts reach this process at (RemotingUtil.getLocalAddress's intent).

Brokers stamp it into STOREHOST and register it; clients put it in their client id and UNIQ_KEY.
"""
from __future__ import annotations

import socket

__all__ = ["local_address"]


def local_address() -> str:
    """The outbound interface's IPv4 address, or loopback when there is no route.

    A UDP "connect" picks the interface without sending anything; with no route (a sandbox) we
    fall back to loopback, which is what single-host setups use anyway.
    """
    try:
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
            s.connect(("10.255.255.255", 1))
            ip: str = s.getsockname()[0]
            if ip and not ip.startswith("0."):
                return ip
    except OSError:
        pass
    return "127.0.0.1"
