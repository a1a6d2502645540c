"""A traced producer's answered sends kept as RocketMQ 4.9.8's Pub records until its trace
dispatcher sends them: the pure-Python reference of ``trace_encode_c``.

:class:`PubRows` takes each answered send's fields as it ends (on the client's loop) and writes
its record at once, as UTF-8 text in one growing buffer: 4.9.8's ``Pub`` text
(TraceDataEncoder), its fields joined by ``\\x01`` and ended by ``\\x02``::

    Pub, timeStamp, regionId, groupName, topic, msgId, tags, keys, storeHost, bodyLength,
    costTime, msgType ordinal, offsetMsgId, success

``null`` stands for a missing string, as Java's StringBuilder writes it. Beside the text it keeps
each record's keys (its msgId, then its message's keys split on spaces), what a broker indexes
the trace message by (:meth:`PubRows.add_text` takes other events, encoded already). No object
is kept per send: the dispatcher's thread, a :class:`TracePacker`, later cuts the buffer into
trace messages (:meth:`PubRows.chunk`), makes their KEYS (:func:`join_keys`) and compresses them.

Text that UTF-8 cannot encode (a lone surrogate) is written as ``?``, as Java's
``String.getBytes`` writes it.
"""
from __future__ import annotations

import os
import threading
import time
import zlib
from typing import Any, Callable

from ..protocol.message_const import NAME_VALUE_SEPARATOR, PROPERTY_SEPARATOR, MessageConst

__all__ = ["PubRows", "TracePacker", "join_keys"]

_TYPE_TEXT = ("0", "1", "2", "3")  # MessageType's ordinals
_SEP = MessageConst.KEY_SEPARATOR.encode("ascii")


def _utf8(s: str) -> bytes:
    return s.encode("utf-8", "replace")


class PubRows:
    """Pub records of answered sends, at most ``limit`` of them (see the module's notes).

    ``trace_topic``: sends to it (or a topic it begins) are not recorded; ``group``: the
    producer's group, in every record; ``store_host(broker name)``: the broker's address, or
    None (``null``), asked once per broker name until the rows are taken; ``wake_at``: the count
    at which :meth:`add` says so.
    """

    __slots__ = ("trace_topic", "group", "store_host", "limit", "wake_at", "_text", "_keys", "_ends", "_hosts")

    def __init__(self, trace_topic: str, group: str, store_host: Callable[[Any], str | None], limit: int,
                 wake_at: int) -> None:
        self.trace_topic = trace_topic
        self.group = group
        self.store_host = store_host
        self.limit = limit
        self.wake_at = wake_at
        self._text = bytearray()
        self._keys = bytearray()
        self._ends: list[tuple[int, int]] = []  # per record: its end in _text, in _keys
        self._hosts: dict[Any, str] = {}

    def __len__(self) -> int:
        return len(self._ends)

    def add(self, begin_ms: int, end_ms: int, topic: str, msg_id: str, tags: str | None, keys: str | None,
            broker: Any, length: int, mtype: int, offset_id: Any, ok: bool, region: str) -> int:
        """Record one answered send (``ok``: its status was SEND_OK; ``mtype``: MessageType's
        ordinal). Returns 0, or 1 when this record made the count ``wake_at``, or -1 when
        ``limit`` records are held already (nothing recorded: the caller counts the drop).
        A send to the trace topic is not recorded (0). TypeError when a text field is not a
        str (tags and keys: or None), ValueError for an unknown ``mtype``."""
        n = len(self._ends)
        if n >= self.limit:
            return -1
        if (type(topic) is not str or type(msg_id) is not str or type(region) is not str
                or (tags is not None and type(tags) is not str) or (keys is not None and type(keys) is not str)):
            raise TypeError("a Pub record's text field is not a str")
        if not 0 <= mtype <= 3:
            raise ValueError(f"message type ordinal {mtype!r}")
        if topic.startswith(self.trace_topic):
            return 0
        host = self._hosts.get(broker)
        if host is None:
            addr = self.store_host(broker)
            host = self._hosts[broker] = "null" if addr is None else str(addr)
        self._text += _utf8(NAME_VALUE_SEPARATOR.join((
            "Pub", str(begin_ms), region, self.group, topic, msg_id, "null" if tags is None else tags,
            "null" if keys is None else keys, host, str(length), str(end_ms - begin_ms), _TYPE_TEXT[mtype],
            "null" if offset_id is None else str(offset_id), "true" if ok else "false")) + PROPERTY_SEPARATOR)
        self._keys += _utf8(msg_id) + _SEP
        if keys:
            self._keys += _utf8(keys) + _SEP
        self._ends.append((len(self._text), len(self._keys)))
        return 1 if n + 1 == self.wake_at else 0

    def add_text(self, text: bytes, keys: bytes) -> int:
        """Record an event already encoded (its records' UTF-8 text, its keys each followed by a
        space): as :meth:`add`, 0, 1 or -1."""
        if type(text) is not bytes or type(keys) is not bytes:
            raise TypeError("an encoded event's text and keys are bytes")
        n = len(self._ends)
        if n >= self.limit:
            return -1
        self._text += text
        self._keys += keys
        self._ends.append((len(self._text), len(self._keys)))
        return 1 if n + 1 == self.wake_at else 0

    def take(self) -> PubRows:
        """Everything held, moved to a new PubRows of the same settings; this one is left empty
        and asks ``store_host`` again."""
        out = PubRows(self.trace_topic, self.group, self.store_host, self.limit, self.wake_at)
        out._text, out._keys, out._ends = self._text, self._keys, self._ends
        self._text, self._keys, self._ends, self._hosts = bytearray(), bytearray(), [], {}
        return out

    def chunk(self, start: int, room: int, keys_room: int | None = None) -> tuple[bytes, bytes, int]:
        """Records ``start`` onwards as long as their text stays below ``room`` bytes (and their
        keys below ``keys_room``, when given), and the one that reaches it (at least one record
        when there is one): their text, their keys (space-separated) and the index after them."""
        ends = self._ends
        if not 0 <= start <= len(ends):
            raise IndexError(f"record {start} of {len(ends)}")
        t0, k0 = ends[start - 1] if start else (0, 0)
        j = start
        while j < len(ends):
            j += 1
            t, k = ends[j - 1]
            if t - t0 >= room or (keys_room is not None and k - k0 >= keys_room):
                break
        t1, k1 = ends[j - 1] if j else (0, 0)
        return bytes(self._text[t0:t1]), bytes(self._keys[k0:k1]), j


def join_keys(raw: bytes) -> str:
    """The words of ``raw`` (separated by spaces), each once, in the order first seen, joined by
    spaces: a trace message's KEYS."""
    return _SEP.join(dict.fromkeys(w for w in raw.split(_SEP) if w)).decode("utf-8", "replace")


#: bytes of a message's text kept for the log of a failed send
_HEAD = 500

#: what :meth:`TracePacker.take_ready` returns per message: body, compressed, KEYS, the text's start
Packed = tuple[bytes, bool, str, bytes]


class TracePacker:
    """A trace dispatcher's worker: batches of records (:class:`PubRows`) handed over from the
    loop are cut into trace messages on the packer's own thread (:meth:`run`).

    A message is made once its records reach ``fill`` bytes, their keys ``keys_fill`` bytes, or its
    first record is ``wait_s`` old. Its body is its records' text, zlib-compressed at ``level``
    from ``compress_over`` bytes; its KEYS each record's keys once, cut after the last whole word
    within ``keys_max`` bytes. The loop picks the messages up with :meth:`take_ready`; the thread
    writes a byte to ``notify_fd`` (when not -1) whenever there were none waiting, so that a loop
    watching it knows when to. At most ``jobs_max`` batches wait for the thread; :meth:`submit`
    refuses one more. Records that cannot be packed for want of memory are counted in ``lost``.

    (The compiled twin's thread never takes the GIL; this one's does, as any Python thread.)
    """

    def __init__(self, fill: int, keys_fill: int, keys_max: int, compress_over: int, level: int, wait_s: float,
                 jobs_max: int, notify_fd: int = -1) -> None:
        if fill <= 0 or keys_fill <= 0 or keys_max <= 0 or jobs_max <= 0:
            raise ValueError("fill, keys_fill, keys_max and jobs_max must be positive")
        self.fill, self.keys_fill, self.keys_max = fill, keys_fill, keys_max
        self.compress_over, self.level, self.wait_s = compress_over, level, wait_s
        self.jobs_max, self.notify_fd = jobs_max, notify_fd
        self.lost = 0
        self._mutex = threading.Lock()
        self._wake = threading.Lock()
        self._wake.acquire()  # held while there is nothing to do
        self._posted = False
        self._jobs: list[tuple[PubRows, int]] = []
        self._ready: list[Packed | int] = []
        # the thread's own: the next message's records and keys, and when its first record came
        self._text = bytearray()
        self._keys = bytearray()
        self._first_at = 0.0

    @property
    def jobs_waiting(self) -> int:
        """Batches handed over and not yet taken by the thread."""
        return len(self._jobs)

    def submit(self, rows: PubRows, token: int = 0) -> bool:
        """Hand everything ``rows`` holds to the thread, leaving ``rows`` empty (it asks its
        ``store_host`` again). ``token``: 0 for a batch; above 0, the thread then packs what it
        holds and reports the token back (:meth:`take_ready`) after its messages; -1, that, and
        the thread ends. False (``rows`` untouched) for a batch when ``jobs_max`` are waiting."""
        with self._mutex:
            if token == 0 and len(self._jobs) >= self.jobs_max:
                return False
            self._jobs.append((rows.take(), token))
            if not self._posted:
                self._posted = True
                self._wake.release()
        return True

    def take_ready(self) -> list[Packed | int]:
        """What the thread has made since the last call, in order: a message as ``(body,
        compressed, keys, head)`` (``head``: the start of its text, for a log), or the token of
        a flush or stop that is done."""
        with self._mutex:
            ready, self._ready = self._ready, []
        return ready

    def run(self) -> None:
        """The thread's body: returns once a stop (token -1) is done."""
        while True:
            with self._mutex:
                jobs, self._jobs = self._jobs, []
                if not jobs:
                    self._posted = False
            if not jobs:
                wait = -1.0 if not self._text else max(0.0, self._first_at + self.wait_s - time.monotonic())
                if not self._wake.acquire(True, wait):
                    self._pack()  # the first record waited long enough
                continue
            for rows, token in jobs:
                self._take(rows)
                if token:
                    self._pack()
                    self._push(token)
                    if token < 0:
                        return

    def _take(self, rows: PubRows) -> None:
        """A batch's records into the next messages, a message packed once it is full."""
        i, n = 0, len(rows)
        while i < n:
            text, keys, i = rows.chunk(i, self.fill - len(self._text), self.keys_fill - len(self._keys))
            if not self._text:
                self._first_at = time.monotonic()
            self._text += text
            self._keys += keys
            if len(self._text) >= self.fill or len(self._keys) >= self.keys_fill:
                self._pack()

    def _pack(self) -> None:
        if not self._text:
            return
        data, raw = bytes(self._text), bytes(self._keys)
        self._text.clear()
        self._keys.clear()
        keys = join_keys(raw).encode("utf-8")
        if len(keys) > self.keys_max:
            cut = keys.rfind(_SEP, 0, self.keys_max + 1)
            keys = keys[:cut] if cut > 0 else b""
        compressed = len(data) >= self.compress_over
        body = zlib.compress(data, self.level) if compressed else data
        self._push((body, compressed, keys.decode("utf-8", "replace"), data[:_HEAD]))

    def _push(self, item: Packed | int) -> None:
        with self._mutex:
            was_empty = not self._ready
            self._ready.append(item)
        if was_empty and self.notify_fd >= 0:
            try:
                os.write(self.notify_fd, b"x")
            except BlockingIOError:  # a full pipe has told the loop already
                pass
