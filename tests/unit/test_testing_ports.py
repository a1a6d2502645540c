"""fastmq.testing's port picks: a port handed out is not handed out again while it may still be
waiting for the server it was picked for."""
from __future__ import annotations

import socket

from fastmq.testing import free_port, free_ports


def test_picks_one_after_another_never_repeat() -> None:
    picked = [free_port() for _ in range(200)] + free_ports(3) + free_ports(3)
    assert len(set(picked)) == len(picked)


def test_a_pick_is_bindable_on_loopback() -> None:
    (port,) = free_ports(1)
    with socket.socket() as s:
        s.bind(("127.0.0.1", port))
