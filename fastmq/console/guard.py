"""What keeps the console safe to leave running: which Host names it answers, which writes it
takes (same origin, the page's token, a confirmation naming what is changed), and the headers
that stop a page from running anything it did not ship."""
from __future__ import annotations

import hmac
import ipaddress
import secrets
from typing import Any, Mapping

__all__ = ["Guard", "Refusal", "SECURITY_HEADERS", "TOKEN_HEADER"]

#: The header a write carries the page's token in. A cross-site form or image cannot set a
#: header, and a cross-site script cannot read the token (no CORS answer is ever given).
TOKEN_HEADER = "X-Fastmq-Token"

#: On every answer: only the console's own scripts and styles run, nothing frames it, no type
#: is guessed, no referrer leaves.
SECURITY_HEADERS: Mapping[str, str] = {
    "Content-Security-Policy": ("default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
                                "connect-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"),
    "X-Content-Type-Options": "nosniff",
    "X-Frame-Options": "DENY",
    "Referrer-Policy": "no-referrer",
    "Cache-Control": "no-store",
}

_LOOPBACK_NAMES = ("127.0.0.1", "localhost", "::1", "[::1]")


class Refusal(Exception):
    """A request the console will not serve: its HTTP status and the one-line reason shown."""

    def __init__(self, status: int, reason: str) -> None:
        super().__init__(reason)
        self.status = status
        self.reason = reason


def _is_wildcard(host: str) -> bool:
    try:
        return ipaddress.ip_address(host.strip("[]")).is_unspecified
    except ValueError:
        return False


class Guard:
    """The checks for a console bound to ``host:port``.

    Host: a console on a loopback or named address answers only requests whose Host header is
    that address or a loopback name (so a web page whose name was re-pointed at 127.0.0.1, DNS
    rebinding, reads nothing); bound to ``0.0.0.0`` / ``::`` it answers any Host, as asked.
    Writes: a POST with JSON, from this origin (``Origin``, when the browser sends one, must be
    the console's own), carrying :data:`TOKEN_HEADER` and a ``confirm`` field equal to the name
    of what it changes.
    """

    def __init__(self, host: str, port: int, token: str | None = None) -> None:
        self.host = host
        self.port = port
        self.token = token or secrets.token_urlsafe(32)
        self.any_host = _is_wildcard(host)
        names = {host, f"[{host}]"} | set(_LOOPBACK_NAMES)
        self.allowed_hosts = {f"{n}:{port}" for n in names} | (names if port == 80 else set())

    def check_host(self, host_header: str | None) -> None:
        """Refuse (421) a Host this console does not go by."""
        if self.any_host:
            return
        if (host_header or "").lower() not in self.allowed_hosts:
            raise Refusal(421, f"this console answers only to {self.host}:{self.port} or localhost")

    def check_write(self, headers: Mapping[str, str], content_type: str, body: Any, target: str) -> None:
        """Refuse a write that is not same-origin, lacks the page's token or is not confirmed by
        naming ``target`` in its ``confirm`` field."""
        origin = headers.get("Origin")
        if origin is not None and origin.lower() not in {f"http://{h}" for h in self.allowed_hosts} \
                and not (self.any_host and origin.lower() == f"http://{headers.get('Host', '').lower()}"):
            raise Refusal(403, "cross-origin write refused")
        if not hmac.compare_digest(headers.get(TOKEN_HEADER, "").encode(), self.token.encode()):
            raise Refusal(403, f"write refused: no valid {TOKEN_HEADER} (reload the console page)")
        if content_type != "application/json" or not isinstance(body, dict):
            raise Refusal(415, "a write is a JSON object")
        if not target or body.get("confirm") != target:
            raise Refusal(400, f"not confirmed: type {target!r} into the confirmation to do this")
