"""Headless Chromium driven over the Chrome DevTools Protocol (a websocket, aiohttp's client):
enough to open a page, wait for what its JavaScript renders, read the DOM, click and type, and
take a screenshot. No selenium or playwright: Debian's ``chromium`` package and aiohttp.

``find_chromium()`` says where the browser is, or why there is none (the caller skips with it).
"""
from __future__ import annotations

import asyncio
import base64
import json
import os
import re
import shutil
import tempfile
from pathlib import Path
from typing import Any

import aiohttp

__all__ = ["Browser", "find_chromium"]


def find_chromium() -> tuple[str | None, str]:
    """(path, "") of a Chromium to run, or (None, why not)."""
    for cand in (os.environ.get("FASTMQ_CHROMIUM"), shutil.which("chromium"), "/usr/bin/chromium",
                 shutil.which("chromium-browser"), shutil.which("google-chrome")):
        if cand and os.access(cand, os.X_OK):
            return cand, ""
    return None, ("no headless Chromium (Debian's chromium package: scripts/test.sh installs it as root "
                  "with apt-get; or set FASTMQ_CHROMIUM)")


class Browser:
    """One headless Chromium with one page; ``async with Browser(path) as b``."""

    def __init__(self, path: str, width: int = 1280, height: int = 860) -> None:
        self.path, self.width, self.height = path, width, height
        self.proc: asyncio.subprocess.Process | None = None
        self.profile = tempfile.TemporaryDirectory(prefix="fastmq-chromium-")
        self.session: aiohttp.ClientSession | None = None
        self.ws: aiohttp.ClientWebSocketResponse | None = None
        self._next = 0
        self._waiting: dict[int, asyncio.Future[Any]] = {}
        self._reader: asyncio.Task[None] | None = None
        self.console_errors: list[str] = []

    async def __aenter__(self) -> Browser:
        # --no-sandbox: the suite runs as root in CI, where Chromium's sandbox refuses to start
        self.proc = await asyncio.create_subprocess_exec(
            self.path, "--headless", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
            "--no-first-run", "--no-default-browser-check", "--disable-extensions", "--hide-scrollbars",
            "--remote-debugging-port=0", "--remote-debugging-address=127.0.0.1",
            f"--user-data-dir={self.profile.name}", f"--window-size={self.width},{self.height}", "about:blank",
            stdout=asyncio.subprocess.DEVNULL, stderr=asyncio.subprocess.PIPE)
        try:
            ws_url = await asyncio.wait_for(self._devtools_url(), 30)
            http = re.sub(r"^ws://([^/]+)/.*$", r"http://\1", ws_url)
            self.session = aiohttp.ClientSession()
            for _ in range(50):  # the first page target appears shortly after the browser listens
                async with self.session.get(f"{http}/json/list") as r:
                    pages = [t for t in await r.json() if t.get("type") == "page"]
                if pages:
                    break
                await asyncio.sleep(0.1)
            else:
                raise RuntimeError("chromium opened no page")
            self.ws = await self.session.ws_connect(pages[0]["webSocketDebuggerUrl"], max_msg_size=64 * 2 ** 20)
            self._reader = asyncio.get_running_loop().create_task(self._read())
            await self.call("Page.enable")
            await self.call("Runtime.enable")
            await self.call("Emulation.setDeviceMetricsOverride", width=self.width, height=self.height,
                            deviceScaleFactor=1, mobile=False)
        except BaseException:
            await self.__aexit__()
            raise
        return self

    async def _devtools_url(self) -> str:
        assert self.proc is not None and self.proc.stderr is not None
        while True:
            line = await self.proc.stderr.readline()
            if not line:
                raise RuntimeError("chromium exited before it listened")
            m = re.search(rb"DevTools listening on (ws://\S+)", line)
            if m:
                return m.group(1).decode()

    async def _read(self) -> None:
        assert self.ws is not None
        async for msg in self.ws:
            if msg.type != aiohttp.WSMsgType.TEXT:
                break
            data = json.loads(msg.data)
            fut = self._waiting.pop(data.get("id", -1), None)
            if fut is not None and not fut.done():
                if "error" in data:
                    fut.set_exception(RuntimeError(f"CDP error: {data['error']}"))
                else:
                    fut.set_result(data.get("result", {}))
            elif data.get("method") == "Runtime.exceptionThrown":
                self.console_errors.append(json.dumps(data["params"]["exceptionDetails"])[:500])
            elif data.get("method") == "Runtime.consoleAPICalled" and data["params"].get("type") == "error":
                self.console_errors.append(json.dumps(data["params"].get("args"))[:500])
        for fut in self._waiting.values():
            if not fut.done():
                fut.set_exception(RuntimeError("chromium closed its DevTools connection"))

    async def __aexit__(self, *exc: object) -> None:
        if self.ws is not None:
            await self.ws.close()
        if self._reader is not None:
            self._reader.cancel()
            try:
                await self._reader
            except (asyncio.CancelledError, Exception):
                pass
        if self.session is not None:
            await self.session.close()
        if self.proc is not None and self.proc.returncode is None:
            self.proc.terminate()
            try:
                await asyncio.wait_for(self.proc.wait(), 10)
            except asyncio.TimeoutError:
                self.proc.kill()
                await self.proc.wait()
        self.profile.cleanup()

    async def call(self, method: str, timeout: float = 15.0, **params: Any) -> Any:
        """One DevTools command and its result."""
        assert self.ws is not None
        self._next += 1
        fut: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        self._waiting[self._next] = fut
        await self.ws.send_str(json.dumps({"id": self._next, "method": method, "params": params}))
        return await asyncio.wait_for(fut, timeout)

    async def eval(self, expression: str) -> Any:
        """The value of a JavaScript expression in the page (promises awaited)."""
        r = await self.call("Runtime.evaluate", expression=expression, returnByValue=True, awaitPromise=True)
        if "exceptionDetails" in r:
            raise RuntimeError(f"page error in {expression!r}: {r['exceptionDetails']}")
        return r.get("result", {}).get("value")

    async def goto(self, url: str) -> None:
        await self.call("Page.navigate", url=url)

    async def wait(self, expression: str, timeout: float = 15.0) -> Any:
        """Poll until ``expression`` is truthy in the page; its value."""
        deadline = asyncio.get_running_loop().time() + timeout
        last: Any = None
        for _ in range(int(timeout / 0.1) + 1):
            try:
                # (a DOM node comes back by value as {}: count it as found)
                last = await self.eval(f"(function(v){{return v && v.nodeType ? true : v;}})({expression})")
            except RuntimeError:
                last = None
            if last:
                return last
            if asyncio.get_running_loop().time() > deadline:
                break
            await asyncio.sleep(0.1)
        text = await self.eval("document.body ? document.body.innerText.slice(0, 1500) : ''")
        raise AssertionError(f"not in the page after {timeout} s: {expression}\n--- page text:\n{text}")

    async def text(self, selector: str = "body") -> str:
        return str(await self.eval(f"(document.querySelector({json.dumps(selector)}) || {{}}).innerText || ''"))

    async def click(self, selector: str) -> None:
        await self.eval(f"document.querySelector({json.dumps(selector)}).click()")

    async def type(self, selector: str, value: str) -> None:
        """Set an input's value as typing does (its input event fires)."""
        await self.eval(f"(function(e){{e.focus(); e.value={json.dumps(value)};"
                        f"e.dispatchEvent(new Event('input', {{bubbles: true}}));}})"
                        f"(document.querySelector({json.dumps(selector)}))")

    async def screenshot(self, path: Path) -> None:
        """A PNG of the whole page (its full height, up to 3000 px)."""
        height = int(await self.eval("Math.min(3000, Math.max(document.documentElement.scrollHeight, 400))"))
        await self.call("Emulation.setDeviceMetricsOverride", width=self.width, height=height, deviceScaleFactor=1,
                        mobile=False)
        shot = await self.call("Page.captureScreenshot", format="png", timeout=30)
        await self.call("Emulation.setDeviceMetricsOverride", width=self.width, height=self.height,
                        deviceScaleFactor=1, mobile=False)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(base64.b64decode(shot["data"]))
