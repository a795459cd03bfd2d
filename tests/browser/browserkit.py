"""The web view in a real browser (tests/browser/): headless Chromium from the distribution's
packages (``make browser-tools``) driven through its chromedriver by Selenium; a real node
served by uvicorn on a loopback socket from an event loop on a thread of its own (the
browser's calls block, the node's are async); a PNG of a whole page."""

from __future__ import annotations

import asyncio
import base64
import socket
import threading
from collections.abc import AsyncIterator, Awaitable, Callable, Coroutine, Iterator
from contextlib import AsyncExitStack, asynccontextmanager, contextmanager
from pathlib import Path
from typing import Any, TypeVar

import uvicorn
from selenium import webdriver
from selenium.webdriver.chrome.service import Service
from selenium.webdriver.remote.webdriver import WebDriver
from starlette.types import ASGIApp

from node.node import Node
from tests.node.helpers import Wall
from tests.node.webkit import served

__all__ = [
    "CHROMEDRIVER",
    "CHROMIUM",
    "SCREENSHOTS",
    "WAIT",
    "Loop",
    "Shot",
    "Site",
    "chromium",
    "missing",
    "served_app",
    "serving",
    "whole_page",
]

CHROMIUM = Path("/usr/bin/chromium")
CHROMEDRIVER = Path("/usr/bin/chromedriver")
SCREENSHOTS = Path(__file__).resolve().parents[2] / "build" / "screenshots"
WAIT = 10.0  # seconds a page has to show what a test waits for
_ARGS = (
    "--headless=new",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-dev-shm-usage",
    "--window-size=1280,900",
)
T = TypeVar("T")


Shot = Callable[[str], Path]


def missing() -> str | None:
    """Why the browser cannot run here, or None."""
    for path, package in ((CHROMIUM, "chromium"), (CHROMEDRIVER, "chromium-driver")):
        if not path.exists():
            return f"{path} is missing (the {package} package; make browser-tools installs it)"
    return None


def chromium() -> WebDriver:
    """Headless Chromium through its chromedriver (given the driver's path, Selenium fetches
    nothing)."""
    options = webdriver.ChromeOptions()
    options.binary_location = str(CHROMIUM)
    for arg in _ARGS:
        options.add_argument(arg)
    driver = webdriver.Chrome(options=options, service=Service(str(CHROMEDRIVER)))
    driver.set_page_load_timeout(WAIT)
    return driver


def whole_page(page: WebDriver) -> bytes:
    """A PNG of the whole page, below the window's fold too (Chromium's own capture: the
    driver's screenshot stops at the window)."""
    size = page.execute_cdp_cmd("Page.getLayoutMetrics", {})["cssContentSize"]
    clip = {"x": 0, "y": 0, "width": size["width"], "height": size["height"], "scale": 1}
    taken = page.execute_cdp_cmd(
        "Page.captureScreenshot", {"format": "png", "clip": clip, "captureBeyondViewport": True}
    )
    return base64.b64decode(taken["data"])


class Loop:
    """An event loop on a thread of its own, on which a blocking test runs coroutines."""

    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self.loop.run_forever, daemon=True)
        self._thread.start()

    def run(self, work: Coroutine[Any, Any, T], timeout: float = 30.0) -> T:
        return asyncio.run_coroutine_threadsafe(work, self.loop).result(timeout)

    def close(self) -> None:
        self.loop.call_soon_threadsafe(self.loop.stop)
        self._thread.join(timeout=WAIT)
        self.loop.close()


@asynccontextmanager
async def serving(app: ASGIApp) -> AsyncIterator[int]:
    """``app`` served by uvicorn on a loopback socket; yields its port."""
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen()
    config = uvicorn.Config(app, lifespan="off", log_config=None, access_log=False)
    server = uvicorn.Server(config)
    task = asyncio.create_task(server.serve(sockets=[listener]))
    try:
        yield listener.getsockname()[1]
    finally:
        server.should_exit = True
        await task


@contextmanager
def served_app(loop: Loop, app: ASGIApp) -> Iterator[int]:
    """``serving`` for a blocking test: ``app`` served from ``loop``; yields its port."""
    stack = AsyncExitStack()
    port = loop.run(stack.enter_async_context(serving(app)))
    try:
        yield port
    finally:
        loop.run(stack.aclose())


class Site:
    """The node in ``path`` (a new one, unless the test made it: ``made``), its web view served
    on loopback (tests/node/webkit.py's ``served``), both on ``loop``; its clock ``wall``, a
    wall the test moves (by default at tests/node/helpers.py's moment)."""

    def __init__(
        self, loop: Loop, path: Path, *, wall: Wall | None = None, made: bool = False
    ) -> None:
        self.loop = loop
        self.wall = Wall() if wall is None else wall
        self._stack = AsyncExitStack()
        if not made:
            loop.run(Node.init(path, wall=self.wall))
        opening = Node.open(path, wall=self.wall)
        self.node: Node = loop.run(self._stack.enter_async_context(opening))
        self.port: int = loop.run(self._stack.enter_async_context(served(self.node)))

    def url(self, path: str) -> str:
        return f"http://127.0.0.1:{self.port}{path}"

    def run(self, work: Callable[[Node], Awaitable[T]]) -> T:
        """``work`` done with the node, on its loop."""

        async def doing() -> T:
            return await work(self.node)

        return self.loop.run(doing())

    def close(self) -> None:
        self.loop.run(self._stack.aclose())

    def __enter__(self) -> Site:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
