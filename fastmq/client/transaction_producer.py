"""TransactionProducer: RocketMQ 4.9's TransactionMQProducer on asyncio.

A transactional send is three steps (DefaultMQProducerImpl.sendMessageInTransaction):

1. the *half*: an ordinary sync send (SEND_MESSAGE_V2, retried as :meth:`Producer.send` is) of
   the message with ``TRAN_MSG=true`` and ``PGROUP=<group>`` and without a delay level; the
   client API marks it PREPARED (sysFlag ``0x4``). The broker stores it where no consumer sees it.
2. the listener's ``execute_local_transaction(msg, arg)``, only when the half was stored
   (SEND_OK). A half answered FLUSH_DISK_TIMEOUT, FLUSH_SLAVE_TIMEOUT or SLAVE_NOT_AVAILABLE is
   rolled back without running it (its durability is not what was asked).
3. END_TRANSACTION, oneway, to the master of the broker that stored the half, carrying the
   state: COMMIT makes the message visible, ROLLBACK drops it, UNKNOW leaves it to the broker's
   check.

A half the broker still holds unresolved after ``transactionTimeOut`` is *checked*: the broker
sends CHECK_TRANSACTION_STATE to a producer of the half's ``PGROUP`` (any one it has a heartbeat
from, which is why :meth:`TransactionProducer.start` registers with every broker at once). The
client instance hands it here; the listener's ``check_local_transaction(msg)`` answers it and
the state goes back as END_TRANSACTION with ``fromTransactionCheck=true`` on the connection the
check came on. Plain-function checks run one at a time on a thread of their own (RocketMQ's
checkExecutor: ``checkThreadPoolMinSize``/``MaxSize`` 1), coroutine checks on the loop; at most
``check_request_hold_max`` (2000) wait or run at once, and a check beyond that is dropped with a
warning (the broker asks again at its next round).

A listener that raises counts as UNKNOW: the error is logged with its traceback and goes to the
broker in END_TRANSACTION's remark, as 4.9's does.
"""
from __future__ import annotations

import asyncio
import enum
import functools
import inspect
import logging
import zlib
from dataclasses import dataclass
from typing import Any, Awaitable, Protocol, runtime_checkable

from ..errors import ClientError, ConfigError, FastMQError, NoRouteError, RemotingCommandError
from ..protocol.command import RemotingCommand
from ..protocol.headers import CheckTransactionStateRequestHeader, EndTransactionRequestHeader
from ..protocol.message import Message, MessageConst, MessageExt, MessageSysFlag, decode_offset_msg_id, inflate_body
from ..protocol.message_queue import MessageQueue
from ..protocol.topic import AUTO_CREATE_TOPIC_KEY_TOPIC
from ..remoting import Connection
from .api import SendStatus
from .consume_pool import ConsumePool
from .producer import Producer, SendResult
from .trace_hooks import end_transaction_context, now_ms

__all__ = ["LocalTransactionState", "TransactionListener", "TransactionSendResult", "TransactionProducer",
           "local_state", "execute_local", "decide_local", "settle_local"]

log = logging.getLogger("fastmq.client")

_UNIQ_KEY = MessageConst.UNIQ_CLIENT_MESSAGE_ID_KEYIDX
# a half stored, but not as durably as the broker was asked to: 4.9 rolls it back unexecuted
_ROLLBACK_STATUSES = frozenset((SendStatus.FLUSH_DISK_TIMEOUT, SendStatus.FLUSH_SLAVE_TIMEOUT,
                                SendStatus.SLAVE_NOT_AVAILABLE))


class LocalTransactionState(str, enum.Enum):
    """What a local transaction ended with (RocketMQ's LocalTransactionState, its spelling).

    ``UNKNOWN`` is an alias of ``UNKNOW``. The values are the names, so a listener may also
    return the string ``"COMMIT_MESSAGE"``.
    """

    COMMIT_MESSAGE = "COMMIT_MESSAGE"
    ROLLBACK_MESSAGE = "ROLLBACK_MESSAGE"
    UNKNOW = "UNKNOW"
    UNKNOWN = "UNKNOW"

    @property
    def commit_or_rollback(self) -> int:
        """END_TRANSACTION's ``commitOrRollback``: the sysFlag transaction type of this state."""
        return _COMMIT_OR_ROLLBACK[self]


_COMMIT_OR_ROLLBACK = {LocalTransactionState.COMMIT_MESSAGE: MessageSysFlag.TRANSACTION_COMMIT_TYPE,
                       LocalTransactionState.ROLLBACK_MESSAGE: MessageSysFlag.TRANSACTION_ROLLBACK_TYPE,
                       LocalTransactionState.UNKNOW: MessageSysFlag.TRANSACTION_NOT_TYPE}


@runtime_checkable
class TransactionListener(Protocol):
    """What a :class:`TransactionProducer` asks about its transactions (RocketMQ's TransactionListener).

    Either method may be a plain function or a coroutine function (``async def``). Each returns
    a :class:`LocalTransactionState`; None, or an exception raised, counts as UNKNOW (the
    exception is logged). The id of the transaction is the message's UNIQ_KEY property
    (``msg.properties["UNIQ_KEY"]``), the same in both calls.
    """

    def execute_local_transaction(self, msg: Message, arg: Any) -> Any:
        """Run the local transaction of ``msg`` (its half is stored); ``arg`` is what
        ``send_message_in_transaction`` was given. Runs in the sender's thread (blocking API)
        or on the loop (asyncio API: a slow plain function there holds up the loop; make it a
        coroutine).

        Returns:
            LocalTransactionState (or an awaitable of one).
        """
        ...

    def check_local_transaction(self, msg: MessageExt) -> Any:
        """The state of the transaction of ``msg``, a half the broker still holds (its topic
        and queue are the real ones). A plain function runs on the producer's check thread, a
        coroutine on the loop.

        Returns:
            LocalTransactionState (or an awaitable of one).
        """
        ...


@dataclass(frozen=True, slots=True)
class TransactionSendResult:
    """The result of :meth:`TransactionProducer.send_message_in_transaction`: the half's
    SendResult fields, the transaction id and the state the transaction ended with here.

    Attributes:
        status: the half's send status (``SendStatus``).
        msg_id: the message's UNIQ_KEY.
        offset_msg_id: the broker's id of the stored half.
        message_queue: the queue the half was sent to (its real topic).
        queue_offset: the half's offset in the broker's half queue.
        transaction_id: the transaction's id, the message's UNIQ_KEY (what a check later
            carries). A 4.9.8 broker never sets the send answer's ``transactionId`` that the
            Java client reports here, so it is null there.
        local_transaction_state: COMMIT_MESSAGE, ROLLBACK_MESSAGE or UNKNOW (then the broker
            checks back later).
        region_id: the broker's MSG_REGION, when it gave one.
    """

    status: str
    msg_id: str
    offset_msg_id: str
    message_queue: MessageQueue
    queue_offset: int
    transaction_id: str
    local_transaction_state: LocalTransactionState
    region_id: str | None = None

    @property
    def send_status(self) -> str:
        """The Java name of :attr:`status`."""
        return self.status


def local_state(value: Any, what: str = "local transaction") -> LocalTransactionState:
    """A listener's return value as a LocalTransactionState: the enum, its name, or None
    (UNKNOW, as 4.9 takes a null). Anything else is logged and counts as UNKNOW."""
    if isinstance(value, LocalTransactionState):
        return value
    if value is None:
        return LocalTransactionState.UNKNOW
    if isinstance(value, str):
        try:
            return LocalTransactionState(value)
        except ValueError:
            pass
    log.warning("%s returned %r, not a LocalTransactionState: counted as UNKNOW", what, value)
    return LocalTransactionState.UNKNOW


def _error_text(exc: BaseException) -> str:
    """Java's ``Throwable.toString()`` shape, ``<class>: <message>``, for END_TRANSACTION's remark."""
    text = str(exc)
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


def execute_local(listener: TransactionListener, msg: Message, arg: Any
                  ) -> tuple[LocalTransactionState | Awaitable[Any], BaseException | None]:
    """Call ``listener.execute_local_transaction(msg, arg)`` in this thread. Returns its state,
    or the awaitable a coroutine function gave (for the caller to await, then pass to
    :func:`local_state`), and the exception it raised (then the state is UNKNOW, logged)."""
    try:
        r = listener.execute_local_transaction(msg, arg)
    except Exception as exc:
        log.warning("executeLocalTransactionBranch exception, transaction %s counted as UNKNOW: %s",
                    msg.properties.get(_UNIQ_KEY), exc, exc_info=exc)
        return LocalTransactionState.UNKNOW, exc
    if inspect.isawaitable(r):
        return r, None
    return local_state(r, "execute_local_transaction"), None


def decide_local(sent: SendResult, listener: TransactionListener, msg: Message, arg: Any
                 ) -> tuple[LocalTransactionState | Awaitable[Any], BaseException | None]:
    """Step 2 for the half ``sent``, in this thread: :func:`execute_local` when it was stored
    (SEND_OK); ROLLBACK_MESSAGE unexecuted after a flush or slave timeout; else UNKNOW."""
    if sent.status == SendStatus.SEND_OK:
        return execute_local(listener, msg, arg)
    if sent.status in _ROLLBACK_STATUSES:
        return LocalTransactionState.ROLLBACK_MESSAGE, None
    return LocalTransactionState.UNKNOW, None


async def settle_local(pending: Awaitable[Any], msg: Message) -> tuple[LocalTransactionState, BaseException | None]:
    """Await a coroutine listener's execute and judge its outcome as :func:`execute_local` does."""
    try:
        return local_state(await pending, "execute_local_transaction"), None
    except Exception as exc:
        log.warning("executeLocalTransactionBranch exception, transaction %s counted as UNKNOW: %s",
                    msg.properties.get(_UNIQ_KEY), exc, exc_info=exc)
        return LocalTransactionState.UNKNOW, exc


class TransactionProducer(Producer):
    """An asyncio transactional producer (RocketMQ's TransactionMQProducer); also sends
    ordinary messages as :class:`Producer` does. ``await start()``, then
    ``await send_message_in_transaction(msg, arg)``; ``await shutdown()`` at the end.

    Keep one running in the group for as long as the group has transactions left UNKNOW: the
    broker asks a producer of the group (the ``PGROUP`` the half carries) for their state, and
    with none registered it asks again every ``transactionCheckInterval`` (60 s) until it gives
    up after ``transactionCheckMax`` (15) checks. A producer restarted in the group answers them.
    """

    def __init__(self, group: str, *, listener: TransactionListener | None = None,
                 check_thread_pool_max_size: int = 1, check_request_hold_max: int = 2000, **kwargs: Any) -> None:
        """A transactional producer of ``group``; the blocking :class:`fastmq.TransactionProducer`
        takes the same arguments.

        Args:
            group: the producer group; the broker's checks find this producer by it.
            listener: runs and checks the local transactions (a ``TransactionListener``); may
                also be set later, as the ``listener`` attribute, before the first transactional send.
            check_thread_pool_max_size: threads running plain-function checks (4.9: 1).
            check_request_hold_max: checks waiting or running at once; more are dropped (4.9: 2000).
            kwargs: what :class:`Producer` takes (``namesrv_addr``, ``send_msg_timeout``, ...).

        Raises:
            MessageValidationError: a bad group name.
            ConfigError: a pool size or hold limit below 1.
        """
        super().__init__(group, **kwargs)
        if check_thread_pool_max_size < 1 or check_request_hold_max < 1:
            raise ConfigError("check_thread_pool_max_size and check_request_hold_max must be at least 1")
        self.listener = listener
        self.check_request_hold_max = check_request_hold_max
        self._check_pool = ConsumePool(check_thread_pool_max_size, f"TransactionCheck_{group}")
        self._checks = 0  # checks accepted and not yet answered
        self._tasks: set[asyncio.Future[Any]] = set()

    # -------------------------------------------------------- lifecycle

    async def start(self) -> None:
        """Start, and register as a producer of the group with every broker found now.

        The brokers are those of the auto-create topic's route (and any route already known):
        a broker checks only producers it has a heartbeat from, and a producer that has sent
        nothing yet (one restarted to answer its group's checks) would otherwise wait for the
        30 s heartbeat round, or a first send, to be found.
        """
        was_running = self._state == "RUNNING"
        await super().start()
        if was_running:
            return
        try:
            await self.instance.update_route(AUTO_CREATE_TOPIC_KEY_TOPIC)
        except FastMQError as exc:  # no route of it (autoCreateTopicEnable=false): found at the first send
            log.info("transaction producer %s: no route of %s to find brokers by: %s", self.group,
                     AUTO_CREATE_TOPIC_KEY_TOPIC, exc)
        await self.instance.send_heartbeat_to_all_brokers()

    async def shutdown(self) -> None:
        """Stop: checks not yet answered are dropped (the broker asks again), the check thread ends."""
        await super().shutdown()
        self._check_pool.shutdown()
        for t in list(self._tasks):
            t.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)

    async def __aenter__(self) -> "TransactionProducer":
        await self.start()
        return self

    # ------------------------------------------------------------ sending

    def _listener(self) -> TransactionListener:
        if self.listener is None:
            raise ClientError("TransactionListener is null")
        return self.listener

    async def send_half(self, msg: Message, timeout_ms: int | None = None) -> tuple[TransactionListener, SendResult]:
        """Step 1 of :meth:`send_message_in_transaction`: mark ``msg`` as a half of this group
        (``TRAN_MSG``, ``PGROUP``; its delay level cleared) and send it, synchronously, retried
        as :meth:`send` is. Returns the listener to run and the half's SendResult.

        Raises:
            ClientError: no listener ("TransactionListener is null").
            MessageValidationError, NoRouteError, BrokerError, SendFailedError: as :meth:`send`.
        """
        listener = self._listener()
        self._check_running()
        # 4.9 ignores a delay level on a transactional message: a half is never scheduled
        msg.properties.pop(MessageConst.DELAY_TIME_LEVEL, None)
        self._validate(msg)
        msg.properties[MessageConst.TRANSACTION_PREPARED] = "true"
        msg.properties[MessageConst.PRODUCER_GROUP] = self.group
        # the general path, not the compiled first try: only the client API's send_request marks
        # the request PREPARED (sysFlag 0x4) from TRAN_MSG
        begin = now_ms()
        sent = await self._send(msg, timeout_ms)
        assert sent is not None
        if self.trace_dispatcher is not None:
            self._trace_pub(msg, sent, begin)
        return listener, sent

    async def end_transaction(self, sent: SendResult, state: LocalTransactionState,
                              error: BaseException | None = None) -> None:
        """Step 3: END_TRANSACTION (oneway) for the half ``sent``, to the master of the broker
        that stored it; ``error``: what the local transaction raised, for the remark.

        Raises:
            NoRouteError: that broker's master is not known (any more).
            MessageFormatError: the half's offset message id cannot be read.
            RemotingError: the request could not be written.
        """
        broker = sent.message_queue.broker_name
        _, _, commit_log_offset = decode_offset_msg_id(sent.offset_msg_id or sent.msg_id)
        info = self._publish.get(sent.message_queue.topic)
        addr = (info.master_addr(broker) if info is not None else None) or self.instance.master_addr(broker)
        if addr is None:
            raise NoRouteError(f"The broker[{broker}] not exist")
        header = EndTransactionRequestHeader(
            producerGroup=self.group, tranStateTableOffset=sent.queue_offset, commitLogOffset=commit_log_offset,
            commitOrRollback=state.commit_or_rollback, msgId=sent.msg_id, fromTransactionCheck=False,
            # what 4.9.8 sends: the send answer's transactionId, which its broker never sets
            transactionId=None, bname=broker)
        remark = f"executeLocalTransactionBranch exception: {_error_text(error)}" if error is not None else None
        await self.instance.api.end_transaction_oneway(addr, header, remark, self.send_msg_timeout / 1000)

    async def finish_transaction(self, msg: Message, sent: SendResult, state: LocalTransactionState,
                                 error: BaseException | None) -> TransactionSendResult:
        """Step 3 and the result: an END_TRANSACTION that cannot be sent is logged, not raised
        (the broker's check resolves the half), as 4.9 does."""
        if state is not LocalTransactionState.COMMIT_MESSAGE:
            log.info("executeLocalTransactionBranch return %s, transaction %s", state.name, sent.msg_id)
        if self.trace_dispatcher is not None:  # (4.9.8 records it before sending END_TRANSACTION)
            self._trace_end(msg, sent.msg_id, self.instance.master_addr(sent.message_queue.broker_name), state,
                            msg.properties.get(_UNIQ_KEY, sent.msg_id), False)
        try:
            await self.end_transaction(sent, state, error)
        except FastMQError as exc:  # (MessageFormatError is one)
            log.warning("local transaction execute %s, but end broker transaction failed: %s", state.name, exc)
        return TransactionSendResult(sent.status, sent.msg_id, sent.offset_msg_id, sent.message_queue,
                                     sent.queue_offset, msg.properties.get(_UNIQ_KEY, sent.msg_id), state,
                                     sent.region_id)

    async def send_message_in_transaction(self, msg: Message, arg: Any = None,
                                          timeout_ms: int | None = None) -> TransactionSendResult:
        """Send ``msg`` as a transactional message: its half, then the listener's
        ``execute_local_transaction(msg, arg)`` (awaited when it is a coroutine), then
        END_TRANSACTION with the state it returned.

        Args:
            msg: the message; it gets ``TRAN_MSG``, ``PGROUP`` and ``UNIQ_KEY`` properties, and
                loses a delay level.
            arg: passed to the listener as it is.
            timeout_ms: for the half's send (default ``send_msg_timeout``).

        Returns:
            TransactionSendResult, whose ``local_transaction_state`` is UNKNOW when the listener
            raised (logged) or returned nothing, and ROLLBACK_MESSAGE when the half was stored
            with a flush or slave timeout (the listener is then not run).

        Raises:
            ClientError: no listener ("TransactionListener is null").
            MessageValidationError, NoRouteError, BrokerError, SendFailedError: the half was not
                sent (as :meth:`send`); nothing was executed.
        """
        listener, sent = await self.send_half(msg, timeout_ms)
        outcome, error = decide_local(sent, listener, msg, arg)
        if isinstance(outcome, LocalTransactionState):
            state = outcome
        else:
            state, error = await settle_local(outcome, msg)
        return await self.finish_transaction(msg, sent, state, error)

    # ------------------------------------------------------------ checks

    def check_transaction_state(self, conn: Connection, request: RemotingCommand, msg: MessageExt) -> None:
        """CHECK_TRANSACTION_STATE for this group, passed on by the client instance (on the
        loop) with the half decoded from the body: run the listener's check, then answer on
        ``conn``. Dropped, with a warning, when there is no listener, the header cannot be read,
        or ``check_request_hold_max`` checks are already held."""
        try:
            header = CheckTransactionStateRequestHeader.decode(request)
        except RemotingCommandError as exc:
            log.warning("check transaction state from %s: bad header: %s", conn.remote_addr, exc)
            return
        listener = self.listener
        if listener is None or self._state != "RUNNING":
            log.warning("CheckTransactionState, pick transactionListener by group[%s] failed", self.group)
            return
        if self._checks >= self.check_request_hold_max:
            log.warning("check transaction state of %s from %s dropped: %d checks held already "
                        "(check_request_hold_max); the broker checks again", header.transactionId,
                        conn.remote_addr, self._checks)
            return
        if msg.sys_flag & MessageSysFlag.COMPRESSED:
            try:
                msg.body = inflate_body(msg.body)
            except (zlib.error, ValueError) as exc:
                log.warning("check transaction state from %s: body does not decompress: %s", conn.remote_addr, exc)
        self._checks += 1
        done = functools.partial(self._checked, conn, header, msg)
        check = listener.check_local_transaction
        if inspect.iscoroutinefunction(check):
            self._track(self._check_coroutine(check(msg), done))
            return
        try:
            self._check_pool.submit(check, (msg,), done)
        except RuntimeError:  # shut down meanwhile
            self._checks -= 1

    def _track(self, coro: Awaitable[Any]) -> None:
        task = asyncio.ensure_future(coro)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _check_coroutine(self, pending: Awaitable[Any], done: Any) -> None:
        try:
            result = await pending
        except Exception as exc:
            done(None, exc)
            return
        done(result, None)

    def _checked(self, conn: Connection, header: CheckTransactionStateRequestHeader, msg: MessageExt,
                 result: Any, error: BaseException | None) -> None:
        """The check's outcome, on the loop: END_TRANSACTION from the check, on its connection."""
        if error is None and inspect.isawaitable(result):  # a plain function that handed back a coroutine
            self._track(self._check_coroutine(result, functools.partial(self._checked, conn, header, msg)))
            return
        self._checks -= 1
        if self._state != "RUNNING":  # shut down while the listener ran: the broker asks again
            log.info("check of transaction %s answered after shutdown: not sent", header.transactionId)
            return
        if error is not None:
            log.error("Broker call checkTransactionState, but checkLocalTransactionState exception, "
                      "transaction %s counted as UNKNOW: %s", header.transactionId, error, exc_info=error)
            state = LocalTransactionState.UNKNOW
        else:
            state = local_state(result, "check_local_transaction")
        uniq = msg.properties.get(_UNIQ_KEY) or msg.msg_id
        reply = EndTransactionRequestHeader(
            producerGroup=self.group, tranStateTableOffset=header.tranStateTableOffset,
            commitLogOffset=header.commitLogOffset, commitOrRollback=state.commit_or_rollback, msgId=uniq,
            fromTransactionCheck=True, transactionId=header.transactionId, bname=header.bname)
        if state is LocalTransactionState.ROLLBACK_MESSAGE:
            log.warning("when broker check, client rollback this transaction, %s", reply)
        elif state is LocalTransactionState.UNKNOW:
            log.warning("when broker check, client does not know this transaction state, %s", reply)
        remark = f"checkLocalTransactionState Exception: {_error_text(error)}" if error is not None else None
        if self.trace_dispatcher is not None:
            self._trace_end(msg, uniq, conn.remote_addr, state, header.transactionId, True)
        self._track(self._answer_check(conn, reply, remark))

    def _trace_end(self, msg: Message, msg_id: str, store_host: str | None, state: LocalTransactionState,
                   transaction_id: str | None, from_check: bool) -> None:
        """EndTransactionTraceHookImpl: the EndTransaction record of a half ended as ``state``."""
        d = self.trace_dispatcher
        assert d is not None
        if not d.skips(msg.topic):
            d.append(end_transaction_context(self.group, msg, msg_id, store_host, state.name, transaction_id,
                                             from_check))

    async def _answer_check(self, conn: Connection, reply: EndTransactionRequestHeader, remark: str | None) -> None:
        try:
            # 3000 ms: the timeout 4.9 gives this oneway request
            await self.instance.api.end_transaction_oneway(conn.remote_addr, reply, remark, 3.0, conn=conn)
        except FastMQError as exc:
            log.error("endTransactionOneway exception: %s", exc)
