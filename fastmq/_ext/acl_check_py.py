"""The per-request part of the broker's plain ACL: the pure-Python reference of ``acl_check_c``.

The signature is HMAC-SHA1 under the account's secret of the values of the request's header
fields in key order (``Signature`` left out, and on the broker ``_UNIQUE_KEY_QUERY`` too), UTF-8,
then the body; ``Signature`` carries it in base64 (RocketMQ 4.9.8's AclUtils). :func:`fast_pass`
passes the leading requests of one read that are plainly allowed; the general check in
``fastmq.remoting.acl`` decides the rest and words the refusals; :class:`Gate` is the per-read
part of that gate.
"""
from __future__ import annotations

import base64
import hmac
from typing import Any, Callable

__all__ = ["HmacKey", "signed", "fast_pass", "Rules", "Gate"]

_SIGNATURE = "Signature"
_UNIQUE_MSG_QUERY_FLAG = "_UNIQUE_KEY_QUERY"
_ACCESS_KEY = "AccessKey"
_RETRY_PREFIX = "%RETRY%"
_TRACE_TOPIC = "RMQ_SYS_TRACE_TOPIC"
_SEND_MESSAGE_V2, _SEND_BATCH_MESSAGE, _PULL_MESSAGE = 310, 320, 11
_DENY, _PUB, _SUB = 1, 4, 8
_IP_CACHE = 4096


class HmacKey:
    """HMAC-SHA1 keyed with one secret, ready for many messages.

    Args:
        secret: the secret key's bytes (UTF-8 of the account's ``secretKey``).
    """

    __slots__ = ("_mac",)

    def __init__(self, secret: bytes) -> None:
        mac = hmac.new(secret, digestmod="sha1")
        # CPython's hmac wraps OpenSSL's HMAC object: copying that one skips a Python wrapper
        self._mac: Any = getattr(mac, "_hmac", None) or mac

    def sign(self, fields: dict[str, str], body: Any, broker_side: bool = False) -> str:
        """The base64 signature of ``fields`` (``Signature`` left out; with ``broker_side`` also
        ``_UNIQUE_KEY_QUERY``, as the broker leaves it out) and ``body``.

        Raises TypeError for a field value that is not a str, UnicodeEncodeError for one that
        cannot be UTF-8 (a lone surrogate)."""
        skip = (_SIGNATURE, _UNIQUE_MSG_QUERY_FLAG) if broker_side else (_SIGNATURE,)
        values = [fields[k] for k in sorted(k for k in fields if k not in skip)]
        for v in values:
            if type(v) is not str:
                raise TypeError(f"a header field value must be a str, not {type(v).__name__}")
        return self.sign_content("".join(values).encode("utf-8"), body)

    def sign_content(self, content: bytes, body: Any) -> str:
        """The base64 signature of ``content`` (the signed header values already joined, UTF-8:
        the producer's frame writer gathers them as it writes the frame) and ``body``."""
        if type(content) is not bytes:
            raise TypeError(f"the content signed must be bytes, not {type(content).__name__}")
        mac = self._mac.copy()
        mac.update(content)
        if body is not None and memoryview(body).nbytes:
            mac.update(body)
        return base64.b64encode(mac.digest()).decode("ascii")


def signed(key: HmacKey, fields: dict[str, str], body: Any) -> bool:
    """True when ``fields``' ``Signature`` is the broker-side signature of ``fields`` and ``body``
    under ``key`` (compared in constant time). Raises as :meth:`HmacKey.sign` does."""
    given = fields.get(_SIGNATURE)
    if type(given) is not str:
        return False
    mine = key.sign(fields, body, True)
    return hmac.compare_digest(mine.encode("ascii"), given.encode("utf-8", "replace"))


def _plain_topic(ext: dict[str, Any], key: str) -> str | None:
    """The topic in ``key``, or None when absent, not a str or a retry topic (a group's)."""
    t = ext.get(key)
    return t if type(t) is str and not t.startswith(_RETRY_PREFIX) else None


def _passes(req: Any, code: int, ip: str, accounts: dict[str, tuple[Any, ...]]) -> bool:
    ext = req.ext_fields
    if type(ext) is not dict:
        return False
    ak = ext.get(_ACCESS_KEY)
    if type(ak) is not str:
        return False
    acc = accounts.get(ak)
    if acc is None:
        return False
    key, white, admin, default_topic, default_group, perms = acc
    if white is not None and white(ip):
        return False  # allowed unsigned: the general check says so
    topic = group = None
    if code == _SEND_MESSAGE_V2:
        topic = _plain_topic(ext, "b")
        if topic is None:
            return False
    elif code == _PULL_MESSAGE:
        topic = _plain_topic(ext, "topic")
        g = ext.get("consumerGroup")
        if topic is None or type(g) is not str:
            return False
        group = _RETRY_PREFIX + g
    if not signed(key, ext, req.body):
        return False
    if code == _SEND_BATCH_MESSAGE:  # 4.9.8 names no resource for it: signed is enough
        return True
    if perms is None and admin:  # an admin with no resource permissions may do anything
        return True
    mine = default_topic if perms is None else perms.get(topic, default_topic)
    if code == _SEND_MESSAGE_V2:
        return (not mine & _DENY and bool(mine & _PUB)) or topic == _TRACE_TOPIC
    if mine & _DENY or not mine & _SUB:
        return False
    mine = default_group if perms is None else perms.get(group, default_group)
    return not mine & _DENY and bool(mine & _SUB)


def fast_pass(requests: list[Any], start: int, ip: str, accounts: dict[str, tuple[Any, ...]]) -> int:
    """The index of the first of ``requests[start:]`` that is not plainly allowed (``len(requests)``
    when all are).

    Plainly allowed: a SEND_MESSAGE_V2, SEND_BATCH_MESSAGE or PULL_MESSAGE whose account (by
    ``AccessKey`` in ``accounts``: access key -> ``(HmacKey, white matcher or None, admin,
    defaultTopicPerm, defaultGroupPerm, resource perms or None)``) is not white-listed for
    ``ip``, whose signature is right and whose permissions allow it. Every other request, and one
    whose fields cannot be hashed, stops the pass. The caller has checked the global white
    addresses."""
    n = len(requests)
    for i in range(start, n):
        r = requests[i]
        code = r.code
        if code != _SEND_MESSAGE_V2 and code != _PULL_MESSAGE and code != _SEND_BATCH_MESSAGE:
            return i
        try:
            if not _passes(r, code, ip, accounts):
                return i
        except (TypeError, ValueError):  # a field that cannot be hashed: the general check words it
            return i
    return max(start, n)


class Rules:
    """What a gate reads of its manager at each read: ``global_white``, the global white-address
    matchers, and ``fast``, the accounts as :func:`fast_pass` reads them (slots in the compiled
    twin, read without a lookup). The manager (a subclass) replaces them on a reload, so a gate
    sees new rules from its next read; ``fast`` is replaced, never changed in place (the compiled
    fast pass remembers answers by its identity)."""

    global_white: list[Callable[[str], bool]]
    fast: dict[str, tuple[Any, ...]]

    def __init__(self) -> None:
        self.global_white = []
        self.fast = {}

    def white_listed(self, ip: str) -> bool:
        """True when ``ip`` matches a global white address (the subclass says how)."""
        raise NotImplementedError("the subclass matches the global white addresses")


class Gate:
    """The per-read part of a server's ACL gate (the check in front of its dispatcher): one C call
    per read in the compiled twin, where a Python method cost as much as the signature check it
    leads to.

    ``manager`` (a :class:`Rules`) gives ``global_white`` (white-address matchers) with
    ``white_listed(ip)`` (a peer that matches one is let through unchecked: called only when there
    are any) and ``fast`` (the accounts as :func:`fast_pass` reads them), read at each call (a
    reload replaces them). A read whose requests are all plainly allowed goes to
    ``handler(conn, requests)`` as it is; else :meth:`general` gets it with the index of the first
    request :func:`fast_pass` could not pass. A subclass gives :meth:`general` and
    :meth:`peer_ip` (a connection's ``remote_addr`` -> its IP, remembered per address)."""

    def __init__(self, manager: Rules, handler: Callable[[Any, list[Any]], None]) -> None:
        if not isinstance(manager, Rules):
            raise TypeError(f"a gate's manager must be a Rules, not {type(manager).__name__}")
        self.manager = manager
        self.handler = handler
        self._ips: dict[str, str] = {}

    def __call__(self, conn: Any, requests: list[Any]) -> None:
        addr = conn.remote_addr
        ip = self._ips.get(addr)
        if ip is None:
            if len(self._ips) >= _IP_CACHE:  # bounded: connections come and go
                self._ips.clear()
            ip = self._ips[addr] = self.peer_ip(addr)
        manager = self.manager
        # 4.9.8's first check: a globally white peer is not checked at all (no call when none)
        if manager.global_white and manager.white_listed(ip):
            self.handler(conn, requests)
            return
        if type(manager.fast) is not dict:
            raise TypeError("the manager's fast accounts must be a dict")
        i = fast_pass(requests, 0, ip, manager.fast)
        if i >= len(requests):
            self.handler(conn, requests)
        else:
            self.general(conn, requests, i, ip)

    def take(self, conn: Any, requests: list[Any]) -> None:
        """The gate called (what a server hands its connections: a bound method is called
        without the argument tuple a call of the gate itself makes)."""
        self(conn, requests)

    def peer_ip(self, remote_addr: str) -> str:
        """``remote_addr`` (``ip:port``) -> the peer's IP as the white addresses are matched against."""
        raise NotImplementedError("the subclass normalises a peer's address")

    def general(self, conn: Any, requests: list[Any], start: int, ip: str) -> None:
        """Decide ``requests[start:]`` (the first of them not plainly allowed) and pass on what is
        allowed, with ``requests[:start]``."""
        raise NotImplementedError("the subclass decides what the fast pass did not")
