"""What a producer shares with its compiled first try (``_ext/produce``): the
:class:`ProduceContext` it reads and calls back, the settings it keeps in C fields
(:class:`FastPathSetting`), and the in-flight permits (:class:`Permits`) a send takes."""
from __future__ import annotations

import asyncio
from typing import Any, Callable

from .._ext.codec import RemotingCommand
from .._ext.produce import AsyncSend
from ..errors import ConfigError
from ..protocol.message_queue import MessageQueue
from ..remoting import Connection
from .publish_info import TopicPublishInfo

__all__ = ["FastPathSetting", "int_of", "ProduceContext", "Permits"]


class FastPathSetting:
    """A producer setting that its compiled first try reads on every send. Each assignment
    converts the value once and stores it on the fast path too (a C field there, rather than a
    lookup in the producer's ``__dict__`` per send; or what ``apply(producer, value)`` makes of
    it), so a change reaches the next send, both paths read the same value, and a value that
    does not convert fails at the assignment, with ConfigError."""

    def __init__(self, convert: Callable[[Any], Any], apply: Callable[[Any, Any], None] | None = None) -> None:
        self.convert = convert
        self.apply = apply

    def __set_name__(self, owner: type, name: str) -> None:
        self.name = name

    def __get__(self, obj: Any, objtype: type | None = None) -> Any:
        return self if obj is None else obj.__dict__[self.name]

    def __set__(self, obj: Any, value: Any) -> None:
        try:
            converted = self.convert(value)
        except (TypeError, ValueError, OverflowError) as exc:
            raise ConfigError(f"{self.name} cannot be {value!r}: {exc}") from None
        if self.apply is None:
            setattr(obj._fast, self.name, converted)
        else:
            self.apply(obj, converted)
        obj.__dict__[self.name] = converted  # what the general path reads too: both take the same value


def int_of(bits: int) -> Callable[[Any], int]:
    """int(value), refused past a signed ``bits``-bit integer (the width of the fast path's field)."""
    def convert(value: Any) -> int:
        v = int(value)
        if not -(1 << (bits - 1)) <= v < (1 << (bits - 1)):
            raise OverflowError(f"out of the {bits}-bit range")
        return v
    return convert


class ProduceContext:
    """What a producer hands its compiled first try (SendFastPath and the AsyncSend entries it
    makes): the only state of the producer the fast path reads and the only calls it makes back
    (``fastmq._ext._protocols.ProduceContextProto`` says what each is for). The containers are
    the producer's own, shared, never rebound."""

    __slots__ = ("good_topics", "publish", "permits", "open_connection", "select", "update_fault", "send_answered",
                 "send_failed")

    def __init__(self, good_topics: set[str], publish: dict[str, TopicPublishInfo], permits: Permits | None,
                 open_connection: Callable[[str], Connection | None],
                 select: Callable[[TopicPublishInfo], MessageQueue],
                 update_fault: Callable[[str, int, bool], None],
                 send_answered: Callable[[AsyncSend, RemotingCommand], None],
                 send_failed: Callable[[AsyncSend, BaseException], None]) -> None:
        self.good_topics = good_topics
        self.publish = publish
        self.permits = permits
        self.open_connection = open_connection
        self.select = select
        self.update_fault = update_fault
        self.send_answered = send_answered
        self.send_failed = send_failed


class Permits(asyncio.Semaphore):
    """asyncio.Semaphore with a synchronous first try: a send that finds a permit free takes it
    without a coroutine call (asyncio's acquire costs a few microseconds even then)."""

    def try_acquire(self) -> bool:
        """Take a permit now if one is free and nobody is queued for one."""
        if self._value > 0 and not self._waiters:
            self._value -= 1
            return True
        return False

    def release(self) -> None:
        """asyncio's release, without its wake-up call when nobody waits (once per send)."""
        if self._waiters:
            super().release()
        else:
            self._value += 1
