"""A node held open on an event loop of its own, in a thread of its own (docs/langgraph.md
§Threads and processes): a synchronous caller blocks only its own thread on a call, and an
asynchronous one awaits a future, so neither's event loop waits on the node's.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Coroutine
from concurrent.futures import Future
from pathlib import Path
from typing import Any, TypeVar

from node.node import Node

__all__ = ["NodeThread"]

T = TypeVar("T")


class NodeThread:
    """``Node.open(data_dir)`` on a loop that runs in a daemon thread until ``close``."""

    def __init__(self, data_dir: Path | str, *, embed: bool = False) -> None:
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, name="memlane-node")
        self._thread.daemon = True
        self._thread.start()
        self._closing: asyncio.Event | None = None
        self._held: Future[None] | None = None
        opened: Future[Node] = Future()
        self._held = asyncio.run_coroutine_threadsafe(
            self._hold(data_dir, embed, opened), self._loop
        )
        try:
            self.node = opened.result()
        except BaseException:
            self._stop()
            raise

    async def _hold(self, data_dir: Path | str, embed: bool, opened: Future[Node]) -> None:
        """One task opens the node, holds it until ``close`` and closes it."""
        self._closing = asyncio.Event()
        try:
            async with Node.open(data_dir, embed=embed) as node:
                opened.set_result(node)
                await self._closing.wait()
        except BaseException as exc:
            if not opened.done():
                opened.set_exception(exc)
            raise

    def is_own(self) -> bool:
        """Whether this is the node's own thread (which must never wait on the node)."""
        return threading.current_thread() is self._thread

    def is_open(self) -> bool:
        return self._thread.is_alive()

    def call(self, work: Coroutine[Any, Any, T]) -> T:
        """Run ``work`` on the node's loop and wait for it in this thread."""
        self._check_open(work)
        if self.is_own():
            work.close()
            raise RuntimeError("a blocking call from the node's own thread would never end")
        return asyncio.run_coroutine_threadsafe(work, self._loop).result()

    async def acall(self, work: Coroutine[Any, Any, T]) -> T:
        """Run ``work`` on the node's loop; the caller's loop awaits it, unblocked."""
        self._check_open(work)
        return await asyncio.wrap_future(asyncio.run_coroutine_threadsafe(work, self._loop))

    def _check_open(self, work: Coroutine[Any, Any, T]) -> None:
        if not self.is_open():
            work.close()
            raise RuntimeError("the store is closed")

    def close(self) -> None:
        """Close the node (what it has committed is durable) and end the thread."""
        if not self._thread.is_alive():
            return
        closing = self._closing
        if closing is not None:
            self._loop.call_soon_threadsafe(closing.set)
        try:
            if self._held is not None:
                self._held.result()  # the node's own close, and what it raised
        finally:
            self._stop()

    def _stop(self) -> None:
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join()
        self._loop.close()
