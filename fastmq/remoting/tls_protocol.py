"""TLS over a plain transport, lean: ``ssl.SSLObject`` on two ``ssl.MemoryBIO``, one object that
is both the socket transport's protocol and the application's transport.

What asyncio's ``sslproto.SSLProtocol`` (and uvloop's compiled copy of it) does per read and per
write, for a request-answer connection, costs more than OpenSSL's own work on the record: a state
machine, a write backlog, buffered-protocol emulation, flow-control bookkeeping on every call, and
a read that always ends in an ``SSLWantReadError`` (an exception object built per read, most of an
``SSL_read``'s price again). Here a read feeds the socket's bytes to the incoming BIO and decrypts
every whole record straight into the application's buffer, stopping without that extra read when
the BIO is empty; a write encrypts and hands the socket transport one write.

Kept from the asyncio protocol: the handshake with its timeout (a peer that does not finish is
aborted), the application's ``connection_made`` only once the handshake is done (bytes that came
with the handshake's last flight are delivered right after it), SNI and client certificates (the
context's own callbacks: see :func:`fastmq.remoting.tls.switching_server_context`),
``get_extra_info`` (``ssl_object``, ``peercert``, ``cipher``, ``compression``, ``sslcontext``, and
the socket's keys), flow control in both directions, ``close`` sending close_notify, ``abort``, a
close_notify or a TCP EOF from the peer passed on as ``eof_received``, and errors ending the
connection with the exception given to ``connection_lost``. Only the transport interface of the
socket's transport is used, so it runs on asyncio's loop and on uvloop alike.
"""
from __future__ import annotations

import asyncio
import logging
import ssl
from typing import Any, Callable, TypeVar

from .connection import Connection, _read_buffer

__all__ = ["TlsTransport", "open_tls_connection"]

log = logging.getLogger("fastmq.remoting")

P = TypeVar("P", bound=asyncio.BaseProtocol)

_HANDSHAKING, _WRAPPED, _CLOSED = 0, 1, 2
#: bytes read at once from a non-buffered application's point of view (a TLS record's plaintext
#: is at most 16 KiB: a few records a read)
_PLAIN_CHUNK = 64 * 1024
#: what one SSL_read into the read buffer asks for: a record's plaintext at most (16 KiB), so
#: what it returns is always less, and an empty incoming BIO then means nothing is left
_DIRECT_READ = 16 * 1024 + 1


class TlsTransport(asyncio.Transport, asyncio.BufferedProtocol):
    """TLS between ``raw`` (the socket transport, whose protocol this is) and ``app`` (whose
    transport this is).

    ``waiter`` (a future) gets the handshake's outcome: None once ``app`` has been given this
    transport, else the exception that ended it (the connection is then closed and ``app`` never
    saw it). ``handshake_timeout`` seconds bound the handshake.
    """

    def __init__(self, loop: asyncio.AbstractEventLoop, app: asyncio.BaseProtocol, context: ssl.SSLContext,
                 waiter: "asyncio.Future[None] | None" = None, *, server_side: bool = False,
                 server_hostname: str | None = None, handshake_timeout: float = 10.0) -> None:
        super().__init__()
        self._loop = loop
        self._app = app
        self._buffered_app = isinstance(app, asyncio.BufferedProtocol)
        #: a remoting Connection takes a view of the decrypted bytes in its data_received
        #: (its get_buffer/buffer_updated are a way there, two Python calls more per read)
        self._view_app = isinstance(app, Connection)
        self._context = context
        self._waiter = waiter
        self._incoming = ssl.MemoryBIO()
        self._outgoing = ssl.MemoryBIO()
        self._sslobj = context.wrap_bio(self._incoming, self._outgoing, server_side=server_side,
                                        server_hostname=server_hostname)
        # the per-record calls go to the C object under ssl.SSLObject (its methods are one-line
        # Python wrappers around it: a frame each, per read and per write); the public object
        # still serves the handshake, the callbacks and get_extra_info
        core = getattr(self._sslobj, "_sslobj", self._sslobj)
        self._ssl_read: Any = core.read  # (with a buffer it returns a count: typeshed says bytes)
        self._ssl_write = core.write
        self._raw_write: Callable[[Any], None] | None = None
        self._handshake_timeout = handshake_timeout
        self._timer: asyncio.TimerHandle | None = None
        self._raw: Any = None
        self._rbuf: memoryview | None = None
        self._state = _HANDSHAKING
        #: wrapped, not closing, nothing in the backlog: a write goes straight through
        self._fast = False
        #: wrapped, not closing, reading, the application a Connection: buffer_updated decrypts
        #: into the read buffer and hands the Connection a view of it
        self._direct = False
        self._closing = False        # close() or abort() called, or the connection failed
        self._app_connected = False  # app.connection_made ran (so app.connection_lost is owed)
        self._reading_paused = False  # by the application
        self._backlog: list[bytes] = []  # plaintext written while OpenSSL wanted to read first
        self._read_again: asyncio.Handle | None = None

    # ------------------------------------------------ the socket transport's protocol

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self._raw = transport
        self._raw_write = transport.write  # type: ignore[attr-defined]
        self._rbuf = _read_buffer(self._loop)
        if self._handshake_timeout and self._handshake_timeout > 0:
            self._timer = self._loop.call_later(self._handshake_timeout, self._handshake_expired)
        self._do_handshake()

    def feed(self, data: bytes) -> None:
        """Take ``data`` as if the socket had just read it (the bytes a sniffer read first)."""
        if data:
            self._incoming.write(data)
            self._received()

    def get_buffer(self, sizehint: int) -> memoryview:
        buf = self._rbuf
        if buf is None:
            buf = self._rbuf = _read_buffer(self._loop)
        return buf

    def buffer_updated(self, nbytes: int) -> None:
        # (the buffer is the loop's shared one, which the application's reads may use too:
        # its bytes are copied into the BIO before anything is decrypted into it)
        rbuf: Any = self._rbuf
        incoming = self._incoming
        incoming.write(rbuf[:nbytes])
        if not self._direct:
            self._received()
            return
        # the common case, a Connection reading whole records: one SSL_read into the read
        # buffer, its view to data_received; anything else goes on in _read_app
        try:
            n = self._ssl_read(_DIRECT_READ, rbuf)
        except ssl.SSLWantReadError:  # a partial record, or one with no application data
            if self._outgoing.pending:
                self._flush_outgoing()
            return
        except ssl.SSLError as exc:
            self._fail(exc)
            return
        if n:
            self._app.data_received(rbuf[:n])  # type: ignore[attr-defined]
            if incoming.pending or self._outgoing.pending or self._backlog or n == _DIRECT_READ:
                if self._direct:
                    self._read_app()
                elif self._outgoing.pending:
                    self._flush_outgoing()
        elif self._state == _WRAPPED:  # the peer's close_notify
            self._state = _CLOSED
            self._direct = False
            self._fast = False
            self._app_eof()

    def data_received(self, data: bytes) -> None:
        self._incoming.write(data)
        self._received()

    def _received(self) -> None:
        if self._state == _WRAPPED:
            if not self._reading_paused:
                self._read_app()
        elif self._state == _HANDSHAKING:
            self._do_handshake()
        # (_CLOSED: what comes after close_notify, or after a failure, is dropped)

    def eof_received(self) -> bool | None:
        if self._state == _HANDSHAKING:
            self._fail(ConnectionResetError("the peer closed the connection during the TLS handshake"))
            return None
        if self._state == _WRAPPED:
            self._state = _CLOSED
            self._direct = False
            self._app_eof()
        return None  # (False: the socket transport closes itself)

    def pause_writing(self) -> None:
        if self._app_connected:
            self._app.pause_writing()

    def resume_writing(self) -> None:
        if self._app_connected:
            self._app.resume_writing()

    def connection_lost(self, exc: Exception | None) -> None:
        self._state = _CLOSED
        self._direct = False
        self._closing = True
        self._fast = False
        self._cancel_timer()
        if self._read_again is not None:
            self._read_again.cancel()
            self._read_again = None
        self._backlog = []
        if self._app_connected:
            self._app_connected = False
            self._loop.call_soon(self._app.connection_lost, exc)
        else:
            self._wake(exc or ConnectionResetError("the connection was lost during the TLS handshake"))
        self._raw = None

    # --------------------------------------------------------------- handshake

    def _do_handshake(self) -> None:
        try:
            self._sslobj.do_handshake()
        except ssl.SSLWantReadError:
            self._flush_outgoing()
            return
        except Exception as exc:  # ssl.SSLError, ssl.CertificateError, a callback's error
            self._flush_outgoing()  # (the alert that tells the peer why)
            self._fail(exc)
            return
        self._cancel_timer()
        self._state = _WRAPPED
        self._fast = True
        self._direct = self._view_app and not self._reading_paused
        self._flush_outgoing()  # (the last flight, and a server's session tickets)
        self._app_connected = True
        self._app.connection_made(self)
        self._wake(None)
        if self._state == _WRAPPED and not self._reading_paused and self._incoming.pending:
            self._read_app()  # application data that came with the handshake's last flight

    def _handshake_expired(self) -> None:
        self._timer = None
        if self._state == _HANDSHAKING:
            self._fail(ConnectionAbortedError(
                f"SSL handshake is taking longer than {self._handshake_timeout} seconds: aborting the connection"))

    def _cancel_timer(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None

    def _wake(self, exc: BaseException | None) -> None:
        waiter, self._waiter = self._waiter, None
        if waiter is not None and not waiter.done():
            if exc is None:
                waiter.set_result(None)
            else:
                waiter.set_exception(exc)

    def _fail(self, exc: Exception) -> None:
        """End the connection now: the socket aborted, the handshake's waiter or the application
        told (through connection_lost, with ``exc``)."""
        if self._app_connected:  # (the application hears of it too, in its connection_lost)
            log.debug("TLS connection with %s failed: %r", self.get_extra_info("peername"), exc)
        self._state = _CLOSED
        self._direct = False
        self._closing = True
        self._fast = False
        self._cancel_timer()
        self._wake(exc)
        raw = self._raw
        if self._app_connected:
            # (the application hears the reason; the socket's own connection_lost then finds
            # nothing owed)
            self._app_connected = False
            self._loop.call_soon(self._app.connection_lost, exc)
        if raw is not None:
            raw.abort()

    # ------------------------------------------------------------------- reads

    def _read_app(self) -> None:
        """Decrypt what the incoming BIO holds into the application, all of it in one call of
        ``buffer_updated`` while its buffer has room."""
        incoming, read, app = self._incoming, self._ssl_read, self._app
        eof = False
        try:
            if self._buffered_app:
                while True:
                    buf = app.get_buffer(-1)  # type: ignore[attr-defined]
                    size = len(buf)
                    if not size:
                        raise RuntimeError("get_buffer() returned an empty buffer")
                    n = read(size, buf)
                    if not n:
                        eof = True
                        break
                    # SSL_read returns one record's plaintext at most: less than asked for and
                    # an empty BIO is all there is (no read ending in SSLWantReadError, an
                    # exception object per read); a full buffer, or more records, go on
                    if n < size and incoming.pending:
                        view = memoryview(buf)
                        try:
                            while n < size and incoming.pending:
                                got = read(size - n, view[n:])
                                if not got:
                                    eof = True
                                    break
                                n += got
                        except ssl.SSLWantReadError:
                            pass  # (a partial record: its rest comes with the next read)
                        finally:
                            view.release()
                    app.buffer_updated(n)  # type: ignore[attr-defined]
                    if n < size or eof or self._state != _WRAPPED or self._reading_paused:
                        break
            else:
                while True:
                    data = read(_PLAIN_CHUNK)
                    if not data:
                        eof = True
                        break
                    app.data_received(data)  # type: ignore[attr-defined]
                    if self._state != _WRAPPED or self._reading_paused or not incoming.pending:
                        break
        except ssl.SSLWantReadError:
            pass  # a partial record (or one with no application data): the rest comes later
        except ssl.SSLError as exc:
            self._fail(exc)
            return
        if self._outgoing.pending:  # (session tickets, a key update's answer, a renegotiation)
            self._flush_outgoing()
        if self._backlog and self._state == _WRAPPED:
            self._write_backlog()
        if eof and self._state == _WRAPPED:  # the peer's close_notify
            self._state = _CLOSED
            self._direct = False
            self._fast = False
            self._app_eof()

    def _app_eof(self) -> None:
        """The peer will send no more: tell the application, then close (TLS has no half-close)."""
        try:
            keep_open = self._app.eof_received()  # type: ignore[attr-defined]
            if keep_open:
                log.warning("an application protocol returned true from eof_received() on TLS: ignored")
        except Exception as exc:
            self._fail(exc)
            return
        self._close_notify()

    # ------------------------------------------------------------------ writes

    def _flush_outgoing(self) -> None:
        if self._outgoing.pending and self._raw is not None:
            self._raw.write(self._outgoing.read())

    def write(self, data: bytes | bytearray | memoryview) -> None:
        """Encrypt ``data`` and write it to the socket (dropped once the connection is closing)."""
        if self._fast and data:
            try:
                self._ssl_write(data)
            except ssl.SSLWantReadError:  # (OpenSSL must read first: a TLS 1.2 renegotiation)
                self._backlog.append(bytes(data))
                self._fast = False
            except ssl.SSLError as exc:
                self._fail(exc)
                return
            self._raw_write(self._outgoing.read())  # type: ignore[misc]  # (set at connection_made)
        elif data and self._state == _WRAPPED and not self._closing:
            self._backlog.append(bytes(data))  # (behind what already waits)

    def _write_backlog(self) -> None:
        while self._backlog:
            try:
                self._ssl_write(self._backlog[0])
            except ssl.SSLWantReadError:
                break
            except ssl.SSLError as exc:
                self._fail(exc)
                return
            del self._backlog[0]
        self._fast = not self._backlog and self._state == _WRAPPED and not self._closing
        self._flush_outgoing()

    def writelines(self, list_of_data: Any) -> None:
        self.write(b"".join(list_of_data))

    def can_write_eof(self) -> bool:
        return False

    def write_eof(self) -> None:
        raise NotImplementedError("TLS does not support half-closes")

    def get_write_buffer_size(self) -> int:
        raw = self._raw
        size: int = raw.get_write_buffer_size() if raw is not None else 0
        if self._backlog:
            size += sum(map(len, self._backlog))
        return size

    def get_write_buffer_limits(self) -> tuple[int, int]:
        return self._raw.get_write_buffer_limits() if self._raw is not None else (0, 0)

    def set_write_buffer_limits(self, high: int | None = None, low: int | None = None) -> None:
        # (the ciphertext is the plaintext and ~30 bytes a record: the socket's limits serve)
        if self._raw is not None:
            self._raw.set_write_buffer_limits(high=high, low=low)

    # ------------------------------------------------------- the rest of Transport

    def get_extra_info(self, name: str, default: Any = None) -> Any:
        if name == "ssl_object":
            return self._sslobj
        if name == "peercert":
            return self._sslobj.getpeercert() if self._state != _HANDSHAKING else default
        if name == "cipher":
            return self._sslobj.cipher()
        if name == "compression":
            return self._sslobj.compression()
        if name == "sslcontext":
            return self._context
        raw = self._raw
        return raw.get_extra_info(name, default) if raw is not None else default

    def is_closing(self) -> bool:
        return self._closing

    def close(self) -> None:
        """Send close_notify after what is buffered, then close the socket."""
        if self._closing:
            return
        self._closing = True
        self._fast = False
        if self._state == _WRAPPED:
            self._state = _CLOSED
            self._direct = False
            self._close_notify()
        elif self._raw is not None:
            self._cancel_timer()
            self._raw.close()

    def _close_notify(self) -> None:
        self._closing = True
        self._fast = False
        self._backlog = []
        try:
            self._sslobj.unwrap()
        except (ssl.SSLError, ValueError):
            pass  # (sent; the peer's own close_notify is not waited for, as Netty does not)
        self._flush_outgoing()
        if self._raw is not None:
            self._raw.close()

    def abort(self) -> None:
        """Close now, discarding what is buffered (no close_notify)."""
        self._closing = True
        self._fast = False
        self._direct = False
        self._backlog = []
        if self._raw is not None:
            self._raw.abort()

    def is_reading(self) -> bool:
        return not self._reading_paused and self._raw is not None and self._raw.is_reading()

    def pause_reading(self) -> None:
        if not self._reading_paused:
            self._reading_paused = True
            self._direct = False
            if self._raw is not None:
                self._raw.pause_reading()

    def resume_reading(self) -> None:
        if self._reading_paused:
            self._reading_paused = False
            self._direct = self._view_app and self._state == _WRAPPED and not self._closing
            if self._raw is not None:
                self._raw.resume_reading()
            if self._state == _WRAPPED and (self._incoming.pending or self._sslobj.pending()) \
                    and self._read_again is None:  # (pending(): a record bigger than the app's buffer)
                # records read before the pause: delivered at the next turn, not inside the
                # application's own call
                self._read_again = self._loop.call_soon(self._read_pending)

    def _read_pending(self) -> None:
        self._read_again = None
        if self._state == _WRAPPED and not self._reading_paused:
            self._read_app()

    def set_protocol(self, protocol: asyncio.BaseProtocol) -> None:
        self._app = protocol
        self._buffered_app = isinstance(protocol, asyncio.BufferedProtocol)
        self._view_app = isinstance(protocol, Connection)
        self._direct = self._view_app and self._state == _WRAPPED and not self._closing and not self._reading_paused

    def get_protocol(self) -> asyncio.BaseProtocol:
        return self._app

    def __repr__(self) -> str:
        state = ("handshaking", "open", "closed")[self._state]
        return f"<TlsTransport {state} {self.get_extra_info('peername')}>"


async def open_tls_connection(factory: Callable[[], P], host: str, port: int, context: ssl.SSLContext, *,
                              server_hostname: str | None = None,
                              handshake_timeout: float = 10.0) -> tuple[TlsTransport, P]:
    """``loop.create_connection(factory, host, port, ssl=context)`` with :class:`TlsTransport`:
    returns once the handshake is done and the protocol ``factory`` made has its transport.
    Raises what the connect or the handshake raised (the socket is then closed)."""
    loop = asyncio.get_running_loop()
    app = factory()
    waiter: asyncio.Future[None] = loop.create_future()
    tls = TlsTransport(loop, app, context, waiter, server_side=False, server_hostname=server_hostname,
                       handshake_timeout=handshake_timeout)
    await loop.create_connection(lambda: tls, host, port)
    try:
        await waiter
    except BaseException:  # (a cancelled connect too: no socket left behind)
        tls.abort()
        raise
    return tls, app
