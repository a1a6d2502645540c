"""One exception tree for all of fastmq.

Transport errors are also the builtin they resemble (a ``FrameError`` is a
``ValueError``, a ``RemotingTimeoutError`` is a ``TimeoutError``), so callers
that only know the standard library still catch them. Broker answers with a
non-zero response code become :class:`BrokerError` subclasses looked up through
:func:`BrokerError.for_code`; retry loops read ``exc.retriable`` instead of
comparing codes.
"""
from __future__ import annotations

from typing import ClassVar

# The one pure-data module this floor reads: the retriable set is a wire fact, declared with the codes.
from .protocol.codes import RETRY_RESPONSE_CODES

__all__ = [
    "FastMQError",
    "RemotingError",
    "FrameError",
    "RemotingCommandError",
    "RemotingConnectError",
    "RemotingSendRequestError",
    "RemotingTimeoutError",
    "RemotingTooMuchRequestError",
    "ConfigError",
    "FilterExpressionError",
    "FilterRefusedError",
    "BrokerError",
    "ClientError",
    "NoNameServerError",
    "NoRouteError",
    "BadRouteError",
    "MessageValidationError", "TimerMessageError",
    "ClientStateError",
    "SendFailedError",
    "SendTimeoutError",
    "RequestSendError",
    "RequestTimeoutError",
    "FAQ_SUFFIX",
]

#: What the Java client appends to its own errors' texts (FAQUrl.suggestTodo).
FAQ_SUFFIX = "\nSee http://rocketmq.apache.org/docs/faq/ for further details."


class FastMQError(Exception):
    """Base class of every error fastmq raises on purpose."""


class ConfigError(FastMQError, ValueError):
    """A configuration file or option is invalid."""


class FilterExpressionError(FastMQError, ValueError):
    """A SQL92 filter expression that does not parse (``str()`` is 4.9.8's text) or is over the
    size limits."""


class RemotingError(FastMQError):
    """Something went wrong below the request/response level."""


class FrameError(RemotingError, ValueError):
    """Bytes that are not a valid RemotingCommand frame.

    Raised by every codec twin for: a total length over the maximum frame, a
    header length past the frame, a truncated frame, invalid JSON or UTF-8, an
    unknown serialize type, or a header field of the wrong type. The server
    logs the reason and closes only the offending connection.
    """


class RemotingCommandError(RemotingError, ValueError):
    """A well-framed command whose header fields are missing or malformed
    (RocketMQ's RemotingCommandException): answered, not a reason to close."""


class RemotingConnectError(RemotingError, ConnectionError):
    """Could not connect to ``addr`` (or the connection was lost)."""

    def __init__(self, addr: str, reason: str = "") -> None:
        self.addr = addr
        super().__init__(f"connect to {addr} failed" + (f": {reason}" if reason else ""))


class RemotingSendRequestError(RemotingError, ConnectionError):
    """The request could not be written to ``addr``."""

    def __init__(self, addr: str, reason: str = "") -> None:
        self.addr = addr
        super().__init__(f"send request to {addr} failed" + (f": {reason}" if reason else ""))


class RemotingTimeoutError(RemotingError, TimeoutError):
    """No response from ``addr`` within ``timeout_ms``."""

    def __init__(self, addr: str, timeout_ms: float) -> None:
        self.addr = addr
        self.timeout_ms = timeout_ms
        super().__init__(f"wait response on the channel <{addr}> timeout, {int(round(timeout_ms))}(ms)")


class RemotingTooMuchRequestError(RemotingError):
    """The async or oneway permits are exhausted (too many requests in flight)."""


class BrokerError(FastMQError):
    """A server answered with a non-zero response code.

    ``code`` is the response code, ``remark`` the server's text. Subclasses
    register themselves per code; :meth:`for_code` builds the right one.
    """

    code: int = -1
    _registry: ClassVar[dict[int, type["BrokerError"]]] = {}

    def __init__(self, code: int, remark: str | None = None) -> None:
        self.code = code
        self.remark = remark or ""
        super().__init__(f"CODE: {code}  DESC: {self.remark}")

    def __init_subclass__(cls, *, codes: tuple[int, ...] = (), **kw: object) -> None:
        super().__init_subclass__(**kw)
        for c in codes:
            if c in BrokerError._registry:
                raise RuntimeError(f"response code {c} registered twice")
            BrokerError._registry[c] = cls

    @property
    def retriable(self) -> bool:
        """True when a producer tries the send again (``protocol.codes.RETRY_RESPONSE_CODES``)."""
        return self.code in RETRY_RESPONSE_CODES

    @staticmethod
    def for_code(code: int, remark: str | None = None) -> "BrokerError":
        """The exception for response ``code`` (a plain BrokerError if unknown)."""
        return BrokerError._registry.get(code, BrokerError)(code, remark)


class SystemError_(BrokerError, codes=(1,)):
    pass


class SystemBusyError(BrokerError, codes=(2,)):
    pass


class RequestCodeNotSupportedError(BrokerError, codes=(3,)):
    pass


class MessageIllegalError(BrokerError, codes=(13,)):
    pass


class ServiceNotAvailableError(BrokerError, codes=(14,)):
    pass


class NoPermissionError(BrokerError, codes=(16,)):
    pass


class TopicNotExistError(BrokerError, codes=(17,)):
    pass


class QueryNotFoundError(BrokerError, codes=(22,)):
    pass


class SubscriptionError(BrokerError, codes=(23, 24, 25, 26, 27, 28)):
    """SUBSCRIPTION_PARSE_FAILED .. SUBSCRIPTION_NOT_LATEST (23-26), FILTER_DATA_NOT_EXIST and
    FILTER_DATA_NOT_LATEST (27, 28)."""


class FilterRefusedError(BrokerError):
    """A broker refused a consumer's SQL92 subscription when it started (CHECK_CLIENT_CONFIG, as
    the Java client's start fails): ``code`` 1 when the broker does not serve SQL92 filters
    (``enablePropertyFilter`` off), 23 when the expression does not compile (``remark`` is the
    parser's text). ``topic`` and ``expression`` name the subscription."""

    def __init__(self, code: int, remark: str | None = None, *, topic: str = "", expression: str = "") -> None:
        super().__init__(code, remark)
        self.topic = topic
        self.expression = expression


class ConsumerNotOnlineError(BrokerError, codes=(206,)):
    pass


class UnitError(BrokerError, codes=(204, 205)):
    """NO_BUYER_ID (204) / NOT_IN_CURRENT_UNIT (205)."""


class ClientError(FastMQError):
    """A client-side failure (RocketMQ's MQClientException); ``code`` is a response code when one applies."""

    def __init__(self, message: str, code: int | None = None) -> None:
        super().__init__(message)
        self.code = code


class NoNameServerError(ClientError):
    """The client has no NameServer address to ask."""


class NoRouteError(ClientError):
    """No NameServer knows a route for the topic (and auto-creation through TBW102 found none)."""


class BadRouteError(NoRouteError):
    """A NameServer's route for the topic cannot be used (a queue count outside the client's
    ``max_topic_queue_nums`` range); the topic is treated as having no route."""


class MessageValidationError(ClientError, ValueError):
    """A message the client refuses to send (topic name, empty or oversized body...)."""


class TimerMessageError(MessageValidationError):
    """A timer message's time the client refuses: in the past, too far ahead, or both a deliver
    time and a delay given."""


class ClientStateError(ClientError):
    """A call the client's state does not allow (send before start, after shutdown)."""


class SendFailedError(ClientError):
    """Every try of a send failed: RocketMQ's "Send [N] times, still failed" with the last cause chained."""


class SendTimeoutError(SendFailedError, RemotingTooMuchRequestError):
    """The caller's timeout ran out with tries left: the Java producer's
    RemotingTooMuchRequestException("sendDefaultImpl call timeout"), the last try's error chained."""


class RequestSendError(ClientError):
    """A request (``Producer.request``) could not be sent: RocketMQ's "send request message to
    <topic> fail", the send's own error chained as ``__cause__``. No reply will come."""

    sent = False


class RequestTimeoutError(ClientError, TimeoutError):
    """No reply to a request within its timeout (RocketMQ's RequestTimeoutException, code 10006).

    ``sent`` says whether the broker had taken the request by then: True is RocketMQ's "send
    request message to <topic> OK, but wait reply message timeout"; False means the send was
    still unanswered when the time ran out (the request may or may not have been stored)."""

    def __init__(self, message: str, sent: bool, code: int | None = 10006) -> None:
        super().__init__(message, code)
        self.sent = sent
