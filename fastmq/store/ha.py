"""Master-slave replication of the commit log: RocketMQ 4.9's classic HA (``store:ha/HAService``).

The wire is RocketMQ's, so a fastmq slave can follow a Java master and the other way round:

- slave -> master: an 8-byte big-endian int64, the slave's commit-log end. Sent on connect,
  every ``haSendHeartbeatInterval`` ms, and after every transfer it applied; it is the ack.
- master -> slave: a 12-byte header ``[int64 phyOffset][int32 size]`` and ``size`` bytes of
  commit log (at most ``haTransferBatchSize``); size 0 is a heartbeat. A slave that first reports
  0 gets the master's last file from its start (``max - max % mappedFileSizeCommitLog``).

:class:`HAService` runs on the master: a listener on ``haListenPort``, one
:class:`HAConnection` per slave (a reader of acks and a pushing writer), and the waits of
SYNC_MASTER sends for an ack covering their end. :class:`HAClient` runs on the slave: it dials
``haMasterAddress`` (or the master address the NameServer gave), appends what it receives with
:meth:`CommitLog.append_raw` and lets :class:`ReputService` turn the appended records into
consume-queue and index entries. Everything runs on the broker's event loop (asyncio streams).

A frame that makes no sense (an offset outside the master's log, a header that does not follow
the slave's log) closes that one HA connection; the broker goes on serving.
A slave whose disk has no room for what the master sends (its appends and the reput reserve
space first, as a master's puts do) pauses: it closes the connection, keeps serving what it has
and reconnects once the reservation succeeds again.
"""
from __future__ import annotations

import asyncio
import logging
import ssl
import struct
import time
from typing import TYPE_CHECKING, Callable

from . import DiskFullError, StoreError
from .commit_log import DispatchRequest

if TYPE_CHECKING:
    from .message_store import MessageStore

__all__ = ["HAService", "HAConnection", "HAClient", "ReputService", "HEADER_SIZE", "REPORT_SIZE"]

log = logging.getLogger("fastmq.store.ha")

_REPORT = struct.Struct(">q")
_HEADER = struct.Struct(">qi")
REPORT_SIZE = _REPORT.size   # 8
HEADER_SIZE = _HEADER.size   # 12
_RECONNECT_DELAY = 1.0       # seconds between a slave's connection attempts (RocketMQ waits 5 s)
_CONNECT_TIMEOUT = 3.0
_HANDSHAKE_TIMEOUT = 10.0    # seconds a TLS handshake on the replication port may take
_MAX_TRANSFER = 4 * 1024 * 1024  # a transfer larger than this is garbage (RocketMQ's slave reads into 4 MiB)


class ReputService:
    """Dispatches whole records appended by replication to the consume queues and the index.

    It keeps a position in the commit log (where the next undispatched record starts) and, on
    each :meth:`run`, reads forward with :meth:`CommitLog.check_record` -- the check recovery
    uses -- stopping at the first incomplete record: the rest of it is still on the wire.
    """

    def __init__(self, store: "MessageStore") -> None:
        self.store = store
        self.position = store.commit_log.max_offset  # recovery dispatched everything before it

    def run(self) -> int:
        """Dispatch every whole record past the position; returns how many."""
        cl = self.store.commit_log
        file_size = cl.config.mappedFileSizeCommitLog
        total = 0
        while self.position < cl.max_offset:
            mf = cl.mfq.find_mapped_file_by_offset(self.position)
            if mf is None:  # an empty log that started at a later file
                first = cl.mfq.files[0].file_from_offset if cl.mfq.files else self.position
                if self.position >= first:
                    break
                self.position = first
                continue
            pos = self.position - mf.file_from_offset
            buf = mf.buffer[:mf.wrote_position]
            batch: list[DispatchRequest] = []
            try:
                while pos < len(buf):
                    size, req = cl.check_record(buf, pos, False, mf.file_from_offset)
                    if size > 0 and req is None:   # BLANK: go on in the next file
                        pos = file_size
                        break
                    if size <= 0:                  # incomplete (or not yet there): wait for more bytes
                        break
                    assert req is not None
                    batch.append(req)
                    pos += size
            finally:
                buf.release()
            if batch:
                # the position moves only once the batch is dispatched: a batch refused for lack
                # of space is dispatched whole on the next run, none of its entries lost
                self._dispatch(batch, self._reserve(batch))
                total += len(batch)
            self.position = mf.file_from_offset + pos
            if pos < file_size:
                break
        return total

    def _reserve(self, batch: list[DispatchRequest]) -> list[list[str]]:
        """Give every consume-queue file and the index room for ``batch`` before any of it is
        written (what :meth:`MessageStore._reserve` does before a put on a master); returns
        each record's index keys (read once, for the room and for the index).

        Raises:
            DiskFullError: no room; nothing of the batch is dispatched.
        """
        store = self.store
        need: dict[tuple[str, int], tuple[int, int]] = {}  # key -> (entries, first queue offset)
        for r in batch:
            key = (r.topic, r.queue_id)
            n, first = need.get(key, (0, r.queue_offset))
            need[key] = (n + 1, min(first, r.queue_offset))
        for (topic, qid), (n, first) in need.items():
            mfq = store.queues.find_or_create(topic, qid).mfq
            last = mfq.files[-1] if mfq.files else None
            if last is None or last.reserved_to < last.wrote_position + n * 20:
                mfq.ensure_room(n * 20, first * 20)
        keys: list[list[str]] = []
        if store.index is not None:
            cl = store.commit_log
            for r in batch:
                try:
                    keys.append(store._keys_of(cl.get_message(r.commit_log_offset, r.size).properties))
                except Exception:  # noqa: BLE001 - the record verified a moment ago; never fail the copy
                    keys.append([])
            store.index.reserve(sum(len(k) for k in keys))
        return keys

    def _dispatch(self, batch: list[DispatchRequest], keys: list[list[str]]) -> None:
        store = self.store
        cl = store.commit_log
        store._dispatch(batch)  # consume queues and the arrival callbacks, as a put does
        for r in batch:
            key = (r.topic, r.queue_id)
            if cl.topic_queue_table.get(key, 0) <= r.queue_offset:
                cl.topic_queue_table[key] = r.queue_offset + 1
        last = batch[-1].store_timestamp
        cl.last_store_timestamp = last
        mf = cl.mfq.find_mapped_file_by_offset(batch[-1].commit_log_offset)
        if mf is not None:
            mf.store_timestamp = last
        if store.index is not None:
            for r, ks in zip(batch, keys):
                if ks:
                    store.index.put(r.topic, ks, r.commit_log_offset, r.store_timestamp)


# ---------------------------------------------------------------------------------- master
class HAConnection:
    """One slave's connection on the master: acks in, commit log out."""

    def __init__(self, service: "HAService", reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.service = service
        self.reader = reader
        self.writer = writer
        peer = writer.get_extra_info("peername")
        self.remote = f"{peer[0]}:{peer[1]}" if isinstance(peer, tuple) else str(peer)
        self.slave_ack_offset = -1        # -1: the slave has not reported yet
        self.next_transfer_from = -1
        self._reported = asyncio.Event()
        self.closed = False

    async def serve(self) -> None:
        """Run the reader and the writer until either ends; then close."""
        tasks = [asyncio.ensure_future(self._read_loop()), asyncio.ensure_future(self._write_loop())]
        try:
            await asyncio.wait(tasks, return_when=asyncio.FIRST_COMPLETED)
        finally:
            for t in tasks:
                t.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
            self.close()

    def close(self) -> None:
        if self.closed:
            return
        self.closed = True
        self.writer.close()
        self.service._gone(self)

    async def _read_loop(self) -> None:
        svc = self.service
        housekeeping = svc.store.config.haHousekeepingInterval / 1000
        while True:
            try:
                raw = await asyncio.wait_for(self.reader.readexactly(REPORT_SIZE), housekeeping)
            except asyncio.TimeoutError:
                log.warning("HA slave %s silent for %.0f s: closing", self.remote, housekeeping)
                return
            except asyncio.IncompleteReadError as exc:
                if exc.partial:
                    log.warning("HA slave %s sent a short report (%d bytes): closing", self.remote,
                                len(exc.partial))
                return
            except (ConnectionError, OSError):
                return
            offset = _REPORT.unpack(raw)[0]
            max_offset = svc.store.commit_log.max_offset
            if offset < 0 or offset > max_offset:
                log.warning("HA slave %s reported offset %d outside the master's log [0, %d]: closing",
                            self.remote, offset, max_offset)
                return
            self.slave_ack_offset = offset
            if self.next_transfer_from < 0:
                file_size = svc.store.config.mappedFileSizeCommitLog
                self.next_transfer_from = offset if offset else max_offset - max_offset % file_size
                log.info("HA slave %s connected at offset %d; transfer starts at %d", self.remote, offset,
                         self.next_transfer_from)
                self._reported.set()
            svc._acked(offset)

    async def _write_loop(self) -> None:
        svc = self.service
        cfg = svc.store.config
        cl = svc.store.commit_log
        await self._reported.wait()
        heartbeat = cfg.haSendHeartbeatInterval / 1000
        last_write = time.monotonic()
        while True:
            data = b""
            if self.next_transfer_from < cl.max_offset:
                try:
                    view = cl.read_from(self.next_transfer_from, cfg.haTransferBatchSize)
                    data = bytes(view)
                    view.release()
                except StoreError as exc:  # retention removed what the slave needs
                    log.warning("HA slave %s: %s: closing", self.remote, exc)
                    return
            if data:
                self.writer.write(_HEADER.pack(self.next_transfer_from, len(data)) + data)
                self.next_transfer_from += len(data)
                await self.writer.drain()
                last_write = time.monotonic()
                continue
            wait = heartbeat - (time.monotonic() - last_write)
            if wait <= 0:
                self.writer.write(_HEADER.pack(self.next_transfer_from, 0))
                await self.writer.drain()
                last_write = time.monotonic()
                continue
            await svc._wait_for_data(wait)


class HAService:
    """The master's side: the HA listener, the slaves' connections, and SYNC_MASTER waits."""

    def __init__(self, store: "MessageStore", port: int, host: str = "0.0.0.0",
                 ssl_context: ssl.SSLContext | None = None) -> None:
        """``ssl_context``: with it, the port takes TLS only (see
        :func:`fastmq.remoting.tls.switching_server_context` for one that follows certificate
        changes); a peer that does not complete the handshake is closed."""
        self.store = store
        self.host = host
        self.port = port
        self.ssl_context = ssl_context
        self.connections: set[HAConnection] = set()
        self.push_to_slave_max_offset = 0  # the highest offset any slave acknowledged
        self._server: asyncio.AbstractServer | None = None
        self._data = asyncio.Event()
        self._sleepers = 0
        self._waiters: list[tuple[int, asyncio.Future[bool]]] = []
        self._tasks: set[asyncio.Task[None]] = set()

    async def start(self) -> None:
        # the listener's own TLS: a start_tls after accept races the slave's hello (asyncio's
        # streams may read it first and lose it)
        self._server = await asyncio.start_server(self._accept, self.host, self.port, ssl=self.ssl_context,
                                                  ssl_handshake_timeout=_HANDSHAKE_TIMEOUT if self.ssl_context else None)
        sock = self._server.sockets[0]
        self.port = sock.getsockname()[1]
        log.info("HA service listening on %s:%d", self.host, self.port)

    async def close(self) -> None:
        if self._server is not None:
            self._server.close()
            self._server = None
        for c in list(self.connections):
            c.close()
        for t in list(self._tasks):
            t.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        for _, fut in self._waiters:
            if not fut.done():
                fut.set_result(False)
        self._waiters.clear()

    async def _accept(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        conn = HAConnection(self, reader, writer)
        self.connections.add(conn)
        task = asyncio.current_task()
        if task is not None:
            self._tasks.add(task)
        log.info("HA slave %s connected", conn.remote)
        try:
            await conn.serve()
        except Exception:  # noqa: BLE001 - one slave's failure must not reach the listener
            log.exception("HA connection %s failed", conn.remote)
        finally:
            conn.close()
            if task is not None:
                self._tasks.discard(task)

    def _gone(self, conn: HAConnection) -> None:
        if conn in self.connections:
            self.connections.discard(conn)
            log.info("HA slave %s disconnected", conn.remote)
        if self.connection_count == 0:
            # Beyond 4.9, which keeps a SYNC_MASTER send waiting its whole syncFlushTimeout for a
            # slave that is gone: the client (3 s by default) gives up first and retries a message
            # that is stored. With no slave left no ack can come, so the waits end now.
            waiters, self._waiters = self._waiters, []
            for _, fut in waiters:
                if not fut.done():
                    fut.set_result(False)

    # -- the push side -------------------------------------------------------------------
    def notify_data(self) -> None:
        """New commit-log data: wake the connections' writers (called after each put; costs
        nothing while no writer sleeps, e.g. with no slave)."""
        if not self._sleepers:
            return
        ev = self._data
        self._data = asyncio.Event()
        ev.set()

    async def _wait_for_data(self, timeout: float) -> None:
        self._sleepers += 1
        try:
            await asyncio.wait_for(self._data.wait(), timeout)
        except asyncio.TimeoutError:
            pass
        finally:
            self._sleepers -= 1

    # -- acks ----------------------------------------------------------------------------
    def _acked(self, offset: int) -> None:
        if offset > self.push_to_slave_max_offset:
            self.push_to_slave_max_offset = offset
        if not self._waiters:
            return
        keep = []
        for want, fut in self._waiters:
            if fut.done():
                continue
            if want <= offset:
                fut.set_result(True)
            else:
                keep.append((want, fut))
        self._waiters = keep

    @property
    def connection_count(self) -> int:
        return sum(1 for c in self.connections if c.slave_ack_offset >= 0)

    def is_slave_ok(self, master_put_where: int) -> bool:
        """A slave is connected and not more than haSlaveFallbehindMax behind (RocketMQ's isSlaveOK)."""
        return (self.connection_count > 0 and
                master_put_where - self.push_to_slave_max_offset < self.store.config.haSlaveFallbehindMax)

    async def wait_for_slave(self, offset: int, timeout: float) -> bool:
        """True once a slave acknowledged ``offset``; False after ``timeout`` seconds, or as soon
        as the last slave disconnects."""
        if self.push_to_slave_max_offset >= offset:
            return True
        if self.connection_count == 0:
            return False
        fut: asyncio.Future[bool] = asyncio.get_running_loop().create_future()
        self._waiters.append((offset, fut))
        self.notify_data()
        try:
            return await asyncio.wait_for(fut, timeout)
        except asyncio.TimeoutError:
            return False


# ---------------------------------------------------------------------------------- slave
class HAClient:
    """The slave's side: follow the master's commit log.

    ``master_addr`` is asked before each connection attempt (haMasterAddress, or what the
    NameServer said at registration); None means no master is known yet.
    """

    def __init__(self, store: "MessageStore", master_addr: Callable[[], str | None],
                 reput: ReputService | None = None,
                 ssl_context: ssl.SSLContext | Callable[[], ssl.SSLContext | None] | None = None) -> None:
        """``ssl_context``: dial the master's replication port with TLS (a callable: asked before
        each connection, so changed client certificate files serve the next one)."""
        self.store = store
        self.ssl_context = ssl_context
        self.master_addr = master_addr
        self.reput = reput or ReputService(store)
        self.connected_to: str | None = None
        # why replication is paused (a full disk), None while it runs; the need is the transfer
        # (offset, size) that found no room, tried again before reconnecting
        self.paused: str | None = None
        self._need: tuple[int, int] = (0, 0)
        self._task: asyncio.Task[None] | None = None
        self._writer: asyncio.StreamWriter | None = None

    def start(self) -> None:
        self._task = asyncio.ensure_future(self._run())

    async def close(self) -> None:
        if self._task is not None:
            self._task.cancel()
            await asyncio.gather(self._task, return_exceptions=True)
            self._task = None

    async def _run(self) -> None:
        while True:
            addr = self.master_addr()
            if self.paused is not None and not self._space_back():
                addr = None
            if addr:
                try:
                    await self._follow(addr)
                except asyncio.CancelledError:
                    raise
                except DiskFullError as exc:
                    self._pause(exc)
                except (OSError, asyncio.TimeoutError, asyncio.IncompleteReadError, StoreError) as exc:  # (ssl.SSLError too)
                    log.info("HA connection to master %s ended: %s", addr, exc)
                except Exception:  # noqa: BLE001 - keep following whatever went wrong
                    log.exception("HA connection to master %s failed", addr)
                finally:
                    self.connected_to = None
            await asyncio.sleep(_RECONNECT_DELAY)

    def _pause(self, exc: DiskFullError) -> None:
        """Stop following: no more acks nor pulls (the connection is closed, so a SYNC_MASTER
        master answers SLAVE_NOT_AVAILABLE) until :meth:`_space_back`. Logged once a pause,
        not once a transfer; pulls of what the slave holds go on."""
        if self.paused is None:
            log.error("HA replication paused: the slave's disk has no room for what the master sends "
                      "(%s); the slave goes on serving what it has and resumes when space returns", exc)
        self.paused = str(exc)

    def _space_back(self) -> bool:
        """Try again what found no room (the commit-log file, then the queue and index entries
        of records already copied); True, and replication resumes, once it fits."""
        phy, size = self._need
        try:
            self.store.commit_log.mfq.ensure_room(size, phy)
            self.reput.run()
        except DiskFullError:
            return False
        except (OSError, StoreError) as exc:  # e.g. the disk gone read-only: stay paused, say why
            log.error("HA replication stays paused: %s", exc)
            return False
        log.warning("HA replication resumes: disk space is back (the slave's log ends at %d)",
                    self.store.commit_log.max_offset)
        self.paused = None
        return True

    def _report(self, writer: asyncio.StreamWriter) -> None:
        writer.write(_REPORT.pack(self.store.commit_log.max_offset))

    async def _follow(self, addr: str) -> None:
        host, _, port = addr.rpartition(":")
        ctx = self.ssl_context() if callable(self.ssl_context) else self.ssl_context
        reader, writer = await asyncio.wait_for(
            asyncio.open_connection(host, int(port), ssl=ctx, server_hostname=host if ctx is not None else None),
            _CONNECT_TIMEOUT + (_HANDSHAKE_TIMEOUT if ctx is not None else 0))
        cfg = self.store.config
        self.connected_to = addr
        log.info("HA connected to master %s", addr)
        heartbeat = asyncio.ensure_future(self._heartbeats(writer, cfg.haSendHeartbeatInterval / 1000))
        try:
            self._report(writer)
            housekeeping = cfg.haHousekeepingInterval / 1000
            cl = self.store.commit_log
            while True:
                head = await asyncio.wait_for(reader.readexactly(HEADER_SIZE), housekeeping)
                phy, size = _HEADER.unpack(head)
                if size < 0 or size > max(cfg.haTransferBatchSize, _MAX_TRANSFER):
                    raise StoreError(f"master {addr} sent a transfer of {size} bytes")
                data = await asyncio.wait_for(reader.readexactly(size), housekeeping) if size else b""
                mine = cl.max_offset
                if cl.mfq.files and phy != mine:
                    raise StoreError(f"master {addr} sent offset {phy}, the slave's log ends at {mine}")
                if not size:
                    continue
                self._need = (phy, size)
                cl.append_raw(phy, data)
                self.reput.run()
                self._report(writer)
        finally:
            heartbeat.cancel()
            writer.close()

    async def _heartbeats(self, writer: asyncio.StreamWriter, interval: float) -> None:
        while True:
            await asyncio.sleep(max(0.05, interval))
            self._report(writer)
