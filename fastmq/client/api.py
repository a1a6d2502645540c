"""ClientAPI (RocketMQ's MQClientAPIImpl): every request the client makes, one method per kind.

Producers, consumers, the offset store, rebalance, the pull loops and the instance's heartbeats
never build a request or call the remoting client themselves: they call a method here. Each
method builds its request from the typed header (:mod:`fastmq.protocol.headers`), gives it to
every :class:`RPCHook` (the ACL signer among them), sends it with the configured timeout
(``mq_client_api_timeout`` unless the caller passes its own), hands the answer to the hooks'
``after_response``, turns a refusal into the typed error of its code
(:meth:`fastmq.errors.BrokerError.for_code`, whose ``retriable`` says whether a retry may help)
and decodes what the answer carries.

The producer's compiled first try writes frames already encoded, with no request object a hook
could see; it gets its connections from :attr:`ClientAPI.connection_for_frames`. With no hook,
or with the ACL signer alone (:attr:`ClientAPI.frame_signer`, with which the frame writer signs
each frame as the hook would), it gives them; with any other hook it gives none, so every send
takes :meth:`ClientAPI.send_message` (see fastmq/_ext/produce_py.py). A SUCCESS answer of that first
try is completed in compiled code; every other answer is judged by :func:`send_result` as here.

Requests the client makes: GET_ROUTEINFO_BY_TOPIC, SEND_MESSAGE_V2 and SEND_BATCH_MESSAGE
(sync, oneway; the asynchronous sends are the same request under the producer's permits),
PULL_MESSAGE, QUERY_CONSUMER_OFFSET, UPDATE_CONSUMER_OFFSET (oneway), HEART_BEAT,
UNREGISTER_CLIENT, GET_CONSUMER_LIST_BY_GROUP, CONSUMER_SEND_MSG_BACK, LOCK_BATCH_MQ,
UNLOCK_BATCH_MQ, GET_MAX_OFFSET, GET_MIN_OFFSET, SEARCH_OFFSET_BY_TIMESTAMP, END_TRANSACTION
(oneway, the transactional producer's) and QUERY_MESSAGE (by key: the trace reader's). fastmq's client reads no KV config, so the KV requests
are not made.
"""
from __future__ import annotations

import asyncio
import json
import time
import zlib
from typing import Any, Callable, Protocol, Sequence

from .._ext.produce import SendResult
from ..errors import BrokerError
from ..protocol.bodies import TopicRouteData
from ..protocol.codes import LanguageCode, RequestCode, ResponseCode
from ..protocol.command import VERSION, RemotingCommand, create_request, ext_int, ext_str, next_opaque
from ..protocol.headers import (ConsumerSendMsgBackRequestHeader, EndTransactionRequestHeader,
                                GetConsumerListByGroupRequestHeader,
                                GetMaxOffsetRequestHeader, GetMinOffsetRequestHeader, GetRouteInfoRequestHeader,
                                QueryConsumerOffsetRequestHeader, QueryMessageRequestHeader, SearchOffsetRequestHeader,
                                SendMessageResponseHeader, UnregisterClientRequestHeader,
                                UpdateConsumerOffsetRequestHeader, declared, send_wire_names)
from ..protocol.heartbeat import SubscriptionData
from ..protocol.message import (CompressedBody, Message, MessageConst, MessageExt, MessageSysFlag, decode_records,
                                encode_properties)
from ..protocol.message_queue import MessageQueue
from ..protocol.topic import AUTO_CREATE_TOPIC_KEY_TOPIC, is_retry_topic
from ..remoting import Connection, RemotingClient
from ..remoting.request_signer import RequestSigner
from .acl import AclClientRPCHook

__all__ = ["ClientAPI", "CompressedBody", "RPCHook", "SendStatus", "send_request", "send_result"]

_LANG = int(LanguageCode.PYTHON)
_PULL_MESSAGE = int(RequestCode.PULL_MESSAGE)  # (an IntEnum member costs a load per pull round)
_MSG_TYPE, _REPLY = MessageConst.MESSAGE_TYPE, MessageConst.REPLY_MESSAGE_FLAG
# The V2 letters of the send header fields the producer sets, from the declaration.
(_H_GROUP, _H_TOPIC, _H_DEFAULT_TOPIC, _H_DEFAULT_QUEUES, _H_QUEUE, _H_SYS_FLAG, _H_BORN, _H_FLAG, _H_PROPERTIES,
 _H_RECONSUME, _H_UNIT, _H_MAX_RECONSUME, _H_BATCH) = send_wire_names((
    "producerGroup", "topic", "defaultTopic", "defaultTopicQueueNums", "queueId", "sysFlag", "bornTimestamp", "flag",
    "properties", "reconsumeTimes", "unitMode", "maxReconsumeTimes", "batch"))[1]
_MSG_ID, _QUEUE_ID, _QUEUE_OFFSET = declared(SendMessageResponseHeader, "msgId", "queueId", "queueOffset")


class RPCHook(Protocol):
    """RocketMQ's RPCHook: sees every request before it is sent and every answer as it arrives.

    ``addr`` is the broker's address, or None for a NameServer request (the remoting client
    picks the NameServer, failing over down the list). A oneway request has no answer, so no
    ``after_response``. A ``before_request`` that raises fails its request, unsent, with that
    error; an ``after_response`` that raises fails the caller's request too, except for a pull
    (its answer arrives in a callback: the loop's exception handler gets the error).
    """

    def before_request(self, addr: str | None, request: RemotingCommand) -> None: ...

    def after_response(self, addr: str | None, request: RemotingCommand, response: RemotingCommand) -> None: ...


class SendStatus:
    SEND_OK = "SEND_OK"
    FLUSH_DISK_TIMEOUT = "FLUSH_DISK_TIMEOUT"
    FLUSH_SLAVE_TIMEOUT = "FLUSH_SLAVE_TIMEOUT"
    SLAVE_NOT_AVAILABLE = "SLAVE_NOT_AVAILABLE"


_STATUS_BY_CODE: dict[int, str] = {
    ResponseCode.SUCCESS: SendStatus.SEND_OK, ResponseCode.FLUSH_DISK_TIMEOUT: SendStatus.FLUSH_DISK_TIMEOUT,
    ResponseCode.FLUSH_SLAVE_TIMEOUT: SendStatus.FLUSH_SLAVE_TIMEOUT,
    ResponseCode.SLAVE_NOT_AVAILABLE: SendStatus.SLAVE_NOT_AVAILABLE}


def _refused(resp: RemotingCommand) -> BrokerError:
    return BrokerError.for_code(resp.code, resp.remark)


def send_request(msg: Message, mq: MessageQueue, group: str, default_topic_queue_nums: int, compress_over: int,
                 batch: bool = False) -> RemotingCommand:
    """SEND_MESSAGE_V2 (``batch``: SEND_BATCH_MESSAGE, ``msg.body`` the encoded batch) of ``msg``
    to ``mq``; a body of ``compress_over`` bytes or more is compressed (a batch never is, as 4.9.8)."""
    body = bytes(msg.body)
    sys_flag = 0
    if type(msg.body) is CompressedBody:  # compressed already (a trace dispatcher's thread does)
        sys_flag |= MessageSysFlag.COMPRESSED
    elif not batch and len(body) >= compress_over:
        body = zlib.compress(body, 5)
        sys_flag |= MessageSysFlag.COMPRESSED
    # a transaction's half (sendKernelImpl: TRAN_MSG parsed as Java's Boolean.parseBoolean)
    tran = msg.properties.get(MessageConst.TRANSACTION_PREPARED)
    if tran is not None and tran.lower() == "true":
        sys_flag |= MessageSysFlag.TRANSACTION_PREPARED_TYPE
    # SendMessageRequestHeader(...).to_v2_fields() written out: the same letters, order and
    # strings (tests/test_producer_fast.py holds them equal), without a dataclass and a
    # field-spec walk per message.
    topic = msg.topic
    fields = {_H_GROUP: group, _H_TOPIC: topic, _H_DEFAULT_TOPIC: AUTO_CREATE_TOPIC_KEY_TOPIC,
              _H_DEFAULT_QUEUES: str(default_topic_queue_nums), _H_QUEUE: str(mq.queue_id), _H_SYS_FLAG: str(sys_flag),
              _H_BORN: str(int(time.time() * 1000)), _H_FLAG: str(msg.flag),
              _H_PROPERTIES: encode_properties(msg.properties).decode("utf-8"), _H_RECONSUME: "0", _H_UNIT: "false"}
    if is_retry_topic(topic):
        fields[_H_MAX_RECONSUME] = "16"
    fields[_H_BATCH] = "true" if batch else "false"
    code = RequestCode.SEND_BATCH_MESSAGE if batch else RequestCode.SEND_MESSAGE_V2
    # a reply to a request (create_reply_message) goes with its own code, as 4.9.8's sendMessage
    # picks it; replies never take the compiled first try (Producer._validate keeps their topic off it)
    if msg.properties.get(_MSG_TYPE) == _REPLY and not batch:
        code = RequestCode.SEND_REPLY_MESSAGE_V2
    return RemotingCommand(code, language=_LANG, version=VERSION, opaque=next_opaque(), flag=0, ext_fields=fields,
                           serialize_type=0, body=body)


def send_result(resp: RemotingCommand, topic: str, mq: MessageQueue, uniq_id: str) -> SendResult:
    """processSendResponse: the SendResult of a send's answer (``uniq_id``: the message's
    UNIQ_KEY, or a batch's joined by commas).

    Raises:
        BrokerError: the broker refused the send (the subclass of its code).
        RemotingCommandError: a header field of the answer is not a number.
    """
    status = _STATUS_BY_CODE.get(resp.code)
    if status is None:
        raise _refused(resp)
    queue_id = ext_int(resp, _QUEUE_ID, mq.queue_id)
    return SendResult(status, uniq_id, ext_str(resp, _MSG_ID) or "",
                      MessageQueue(topic, mq.broker_name, queue_id if queue_id is not None else mq.queue_id),
                      ext_int(resp, _QUEUE_OFFSET, 0) or 0, ext_str(resp, MessageConst.MSG_REGION),
                      ext_str(resp, MessageConst.TRACE_SWITCH) != "false")


class ClientAPI:
    """The requests of one client instance, over its remoting client.

    Args:
        remoting: the instance's connections (and NameServer list).
        timeout: seconds a request may take when its caller gives no timeout
            (``mq_client_api_timeout``).
        hooks: applied to every request, in order (the ACL signer first when there are credentials).
    """

    def __init__(self, remoting: RemotingClient, timeout: float, hooks: Sequence[RPCHook] = ()) -> None:
        self.remoting = remoting
        self.timeout = timeout
        self.hooks: tuple[RPCHook, ...] = tuple(hooks)
        #: the ACL signer, when the only hook is the plain :class:`AclClientRPCHook`: requests
        #: encoded in advance must then carry its fields and signature (the producer's frame
        #: writer adds them); None otherwise
        self.frame_signer: RequestSigner | None = _plain_signer(self.hooks)
        #: ``connection_for_frames(addr)``: the open connection to ``addr`` for a request already
        #: encoded (the producer's compiled first try), or None: not connected yet, or a hook must
        #: see every request (the caller then takes :meth:`send_message`). Chosen once, as the
        #: hooks are, so the first try pays no more per send than the remoting client's lookup.
        self.connection_for_frames: Callable[[str], Connection | None] = (
            remoting.open_connection if self.writes_frames else _no_connection)

    # ------------------------------------------------------------ the one way out

    def _before(self, addr: str | None, request: RemotingCommand) -> None:
        for hook in self.hooks:
            hook.before_request(addr, request)

    def _after(self, addr: str | None, request: RemotingCommand, response: RemotingCommand) -> None:
        for hook in self.hooks:
            hook.after_response(addr, request, response)

    async def _invoke(self, addr: str, request: RemotingCommand, timeout: float | None) -> RemotingCommand:
        self._before(addr, request)
        resp = await self.remoting.invoke(addr, request, self.timeout if timeout is None else timeout)
        self._after(addr, request, resp)
        return resp

    async def _call(self, addr: str, request: RemotingCommand, timeout: float | None) -> RemotingCommand:
        """The answer of ``request``, which must be a SUCCESS: any other code is raised."""
        resp = await self._invoke(addr, request, timeout)
        if resp.code != ResponseCode.SUCCESS:
            raise _refused(resp)
        return resp

    async def _invoke_oneway(self, addr: str, request: RemotingCommand, timeout: float | None) -> None:
        self._before(addr, request)
        await self.remoting.invoke_oneway(addr, request, self.timeout if timeout is None else timeout)

    @property
    def writes_frames(self) -> bool:
        """True when a request may go out as a frame encoded in advance: no hook has to see it,
        or the one hook is the ACL signer, whose work the frame's writer does
        (:attr:`frame_signer`)."""
        return not self.hooks or self.frame_signer is not None

    # ------------------------------------------------------------ admin (fastmq-admin)

    async def admin_namesrv(self, code: int, fields: dict[str, str] | None = None,
                            timeout: float | None = None) -> bytes:
        """An admin request (mqadmin's) to the NameServers, answered by the first that answers:
        the body of its SUCCESS answer.

        Raises:
            BrokerError: any other answer, with the NameServer's remark.
            RemotingError: no NameServer of the list answered.
        """
        request = create_request(code, fields or {})
        self._before(None, request)
        resp = await self.remoting.invoke_namesrv(request, self.timeout if timeout is None else timeout)
        self._after(None, request, resp)
        if resp.code != ResponseCode.SUCCESS:
            raise BrokerError.for_code(resp.code, resp.remark)
        return bytes(resp.body or b"")

    async def admin_broker(self, addr: str, code: int, fields: dict[str, str] | None = None,
                           body: bytes | None = None, timeout: float | None = None) -> RemotingCommand:
        """An admin request (mqadmin's) to the broker at ``addr``; its answer, which must be a
        SUCCESS: any other code is raised."""
        return await self._call(addr, create_request(code, fields or {}, body=body), timeout)

    # ------------------------------------------------------------ NameServer

    async def get_route_info(self, topic: str, timeout: float | None = None) -> TopicRouteData | None:
        """GET_ROUTEINFO_BY_TOPIC: the topic's route; None when the NameServer has none (TOPIC_NOT_EXIST).

        Raises:
            BrokerError: any other refusal, or a SUCCESS without a route.
            RemotingError: no NameServer of the list answered.
        """
        request = create_request(RequestCode.GET_ROUTEINFO_BY_TOPIC, GetRouteInfoRequestHeader(topic).to_fields())
        self._before(None, request)
        resp = await self.remoting.invoke_namesrv(request, self.timeout if timeout is None else timeout)
        self._after(None, request, resp)
        if resp.code == ResponseCode.TOPIC_NOT_EXIST:
            return None
        if resp.code != ResponseCode.SUCCESS or not resp.body:
            raise BrokerError.for_code(resp.code, f"getTopicRouteInfoFromNameServer failed: {resp.remark}")
        return TopicRouteData.from_json(resp.body)

    # ------------------------------------------------------------ producer

    async def send_message(self, addr: str, request: RemotingCommand, topic: str, mq: MessageQueue, uniq_id: str,
                           timeout: float | None = None) -> SendResult:
        """A SEND_MESSAGE_V2 / SEND_BATCH_MESSAGE (see :func:`send_request`) and its result.

        Raises:
            BrokerError: the broker refused it (``retriable`` says whether another try may help).
            RemotingError: no answer (connect, timeout, connection lost).
        """
        return send_result(await self._invoke(addr, request, timeout), topic, mq, uniq_id)

    async def send_message_oneway(self, addr: str, request: RemotingCommand, timeout: float | None = None) -> None:
        """A send with no answer asked for (the oneway flag)."""
        await self._invoke_oneway(addr, request, timeout)

    async def end_transaction_oneway(self, addr: str, header: EndTransactionRequestHeader, remark: str | None = None,
                                     timeout: float | None = None, *, conn: Connection | None = None) -> None:
        """END_TRANSACTION, oneway (endTransactionOneway): the state of a transaction's half.

        Args:
            addr: the broker that stored the half (the hooks see it).
            header: the half's offsets, group and ``commitOrRollback``.
            remark: why the state is UNKNOW, when the listener raised.
            timeout: seconds to wait for a connection or a oneway permit.
            conn: answer on this connection (the one a check came on) while it is open,
                rather than on the client's connection to ``addr``.

        Raises:
            RemotingError: not written (no connection, no permit in time).
        """
        request = create_request(RequestCode.END_TRANSACTION, header.to_fields())
        request.remark = remark
        if conn is not None and not conn.closed:
            self._before(addr, request)
            conn.send_oneway(request)
            return
        await self._invoke_oneway(addr, request, timeout)

    # ------------------------------------------------------------ consumer

    def pull_message(self, addr: str, fields: dict[str, str], timeout_ms: int
                     ) -> tuple[asyncio.Future[RemotingCommand], Connection | None, int]:
        """PULL_MESSAGE with these header fields (a PullMessageRequestHeader's, as strings),
        written now. Returns the future of its answer, the connection it went on (None when it
        had to connect first: the future is then a task) and its opaque, with which a caller
        that gives the pull up removes it from the connection's pending table.

        The answer's code is the caller's to read: FOUND, NO_NEW_MSG, NO_MATCHED_MSG and
        OFFSET_ILLEGAL are all answers of a pull (processPullResponse).
        """
        request = RemotingCommand(_PULL_MESSAGE, language=_LANG, version=VERSION, opaque=next_opaque(),
                                  flag=0, ext_fields=fields, serialize_type=0, body=None)
        if self.hooks:  # (every pull round comes here: no call when there is nothing to call)
            self._before(addr, request)
        conn = self.remoting.open_connection(addr)
        fut: asyncio.Future[RemotingCommand]
        if conn is None:  # not connected yet: invoke connects (a task, so it starts now too)
            fut = asyncio.ensure_future(self.remoting.invoke(addr, request, timeout_ms / 1000))
        else:
            # Written at once, with no timer of its own (``asyncio.timeout`` costs ~3 µs): the
            # remoting client's once-a-second scan of the pending table fails it after
            # ``timeout_ms``, as RocketMQ's scanResponseTable does for its async pulls. Flushed
            # now rather than at the loop's next turn: pulls of several queues leaving in one
            # write come back as one write of several answers, and the client and the broker
            # then take turns instead of working side by side (measured with 4 queues: ~290,000
            # msgs/s against ~600,000).
            loop = asyncio.get_running_loop()
            fut = loop.create_future()
            conn.start_request(request, fut, loop.time() + timeout_ms / 1000, timeout_ms)
            conn.flush()
        if self.hooks:
            fut.add_done_callback(lambda f: None if f.cancelled() or f.exception() is not None
                                  else self._after(addr, request, f.result()))
        return fut, conn, request.opaque

    async def query_consumer_offset(self, addr: str, group: str, mq: MessageQueue,
                                    timeout: float | None = None) -> int:
        """QUERY_CONSUMER_OFFSET: the group's committed offset of ``mq``.

        Raises:
            BrokerError: refused; QUERY_NOT_FOUND (a ``QueryNotFoundError``) when the group never
                committed one there.
        """
        request = create_request(RequestCode.QUERY_CONSUMER_OFFSET,
                                 QueryConsumerOffsetRequestHeader(group, mq.topic, mq.queue_id).to_fields())
        off = ext_int(await self._call(addr, request, timeout), "offset", -1)
        return -1 if off is None else off

    async def update_consumer_offset_oneway(self, addr: str, group: str, mq: MessageQueue, offset: int,
                                            timeout: float | None = None) -> None:
        """UPDATE_CONSUMER_OFFSET, oneway (updateConsumerOffsetOneway)."""
        header = UpdateConsumerOffsetRequestHeader(group, mq.topic, mq.queue_id, offset)
        await self._invoke_oneway(addr, create_request(RequestCode.UPDATE_CONSUMER_OFFSET, header.to_fields()),
                                  timeout)

    async def query_message(self, addr: str, topic: str, key: str, max_num: int, begin_ms: int, end_ms: int,
                            timeout: float | None = None) -> list[MessageExt]:
        """QUERY_MESSAGE: the messages of ``topic`` that broker's index holds under ``key`` (a
        KEYS entry or a UNIQ_KEY), stored between the two epoch-millisecond times; [] when it
        has none (QUERY_NOT_FOUND). Bodies are as stored (compressed ones are not inflated).

        Raises:
            BrokerError: refused.
            MessageFormatError: the answer's records cannot be read.
        """
        header = QueryMessageRequestHeader(topic, key, max_num, begin_ms, end_ms)
        resp = await self._invoke(addr, create_request(RequestCode.QUERY_MESSAGE, header.to_fields()), timeout)
        if resp.code == ResponseCode.QUERY_NOT_FOUND:
            return []
        if resp.code != ResponseCode.SUCCESS:
            raise _refused(resp)
        return decode_records(resp.body or b"", verify_crc=False)

    async def get_consumer_id_list(self, addr: str, group: str, timeout: float | None = None) -> list[str]:
        """GET_CONSUMER_LIST_BY_GROUP: the client ids of the group's consumers that broker knows.

        Raises:
            BrokerError: refused, or a SUCCESS without the list (code 0, as the Java client's).
        """
        request = create_request(RequestCode.GET_CONSUMER_LIST_BY_GROUP,
                                 GetConsumerListByGroupRequestHeader(group).to_fields())
        resp = await self._invoke(addr, request, timeout)
        if resp.code != ResponseCode.SUCCESS or not resp.body:
            raise _refused(resp)
        return list(json.loads(resp.body).get("consumerIdList") or [])

    async def consumer_send_message_back(self, addr: str, *, group: str, commit_log_offset: int, delay_level: int,
                                         origin_msg_id: str, origin_topic: str, max_reconsume_times: int,
                                         timeout: float | None = None) -> None:
        """CONSUMER_SEND_MSG_BACK: the broker puts a message the group failed to consume on its
        retry topic (or its dead-letter topic once retried ``max_reconsume_times``).

        Raises:
            BrokerError: refused.
        """
        header = ConsumerSendMsgBackRequestHeader(commit_log_offset, group, delay_level, origin_msg_id, origin_topic,
                                                  False, max_reconsume_times)
        await self._call(addr, create_request(RequestCode.CONSUMER_SEND_MSG_BACK, header.to_fields()), timeout)

    async def lock_batch_mq(self, addr: str, group: str, client_id: str, mqs: Sequence[MessageQueue],
                            timeout: float | None = None) -> set[MessageQueue]:
        """LOCK_BATCH_MQ: the queues of ``mqs`` the broker now holds for this client (orderly consume).

        Raises:
            BrokerError: refused.
        """
        request = create_request(RequestCode.LOCK_BATCH_MQ, body=_lock_body(group, client_id, mqs))
        body = (await self._call(addr, request, timeout)).body
        return {MessageQueue.from_obj(o) for o in json.loads(body or b"{}").get("lockOKMQSet") or []}

    async def unlock_batch_mq(self, addr: str, group: str, client_id: str, mqs: Sequence[MessageQueue],
                              timeout: float | None = None) -> None:
        """UNLOCK_BATCH_MQ, waiting for the broker's answer.

        Raises:
            BrokerError: refused.
        """
        await self._call(addr, create_request(RequestCode.UNLOCK_BATCH_MQ, body=_lock_body(group, client_id, mqs)),
                         timeout)

    async def get_max_offset(self, addr: str, mq: MessageQueue, timeout: float | None = None) -> int:
        """GET_MAX_OFFSET: the offset the queue's next message will get."""
        header = GetMaxOffsetRequestHeader(mq.topic, mq.queue_id)
        return await self._offset(addr, create_request(RequestCode.GET_MAX_OFFSET, header.to_fields()), timeout)

    async def get_min_offset(self, addr: str, mq: MessageQueue, timeout: float | None = None) -> int:
        """GET_MIN_OFFSET: the queue's first offset still stored."""
        header = GetMinOffsetRequestHeader(mq.topic, mq.queue_id)
        return await self._offset(addr, create_request(RequestCode.GET_MIN_OFFSET, header.to_fields()), timeout)

    async def search_offset(self, addr: str, mq: MessageQueue, timestamp_ms: int, timeout: float | None = None) -> int:
        """SEARCH_OFFSET_BY_TIMESTAMP: the first offset of the queue stored at or after ``timestamp_ms``."""
        header = SearchOffsetRequestHeader(mq.topic, mq.queue_id, timestamp_ms)
        return await self._offset(addr, create_request(RequestCode.SEARCH_OFFSET_BY_TIMESTAMP, header.to_fields()),
                                  timeout)

    async def _offset(self, addr: str, request: RemotingCommand, timeout: float | None) -> int:
        return ext_int(await self._call(addr, request, timeout), "offset", 0) or 0

    # ------------------------------------------------------------ client registration

    async def send_heartbeat(self, addr: str, heartbeat: bytes, timeout: float | None = None) -> None:
        """HEART_BEAT with this HeartbeatData body.

        Raises:
            BrokerError: refused.
        """
        await self._call(addr, create_request(RequestCode.HEART_BEAT, body=heartbeat), timeout)

    async def check_client_config(self, addr: str, group: str, client_id: str, subscription: SubscriptionData,
                                  timeout: float | None = None) -> None:
        """CHECK_CLIENT_CONFIG: does the broker accept this subscription (its expression type, a
        SQL92 expression that compiles)? MQClientAPIImpl.checkClientInBroker.

        Raises:
            BrokerError: refused (SYSTEM_ERROR: no SQL92 filtering there; SUBSCRIPTION_PARSE_FAILED:
                the expression does not compile, the remark says why).
        """
        body = json.dumps({"clientId": client_id, "group": group, "subscriptionData": subscription.to_obj()},
                          separators=(",", ":"), ensure_ascii=False).encode("utf-8")
        await self._call(addr, create_request(RequestCode.CHECK_CLIENT_CONFIG, body=body), timeout)

    async def unregister_client(self, addr: str, client_id: str, producer_group: str | None = None,
                                consumer_group: str | None = None, timeout: float | None = None) -> None:
        """UNREGISTER_CLIENT: the broker forgets this client in the group(s) named.

        Raises:
            BrokerError: refused.
        """
        header = UnregisterClientRequestHeader(client_id, producer_group, consumer_group)
        await self._call(addr, create_request(RequestCode.UNREGISTER_CLIENT, header.to_fields()), timeout)


def _plain_signer(hooks: tuple[RPCHook, ...]) -> RequestSigner | None:
    """The signer of ``hooks`` when they are just the plain ACL hook (not a subclass, which may
    do more than sign), else None."""
    if len(hooks) == 1 and type(hooks[0]) is AclClientRPCHook and type(hooks[0].signer) is RequestSigner:
        return hooks[0].signer
    return None


def _no_connection(addr: str) -> None:
    """No connection for frames encoded in advance: a hook has to see each request first."""
    return None


def _lock_body(group: str, client_id: str, mqs: Sequence[MessageQueue]) -> bytes:
    """LockBatchRequestBody / UnlockBatchRequestBody."""
    body: dict[str, Any] = {"consumerGroup": group, "clientId": client_id, "mqSet": [mq.to_obj() for mq in mqs]}
    return json.dumps(body).encode()
