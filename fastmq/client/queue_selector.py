"""Choosing a queue for an orderly send: RocketMQ's ``MessageQueueSelector`` and its
``SelectMessageQueueByHash``, hashing as the Java client does so that every process, Java
producers included, sends one key to one queue."""
from __future__ import annotations

from typing import Callable, Sequence

from ..protocol.message import Message, java_string_hash
from ..protocol.message_queue import MessageQueue

__all__ = ["MessageQueueSelector", "java_hash_code", "hash_selector"]

MessageQueueSelector = Callable[[Sequence[MessageQueue], Message, object], MessageQueue]


def java_hash_code(arg: object) -> int:
    """``arg.hashCode()`` as the Java client computes it for the same value, a signed int32.

    A str is Java's String.hashCode; a bool Boolean's (1231/1237); an int Integer's (itself) when
    it fits 32 bits, else Long's (``(int)(v ^ (v >>> 32))`` of its 64-bit two's complement). Any
    other value is hashed as ``str(arg)``: never Python's ``hash()``, which differs per process
    for strings, so two producers would send one key to different queues.
    """
    if isinstance(arg, bool):
        return 1231 if arg else 1237
    if isinstance(arg, int):
        if -0x80000000 <= arg <= 0x7FFFFFFF:
            return arg
        v = arg & 0xFFFFFFFFFFFFFFFF
        h = (v ^ (v >> 32)) & 0xFFFFFFFF
        return h - 0x100000000 if h & 0x80000000 else h
    return java_string_hash(arg if isinstance(arg, str) else str(arg))


def hash_selector(mqs: Sequence[MessageQueue], msg: Message, arg: object) -> MessageQueue:
    """SelectMessageQueueByHash: ``abs(arg.hashCode() % size)`` with Java's hashCode
    (:func:`java_hash_code`), so every process and a Java producer pick the same queue."""
    # Java's % truncates toward zero, then the sign is dropped: abs(h) % n is the same number
    return mqs[abs(java_hash_code(arg)) % len(mqs)]
