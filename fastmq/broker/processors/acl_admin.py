"""The ACL admin codes (4.9.8's AdminBrokerProcessor): UPDATE_AND_CREATE_ACL_CONFIG (50),
DELETE_ACL_CONFIG (51), GET_BROKER_CLUSTER_ACL_INFO (52), UPDATE_GLOBAL_WHITE_ADDRS_CONFIG (53),
as ``mqadmin updateAclConfig``, ``deleteAccessConfig``, ``clusterAclConfigVersion`` and
``updateGlobalWhiteAddr`` send them. The changes are written to the ACL file that holds the
account (else the default file) with the next data version, then loaded.

Beyond 4.9.8: the three that write need an admin account (4.9.8 lets any account that signs
rewrite the rules, itself made admin included); the read stays open to any account that passes.
With ``aclEnable=false`` they are refused with their failure code and say why (4.9.8 answers
them with a null remark, or not at all).
"""
from __future__ import annotations

import json
import logging
from typing import TYPE_CHECKING, Any

from ...protocol.codes import RequestCode, ResponseCode
from ...protocol.command import RemotingCommand, response_for
from ...remoting import CodeDispatchProcessor, Connection
from ..acl import AclError, PlainPermissionManager

if TYPE_CHECKING:
    from ..config import BrokerConfig

__all__ = ["AclAdminProcessor", "ACL_WRITE_CODES"]

log = logging.getLogger("fastmq.broker")

#: Codes that change the rules: admin accounts only (fastmq's rule, see the module doc).
ACL_WRITE_CODES = frozenset({RequestCode.UPDATE_AND_CREATE_ACL_CONFIG, RequestCode.DELETE_ACL_CONFIG,
                             RequestCode.UPDATE_GLOBAL_WHITE_ADDRS_CONFIG})
_OFF = "ACL is not enabled on this broker (aclEnable=false)"


def _split(text: str | None) -> list[str] | None:
    if not text:
        return None
    return [t for t in text.split(",") if t]


class AclAdminProcessor(CodeDispatchProcessor):
    """Codes 50-53 over the broker's :class:`PlainPermissionManager` (None: ACL off)."""

    def __init__(self, manager: PlainPermissionManager | None, config: "BrokerConfig") -> None:
        super().__init__()
        self.manager = manager
        self.config = config
        self.handlers = {RequestCode.UPDATE_AND_CREATE_ACL_CONFIG: self.update_and_create,
                         RequestCode.DELETE_ACL_CONFIG: self.delete,
                         RequestCode.GET_BROKER_CLUSTER_ACL_INFO: self.get_info,
                         RequestCode.UPDATE_GLOBAL_WHITE_ADDRS_CONFIG: self.update_global_white}

    def _admin(self, request: RemotingCommand) -> None:
        """Raise AclError unless the request's (already verified) account is an admin."""
        assert self.manager is not None
        ak = (request.ext_fields or {}).get("AccessKey")
        acc = self.manager.accounts.get(ak) if ak is not None else None
        if acc is not None and acc.admin:
            return
        if acc is None and ak is None:  # allowed by a global white address: no account to ask
            return
        raise AclError(f"Need admin permission for request code={request.code}, but accessKey={ak} is not",
                       "org.apache.rocketmq.acl.plain.PlainPermissionManager.checkPerm(PlainPermissionManager.java:581)")

    def _run(self, request: RemotingCommand, failed: int, what: str, action: Any) -> RemotingCommand:
        if self.manager is None:
            return response_for(request, failed, _OFF)
        try:
            self._admin(request)
        except AclError as exc:
            return response_for(request, ResponseCode.SYSTEM_ERROR, exc.remark)
        try:
            done = action(self.manager)
        except (ValueError, OSError) as exc:
            log.warning("%s refused: %s", what, exc)
            return response_for(request, failed, str(exc))
        if done is False:
            return response_for(request, failed, what)
        log.info("%s done", what)
        return response_for(request, ResponseCode.SUCCESS)

    def update_and_create(self, conn: Connection, request: RemotingCommand) -> RemotingCommand:
        ext = request.ext_fields or {}
        ak = ext.get("accessKey")
        fields: dict[str, Any] = {"accessKey": ak, "secretKey": ext.get("secretKey")}
        for key in ("whiteRemoteAddress", "defaultTopicPerm", "defaultGroupPerm"):
            if ext.get(key):
                fields[key] = ext[key]
        fields["admin"] = ext.get("admin", "false").lower() == "true"
        for key in ("topicPerms", "groupPerms"):
            items = _split(ext.get(key))
            if items:
                fields[key] = items
        return self._run(request, ResponseCode.UPDATE_AND_CREATE_ACL_CONFIG_FAILED,
                         f"The accesskey[{ak}] corresponding to accessConfig has been updated failed.",
                         lambda m: m.update_account(fields))

    def delete(self, conn: Connection, request: RemotingCommand) -> RemotingCommand:
        ak = (request.ext_fields or {}).get("accessKey") or ""
        return self._run(request, ResponseCode.DELETE_ACL_CONFIG_FAILED,
                         f"The accesskey[{ak}] corresponding to accessConfig has been deleted failed.",
                         lambda m: m.delete_account(ak))

    def update_global_white(self, conn: Connection, request: RemotingCommand) -> RemotingCommand:
        ext = request.ext_fields or {}
        addrs = ext.get("globalWhiteAddrs")
        return self._run(request, ResponseCode.UPDATE_GLOBAL_WHITE_ADDRS_CONFIG_FAILED,
                         f"The globalWhiteAddresses[{addrs}] has been updated failed.",
                         lambda m: m.update_global_white(_split(addrs) or [], ext.get("aclFileFullPath")))

    def get_info(self, conn: Connection, request: RemotingCommand) -> RemotingCommand:
        m = self.manager
        if m is None:
            return response_for(request, ResponseCode.SYSTEM_ERROR, _OFF)
        versions = m.data_versions()
        default = versions.get(m.default_file, {"counter": 0, "timestamp": 0})
        c = self.config
        return response_for(request, ResponseCode.SUCCESS, ext_fields={
            "version": json.dumps({"counter": default["counter"], "timestamp": default["timestamp"]},
                                  separators=(",", ":")),
            "allAclFileVersion": json.dumps(versions, separators=(",", ":")),
            "brokerName": c.brokerName, "brokerAddr": c.broker_addr, "clusterName": c.brokerClusterName})
