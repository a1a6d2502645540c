"""RPC latency per request code, as RocketMQ 5's ``rocketmq_rpc_latency`` histogram (milliseconds,
buckets 1, 3, 5, 7, 10, 100, 1000, 2000, 3000), kept only when metrics are on.

:class:`TimedProcessor` wraps a processor when the server registers it, so a server with metrics
off runs exactly the code it ran before. With them on, time is read once per call of the
processor, not per message: a batch of sends (one ``process_batch`` or ``process_gathered`` call)
is timed as a whole, and each of its requests is counted with that time under the batch's first
request code. A request answered later through the dispatcher (a SYNC_FLUSH wait, a request
passed on to a client) is timed until its answer is ready. A pull held for long polling is
answered by the broker's hold service, outside the processor, and is not counted: the pull
histogram holds the pulls answered at once (``is_long_polling`` is ``true`` only for a pull
whose processor returned an awaitable).
"""
from __future__ import annotations

import inspect
import time
from typing import Any, Awaitable

from .._ext.codec import RemotingCommand
from ..protocol.codes import RequestCode
from .connection import Connection
from .processor import Gathered, RequestProcessor

__all__ = ["RpcLatency", "TimedProcessor", "BUCKETS_MS"]

BUCKETS_MS = (1.0, 3.0, 5.0, 7.0, 10.0, 100.0, 1000.0, 2000.0, 3000.0)
_SUCCESS = 0
_PULL = int(RequestCode.PULL_MESSAGE)  # a pull answered later was held (long polling)

#: (request code, response code, long polling, result) -> [count per bucket..., +Inf count, sum ms]
Key = tuple[int, int, bool, str]


class RpcLatency:
    """The histograms, one per request code, response code, long polling and result."""

    def __init__(self) -> None:
        self.table: dict[Key, list[float]] = {}

    def observe(self, code: int, response_code: int, ms: float, n: int = 1, long_polling: bool = False,
                result: str = "success") -> None:
        key = (code, response_code, long_polling, result)
        row = self.table.get(key)
        if row is None:
            row = self.table[key] = [0.0] * (len(BUCKETS_MS) + 2)
        i = 0
        for bound in BUCKETS_MS:
            if ms <= bound:
                break
            i += 1
        row[i] += n
        row[-1] += ms * n

    def rows(self) -> list[tuple[dict[str, object], list[int], float]]:
        """The histograms as :meth:`fastmq.common.prometheus.Exposition.histogram` rows."""
        out = []
        for (code, resp, polling, result), row in sorted(self.table.items()):
            out.append(({"protocol_type": "remoting", "request_code": code, "response_code": resp,
                         "is_long_polling": polling, "result": result},
                        [int(c) for c in row[:-1]], row[-1]))
        return out


def _response_code(resp: Any) -> tuple[int, str]:
    if resp is None:
        return _SUCCESS, "oneway"
    if isinstance(resp, RemotingCommand):
        return resp.code, "success"
    return _SUCCESS, "success"  # pre-encoded SUCCESS frames


class TimedProcessor(RequestProcessor):
    """``inner`` with its calls timed into ``latency`` (everything else passed through)."""

    def __init__(self, inner: RequestProcessor, latency: RpcLatency) -> None:
        self.inner = inner
        self.latency = latency
        self.batches = inner.batches

    @property  # (a class attribute in the base, read the same way; the inner one's may change)
    def gathers(self) -> bool:  # type: ignore[override]
        return self.inner.gathers

    def reject_request(self) -> bool:
        return self.inner.reject_request()

    def process_request(self, conn: Connection, request: RemotingCommand) -> Any:
        began = time.perf_counter()
        resp = self.inner.process_request(conn, request)
        if inspect.isawaitable(resp):
            return self._later(request.code, resp, began, 1, request.code == _PULL)
        code, result = _response_code(resp)
        self.latency.observe(request.code, code, (time.perf_counter() - began) * 1000.0, 1, False,
                             "oneway" if request.flag & 2 else result)
        return resp

    def process_batch(self, conn: Connection, requests: list[RemotingCommand]) -> list[Any]:
        began = time.perf_counter()
        items = self.inner.process_batch(conn, requests)
        self._took(requests[0].code, items, began, len(requests))
        return items

    def process_gathered(self, parts: list[tuple[Connection, list[RemotingCommand]]]) -> Gathered:
        began = time.perf_counter()
        ready, later = self.inner.process_gathered(parts)
        code = parts[0][1][0].code
        n = sum(len(reqs) for _, reqs in parts)
        if later is None:
            self.latency.observe(code, _SUCCESS, (time.perf_counter() - began) * 1000.0, n)
            return ready, None
        return ready, self._later(code, later, began, n, False)

    def _took(self, code: int, items: list[Any], began: float, n: int) -> None:
        if all(type(item) is tuple for item in items):
            n = len(items)  # one item per answered request: a pull held for long polling has none
        waits = [i for i, item in enumerate(items) if not isinstance(item, (bytes, tuple))
                 or (type(item) is tuple and inspect.isawaitable(item[1]))]
        if not waits:
            self.latency.observe(code, _SUCCESS, (time.perf_counter() - began) * 1000.0, n)
            return
        for i in waits:  # answered later: timed until then
            item = items[i]
            if type(item) is tuple:
                items[i] = (item[0], self._later(item[0].code, item[1], began, 1, False))
            else:
                items[i] = self._later(code, item, began, 1, False)
        if len(waits) < n:
            self.latency.observe(code, _SUCCESS, (time.perf_counter() - began) * 1000.0, n - len(waits))

    async def _later(self, code: int, aw: Awaitable[Any], began: float, n: int, polling: bool) -> Any:
        try:
            resp = await aw
        except Exception:
            self.latency.observe(code, 1, (time.perf_counter() - began) * 1000.0, n, polling, "process_request_failed")
            raise
        rcode, result = _response_code(resp) if not isinstance(resp, list) else (_SUCCESS, "success")
        self.latency.observe(code, rcode, (time.perf_counter() - began) * 1000.0, n, polling, result)
        return resp
