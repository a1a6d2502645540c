"""Plain ACL for a server (RocketMQ 4.9.8's PlainPermissionManager and PlainAccessValidator).

The files, their accounts, the signature check and the gate in front of a server's dispatcher,
shared by the broker (``fastmq.broker.acl``: its resources per request code and admin-only codes)
and the NameServer (its write codes need an admin account). With ACL on, every request is checked
before any processor sees it (the gate sits in front of the dispatcher, so the compiled send path,
gathered or batched, gets only requests that passed). The order is 4.9.8's:

1. the peer's address matches a global white address: allowed, nothing else checked;
2. no ``AccessKey``: refused; an unknown one: refused;
3. the peer's address matches the account's ``whiteRemoteAddress``: allowed;
4. the ``Signature`` differs from HMAC-SHA1 of the request under the account's secret
   (compared in constant time): refused;
5. a send to ``RMQ_SYS_TRACE_TOPIC``: allowed;
6. an admin-only code from an account that is not admin: refused; then each resource the
   request names (per request code, the server's ``resources`` function) against the account's explicit
   permission, else its ``defaultTopicPerm`` / ``defaultGroupPerm``.

A refused request gets SYSTEM_ERROR with 4.9.8's remark (the AclException and its top stack
frame); a refused oneway request is dropped.

The rules come from YAML files: ``<rocketmqHome>/conf/plain_acl.yml`` (or the file the key
``aclFile`` names) and every ``*.yml`` / ``*.yaml`` under ``<rocketmqHome>/conf/acl``. They are
polled every :data:`WATCH_INTERVAL` seconds and reloaded when one changes; a file that no longer
parses keeps its last good rules, with an error in the log.
"""
from __future__ import annotations

import asyncio
import hashlib
import ipaddress
import logging
import os
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

import yaml  # type: ignore[import-untyped]  # no stubs in the venv; safe_load/safe_dump only

from .._ext.acl_check import Gate, HmacKey, Rules, fast_pass, signed
from ..common.server_log import RepeatedLog
from ..common.acl_signer import ACCESS_KEY
from ..errors import ConfigError
from ..protocol import topic as tv
from ..protocol.codes import ResponseCode
from ..protocol.command import RemotingCommand, response_for
from .connection import Connection

__all__ = ["AclError", "PlainPermissionManager", "AccessGate", "Permission", "acl_files",
           "WATCH_INTERVAL", "parse_perm", "address_matcher", "Resources", "AT_PARSE"]

log = logging.getLogger("fastmq.acl")
#: A peer repeating a refused request gets one line a minute for it, with a count.
_refusals = RepeatedLog(log)

#: Seconds between two looks at the ACL files (4.9.8's AclFileWatchService: 5).
WATCH_INTERVAL = 2.0

_EXC = "org.apache.rocketmq.acl.common.AclException"
_PPM = "org.apache.rocketmq.acl.plain.PlainPermissionManager"
# the top stack frame 4.9.8's answer names, per failure (RemotingHelper.exceptionSimpleDesc)
_AT_VALIDATE = {"no_key": 664, "unknown": 668, "signature": 684}
_AT_CHECK_PERM = {"admin": 581, "default": 606, "explicit": 611}
#: The stack frame a refusal names when the request cannot be read (PlainAccessValidator.parse).
AT_PARSE = "org.apache.rocketmq.acl.plain.PlainAccessValidator.parse(PlainAccessValidator.java:134)"


class AclError(Exception):
    """A request refused by the ACL (RocketMQ's AclException); ``remark`` is 4.9.8's answer text."""

    def __init__(self, message: str, frame: str) -> None:
        super().__init__(message)
        self.remark = f"{_EXC}: {message}, {frame}"


class Permission:
    """Permission bits (4.9.8's acl Permission)."""

    DENY, ANY, PUB, SUB = 1, 2, 4, 8

    @staticmethod
    def check(needed: int, owned: int) -> bool:
        if owned & Permission.DENY:
            return False
        if needed & Permission.ANY:
            return bool(owned & (Permission.PUB | Permission.SUB))
        return bool(needed & owned)


def parse_perm(text: Any) -> int:
    """``PUB``, ``SUB``, ``PUB|SUB`` / ``SUB|PUB``, ``DENY``; anything else is DENY (as 4.9.8)."""
    t = str(text).strip() if text is not None else ""
    return {"PUB": Permission.PUB, "SUB": Permission.SUB, "PUB|SUB": Permission.PUB | Permission.SUB,
            "SUB|PUB": Permission.PUB | Permission.SUB}.get(t, Permission.DENY)


# ------------------------------------------------------------------ white addresses
def _segment_matcher(seg: str) -> Callable[[str], bool]:
    if seg == "*":
        return lambda s: True
    if "-" in seg:
        lo, _, hi = seg.partition("-")
        a, b = int(lo), int(hi)
        if not (0 <= a <= b <= 255):
            raise ValueError(seg)
        return lambda s: s.isdigit() and a <= int(s) <= b
    if not seg.isdigit() or int(seg) > 255:
        raise ValueError(seg)
    return lambda s: s == seg


def address_matcher(pattern: Any) -> Callable[[str], bool]:
    """A white-address pattern (RemoteAddressStrategyFactory): blank never matches; ``*``,
    ``*.*.*.*`` and ``*:*:*:*:*:*:*:*`` match all; ``a.b.c.{1,2}`` and ``x,y`` list addresses;
    ``a.b.*`` and ``a.b.1-10.*`` are ranges; else one exact address (IPv4 or IPv6).

    Raises ValueError for a pattern that is none of these."""
    p = str(pattern).strip() if pattern is not None else ""
    if not p:
        return lambda ip: False
    if p in ("*", "*.*.*.*", "*:*:*:*:*:*:*:*"):
        return lambda ip: True
    if "{" in p:
        prefix, _, rest = p.partition("{")
        if not rest.endswith("}"):
            raise ValueError(f"bad address list {p!r}")
        exact = frozenset(_exact(prefix + x.strip()) for x in rest[:-1].split(","))
        return lambda ip: ip in exact
    if "," in p:
        exact = frozenset(_exact(x.strip()) for x in p.split(","))
        return lambda ip: ip in exact
    if "*" in p or "-" in p:
        segs = p.split(".")
        if len(segs) > 4:
            raise ValueError(f"bad address range {p!r}")
        if segs[-1] != "*":
            segs = segs + ["*"] * (4 - len(segs)) if len(segs) < 4 else segs
        while len(segs) < 4:
            segs.append("*")
        ms = [_segment_matcher(s) for s in segs]

        def ranged(ip: str) -> bool:
            parts = ip.split(".")
            return len(parts) == 4 and all(m(s) for m, s in zip(ms, parts))
        return ranged
    one = _exact(p)
    return lambda ip: ip == one


def _exact(addr: str) -> str:
    return str(ipaddress.ip_address(addr))


def _peer_ip(remote_addr: str) -> str:
    """``ip:port`` (IPv4 or IPv6, as the connection writes it) -> the IP, normalised."""
    host = remote_addr.rpartition(":")[0].strip("[]") or remote_addr
    try:
        return str(ipaddress.ip_address(host))
    except ValueError:
        return host


# ------------------------------------------------------------------ accounts and files
@dataclass
class Account:
    """One account of a plain_acl.yml file, compiled."""

    access_key: str
    secret_key: str
    admin: bool
    white: Callable[[str], bool]
    default_topic_perm: int
    default_group_perm: int
    perms: dict[str, int] | None  # resource (topic, or %RETRY%group) -> bits; None: none given
    key: HmacKey | None = field(repr=False, default=None)  # HMAC-SHA1 keyed with the secret
    #: False when the account names no white address (then ``white`` never matches)
    has_white: bool = False

    def fast_entry(self) -> tuple[Any, ...]:
        """The account as the compiled check reads it (``fastmq._ext.acl_check.fast_pass``)."""
        return (self.key, self.white if self.has_white else None, self.admin, self.default_topic_perm,
                self.default_group_perm, self.perms)


@dataclass
class AclFileRules:
    """What one file gives: its global white addresses, accounts, data version, raw mapping."""

    white: list[Callable[[str], bool]]
    accounts: list[Account]
    data_version: dict[str, int]
    raw: dict[str, Any]


def _list(v: Any, what: str) -> list[Any]:
    if v is None:
        return []
    if isinstance(v, str):
        return [v]
    if not isinstance(v, list):
        raise ValueError(f"{what} must be a list")
    return v


def _scalars(v: Any, what: str) -> list[Any]:
    """A list of plain values: a nested list (YAML aliases can nest them exponentially deep) is
    refused before anything turns it into a string."""
    items = _list(v, what)
    for item in items:
        if item is not None and not isinstance(item, (str, int, float, bool)):
            raise ValueError(f"{what}: each entry must be a plain value, not {type(item).__name__}")
    return items


def compile_account(a: Any) -> Account:
    """An ``accounts`` entry -> :class:`Account`. Raises ValueError as 4.9.8's checks do."""
    if not isinstance(a, dict):
        raise ValueError("each account must be a mapping")
    ak, sk = a.get("accessKey"), a.get("secretKey")
    for key in ("accessKey", "secretKey", "whiteRemoteAddress", "defaultTopicPerm", "defaultGroupPerm", "admin"):
        _scalars([a.get(key)], key)
    if ak is None or sk is None or len(str(ak)) <= 6 or len(str(sk)) <= 6:
        raise ValueError(f"The accessKey={ak} and secretKey={sk and '***'} cannot be null and length "
                         "should longer than 6")
    ak, sk = str(ak), str(sk)
    perms: dict[str, int] | None = None
    for key, is_topic in (("groupPerms", False), ("topicPerms", True)):
        for item in _scalars(a.get(key), key):
            name, sep, perm = str(item).partition("=")
            if not sep or not name.strip() or "=" in perm:
                raise ValueError(f"Parse resource permission failed for {'topic' if is_topic else 'group'}:{item}")
            res = name.strip() if is_topic else tv.retry_topic(name.strip())
            perms = perms if perms is not None else {}
            perms[res] = parse_perm(perm)
    admin = a.get("admin", False)
    white = a.get("whiteRemoteAddress")
    return Account(ak, sk, admin is True or str(admin).lower() == "true", address_matcher(white),
                   parse_perm(a.get("defaultTopicPerm")), parse_perm(a.get("defaultGroupPerm")), perms,
                   HmacKey(sk.encode("utf-8")), white is not None and bool(str(white).strip()))


def parse_acl_text(text: str) -> AclFileRules:
    """One file's YAML (safe_load only: no tags that build objects) -> its rules.
    Raises ValueError (or yaml.YAMLError) when it cannot be used."""
    data = yaml.safe_load(text) if text.strip() else None
    if data is None:
        data = {}
    if not isinstance(data, dict):
        raise ValueError("the top level must be a mapping")
    white = [address_matcher(p) for p in _scalars(data.get("globalWhiteRemoteAddresses"), "globalWhiteRemoteAddresses")]
    accounts = [compile_account(a) for a in _list(data.get("accounts"), "accounts")]
    dv: dict[str, int] = {"counter": 0, "timestamp": int(time.time() * 1000)}
    versions = _list(data.get("dataVersion"), "dataVersion")
    if versions and isinstance(versions[0], dict):
        dv = {"counter": int(versions[0].get("counter", 0)), "timestamp": int(versions[0].get("timestamp", 0))}
    return AclFileRules(white, accounts, dv, data)


def acl_files(home: str, acl_file: str) -> tuple[str, list[str]]:
    """The default file and every file to read: ``acl_file`` (absolute, or relative to
    ``home``) else ``<home>/conf/plain_acl.yml``, then the YAML files under ``<home>/conf/acl``
    (recursively; ``conf/tools.yml`` is mqadmin's, never an ACL file)."""
    default = acl_file if os.path.isabs(acl_file or "") else os.path.join(home, acl_file or "conf/plain_acl.yml")
    default = os.path.normpath(default)
    files: list[str] = []
    acl_dir = os.path.join(home, "conf", "acl") if home else ""
    tools = os.path.normpath(os.path.join(home, "conf", "tools.yml")) if home else ""
    if acl_dir and os.path.isdir(acl_dir):
        for root, dirs, names in os.walk(acl_dir):
            dirs.sort()
            for n in sorted(names):
                full = os.path.normpath(os.path.join(root, n))
                if n.endswith((".yml", ".yaml")) and full != tools:
                    files.append(full)
    if default not in files:
        files.append(default)
    return default, files


#: A server's resources per request: the resources a request names and the permission each
#: needs, None when it names none; raises :class:`AclError` for a body or header it cannot read.
Resources = Callable[[RemotingCommand], "dict[str, int] | None"]


def _no_resources(request: RemotingCommand) -> dict[str, int] | None:
    return None


# ------------------------------------------------------------------ the manager
class PlainPermissionManager(Rules):
    """The ACL files, their compiled rules, the check of each request and the admin updates.

    Its ``global_white`` and ``fast`` are the :class:`~fastmq._ext.acl_check.Rules` slots its
    gates read at each read; a reload replaces both (``fast`` is never changed in place).

    Args:
        home: ``rocketmqHome`` (``$ROCKETMQ_HOME``).
        acl_file: the ``aclFile`` key ('' for ``conf/plain_acl.yml``).
        admin_codes: the request codes only an admin account may send.
        resources: the resources each request names (none by default).
        open_codes: every code but ``admin_codes`` passes unchecked, unsigned too (the
            NameServer's reads).
    """

    def __init__(self, home: str, acl_file: str = "", admin_codes: frozenset[int] = frozenset(),
                 resources: Resources = _no_resources, open_codes: bool = False) -> None:
        if not home and not (acl_file and os.path.isabs(acl_file)):
            raise ConfigError("aclEnable=true needs the ACL file: set rocketmqHome (or ROCKETMQ_HOME) so "
                              "conf/plain_acl.yml is found, or aclFile to its absolute path")
        super().__init__()
        self.home = home
        self.acl_file = acl_file
        self.admin_codes = admin_codes
        self.resources = resources
        self.open_codes = open_codes
        self.default_file, _ = acl_files(home, acl_file)
        self._file_rules: dict[str, AclFileRules] = {}
        self._stamps: dict[str, tuple[int, int, bytes]] = {}
        self.global_white: list[Callable[[str], bool]] = []
        self.accounts: dict[str, Account] = {}
        #: the accounts as the compiled check reads them (:meth:`Account.fast_entry`)
        self.fast: dict[str, tuple[Any, ...]] = {}
        self.account_file: dict[str, str] = {}
        self._watch: asyncio.Task[None] | None = None
        self.reload(strict=True)

    # -------------------------------------------------------------- loading
    def _stamp(self, path: str) -> tuple[int, int, bytes] | None:
        try:
            st = os.stat(path)
            data = Path(path).read_bytes()
        except OSError:
            return None
        return st.st_mtime_ns, st.st_size, hashlib.md5(data, usedforsecurity=False).digest()

    def reload(self, strict: bool = False) -> bool:
        """Read the files that changed (all of them the first time). A file that fails keeps its
        last good rules and is logged; with ``strict`` (the start) it raises ConfigError instead.
        Returns True when the rules changed."""
        default, files = acl_files(self.home, self.acl_file)
        if strict and not os.path.exists(default):  # 4.9.8 creates the default file, empty
            try:
                Path(default).parent.mkdir(parents=True, exist_ok=True)
                Path(default).touch()
            except OSError as exc:
                raise ConfigError(f"ACL file {default}: {exc}") from exc
        changed = False
        seen = set()
        for path in files:
            stamp = self._stamp(path)
            if stamp is None:
                continue
            seen.add(path)
            if self._stamps.get(path) == stamp:
                continue
            try:
                rules = parse_acl_text(Path(path).read_text(encoding="utf-8"))
            except (OSError, ValueError, UnicodeDecodeError, yaml.YAMLError) as exc:
                if strict:
                    raise ConfigError(f"ACL file {path}: {exc}") from exc
                log.error("ACL file %s does not parse (%s): its last good rules stay in force", path,
                          str(exc).replace("\n", " "))
                self._stamps[path] = stamp  # logged once per change, not every poll
                continue
            self._stamps[path] = stamp
            self._file_rules[path] = rules
            changed = True
            log.info("ACL file %s loaded: %d accounts, %d global white addresses", path, len(rules.accounts),
                     len(rules.white))
        for gone in [p for p in self._file_rules if p not in seen]:
            del self._file_rules[gone]
            self._stamps.pop(gone, None)
            changed = True
            log.info("ACL file %s is gone: its rules are dropped", gone)
        if changed or strict:
            self._compile()
        return changed

    def _compile(self) -> None:
        white: list[Callable[[str], bool]] = []
        accounts: dict[str, Account] = {}
        owner: dict[str, str] = {}
        for path, rules in self._file_rules.items():
            white.extend(rules.white)
            for acc in rules.accounts:
                if acc.access_key in accounts:  # 4.9.8: an access key may be defined in one file only
                    log.warning("ACL access key %s is repeated in %s: the first definition stays", acc.access_key, path)
                    continue
                accounts[acc.access_key] = acc
                owner[acc.access_key] = path
        # one assignment each: a request checked meanwhile sees the old or the new rules
        fast = {ak: acc.fast_entry() for ak, acc in accounts.items()}
        self.global_white, self.accounts, self.fast, self.account_file = white, accounts, fast, owner

    def start_watch(self) -> None:
        """Poll the files every :data:`WATCH_INTERVAL` seconds (AclFileWatchService)."""
        if self._watch is None:
            self._watch = asyncio.ensure_future(self._watch_loop())

    async def _watch_loop(self) -> None:
        while True:
            await asyncio.sleep(WATCH_INTERVAL)
            try:
                self.reload()
            except Exception:  # the watch must outlive any one bad read
                log.exception("reloading the ACL files failed; the last good rules stay")

    async def stop_watch(self) -> None:
        if self._watch is not None:
            self._watch.cancel()
            try:
                await self._watch
            except asyncio.CancelledError:
                pass
            self._watch = None

    # -------------------------------------------------------------- checking
    def validate(self, remote_addr: str, request: RemotingCommand) -> None:
        """Raise :class:`AclError` when ``request`` from ``remote_addr`` (``ip:port``) is not allowed."""
        self.check(_peer_ip(remote_addr), request)

    def white_listed(self, ip: str) -> bool:
        """True when ``ip`` matches a global white address (then nothing else is checked)."""
        for match in self.global_white:
            if match(ip):
                return True
        return False

    def check(self, ip: str, request: RemotingCommand) -> None:
        """:meth:`validate` for a peer whose IP is already normalised (the gate keeps them)."""
        if self.open_codes and request.code not in self.admin_codes:
            return
        if self.white_listed(ip):
            return
        ext = request.ext_fields
        ak = ext.get(ACCESS_KEY) if ext else None
        needed = self.resources(request) if ext else None
        if ak is None:
            raise AclError("No accessKey is configured", f"{_PPM}.validate(PlainPermissionManager.java:664)")
        acc = self.accounts.get(ak)
        if acc is None:
            raise AclError(f"No acl config for {ak}", f"{_PPM}.validate(PlainPermissionManager.java:668)")
        if acc.white(ip):
            return
        assert ext is not None and acc.key is not None
        if not signed(acc.key, ext, request.body):
            raise AclError(f"Check signature failed for accessKey={ak}",
                           f"{_PPM}.validate(PlainPermissionManager.java:684)")
        if needed and needed.get(tv.TRACE_TOPIC) == Permission.PUB:
            return
        self.check_perm(request.code, needed, acc)

    def check_perm(self, code: int, needed: dict[str, int] | None, acc: Account) -> None:
        if code in self.admin_codes and not acc.admin:
            raise AclError(f"Need admin permission for request code={code}, but accessKey={acc.access_key} is not",
                           f"{_PPM}.checkPerm(PlainPermissionManager.java:581)")
        if not needed:
            return
        owned = acc.perms
        if owned is None and acc.admin:
            return
        for res, perm in needed.items():
            is_group = res.startswith(tv.RETRY_GROUP_TOPIC_PREFIX)
            mine = owned.get(res) if owned is not None else None
            line = 611
            if mine is None:
                mine = acc.default_group_perm if is_group else acc.default_topic_perm
                line = 606
            if not Permission.check(perm, mine):
                what = f"group:{res[len(tv.RETRY_GROUP_TOPIC_PREFIX):]}" if is_group else f"topic:{res}"
                raise AclError(f"No default permission for {what}", f"{_PPM}.checkPerm(PlainPermissionManager.java:{line})")

    # -------------------------------------------------------------- admin updates (codes 50, 51, 53)
    def data_versions(self) -> dict[str, dict[str, int]]:
        return {p: dict(r.data_version) for p, r in self._file_rules.items()}

    def _write(self, path: str, data: dict[str, Any]) -> None:
        """Write one file with the next data version, then load it (bad data never reaches disk:
        it is compiled first)."""
        old = self._file_rules.get(path)
        dv = dict(old.data_version) if old else {"counter": 0, "timestamp": 0}
        data["dataVersion"] = [{"counter": dv["counter"] + 1, "timestamp": int(time.time() * 1000)}]
        text = yaml.safe_dump(data, sort_keys=False, allow_unicode=True)
        parse_acl_text(text)  # raises before anything is written
        tmp = f"{path}.tmp"
        Path(path).parent.mkdir(parents=True, exist_ok=True)
        Path(tmp).write_text(text, encoding="utf-8")
        os.replace(tmp, path)
        self.reload()

    def update_account(self, fields: dict[str, Any]) -> None:
        """UPDATE_AND_CREATE_ACL_CONFIG: replace (or add) the account, in the file that holds it,
        else in the default file. Raises ValueError."""
        compile_account(fields)
        for key in ("topicPerms", "groupPerms"):  # Permission.checkResourcePerms
            for item in _list(fields.get(key), key):
                perm = str(item).partition("=")[2].strip()
                if perm != "DENY" and parse_perm(perm) == Permission.DENY:
                    raise ValueError(f"Parse resource permission error for {item}.\nThe expected permissions are "
                                     "'SUB' or 'PUB' or 'SUB|PUB' or 'PUB|SUB'.")
        ak = str(fields["accessKey"])
        path = self.account_file.get(ak, self.default_file)
        rules = self._file_rules.get(path)
        data = dict(rules.raw) if rules else {}
        accounts = [a for a in _list(data.get("accounts"), "accounts")]
        for i, a in enumerate(accounts):
            if isinstance(a, dict) and str(a.get("accessKey")) == ak:
                accounts[i] = fields
                break
        else:
            accounts.append(fields)
        data["accounts"] = accounts
        self._write(path, data)

    def delete_account(self, ak: str) -> bool:
        """DELETE_ACL_CONFIG: False when no file has the account."""
        path = self.account_file.get(ak)
        if path is None:
            return False
        data = dict(self._file_rules[path].raw)
        data["accounts"] = [a for a in _list(data.get("accounts"), "accounts")
                            if not (isinstance(a, dict) and str(a.get("accessKey")) == ak)]
        self._write(path, data)
        return True

    def update_global_white(self, addrs: list[str], path: str | None = None) -> None:
        """UPDATE_GLOBAL_WHITE_ADDRS_CONFIG for one ACL file (the default one when not named).
        Raises ValueError for a file that is not one of the ACL files, or a bad address."""
        target = os.path.normpath(path) if path else self.default_file
        if target not in acl_files(self.home, self.acl_file)[1]:
            raise ValueError(f"{path} is not one of the server's ACL files")
        for a in addrs:
            address_matcher(a)
        rules = self._file_rules.get(target)
        data = dict(rules.raw) if rules else {}
        data["globalWhiteRemoteAddresses"] = list(addrs)
        self._write(target, data)


class AccessGate(Gate):
    """The check in front of a server's dispatcher: requests that pass go on, the others are
    answered SYSTEM_ERROR with 4.9.8's text (a oneway one is dropped).

    A read's plainly allowed run of requests is passed by the compiled :class:`Gate` in one call
    (peer IP, global white addresses, then ``fast_pass``); from the first request it cannot pass,
    :meth:`general` decides each in turn with the general check."""

    manager: PlainPermissionManager

    def __init__(self, manager: PlainPermissionManager,
                 handler: Callable[[Connection, list[RemotingCommand]], None]) -> None:
        super().__init__(manager, handler)
        self.refused = 0

    def peer_ip(self, remote_addr: str) -> str:
        """The peer's normalised IP (parsing one costs more than the rest of a check: the gate
        remembers them per address)."""
        return _peer_ip(remote_addr)

    def general(self, conn: Connection, requests: list[RemotingCommand], start: int, ip: str) -> None:
        """Decide ``requests[start:]`` one by one (after each, the compiled check passes the next
        plainly allowed run at once); answer the refused, pass ``requests[:start]`` and the allowed on."""
        manager = self.manager
        addr = conn.remote_addr
        fast = manager.fast
        n = len(requests)
        i = start
        passed = requests[:i]
        answers: list[RemotingCommand] = []
        while i < n:
            req = requests[i]
            i += 1
            try:
                try:
                    manager.check(ip, req)
                except AclError:
                    raise
                except Exception as bug:  # a check that cannot finish refuses: never open by accident
                    log.exception("ACL check of request %d from %s failed; refused", req.code, addr)
                    raise AclError(f"{type(bug).__name__}: {bug}", AT_PARSE) from bug
            except AclError as exc:
                self.refused += 1
                _refusals.warning((addr.rpartition(":")[0], str(exc)), "ACL refused request %d from %s: %s",
                                  req.code, addr, exc)
                if not req.flag & 2:
                    answers.append(response_for(req, ResponseCode.SYSTEM_ERROR, exc.remark))
            else:
                passed.append(req)
            if i < n:
                j = fast_pass(requests, i, ip, fast)
                passed.extend(requests[i:j])
                i = j
        if answers:
            conn.send_many(answers)
        if passed:
            self.handler(conn, passed)
