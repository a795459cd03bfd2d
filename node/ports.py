"""What a party on one of ``memlane serve``'s ports can make the process hold before it is
known (docs/operations.md §Ports, §Limits): connections, and the file descriptors they take.

- ``TlsGate`` accepts plain TCP and runs the TLS handshake itself (``StreamWriter.start_tls``),
  so a connection is counted from its accept rather than from the end of its handshake: at
  most ``Handshakes.max_open`` connections are in their handshake at once, at most
  ``max_per_address`` of them from one remote address, each for at most ``timeout`` seconds.
  One beyond is closed at once.  The handler sees only connections past their handshake.
- ``Slots`` counts a plain port's open connections (the health port).
- ``quiet_accept_errors`` makes the loop say once every ten seconds, in one line, that it
  cannot accept for want of file descriptors, instead of a traceback per attempt (and say
  nothing of a retry that comes after its port closed).

Each refusal is counted in ``REFUSALS`` under ``PORT_limit`` (``sync_pre_handshake``, …).
"""

from __future__ import annotations

import asyncio
import ssl
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from node.logging import get_logger
from node.refusals import REFUSALS

__all__ = ["Handler", "Handshakes", "Slots", "TlsGate", "quiet_accept_errors", "remote_host"]

_log = get_logger("node.ports")

Handler = Callable[[asyncio.StreamReader, asyncio.StreamWriter], Awaitable[None]]

_ACCEPT_ERROR = "socket.accept() out of system resource"  # asyncio's, for EMFILE and ENFILE
ACCEPT_LOG_INTERVAL = 10.0  # seconds between two lines about accept errors


@dataclass(frozen=True, slots=True)
class Handshakes:
    """The bounds on a TLS port's connections before their handshake ends (seconds)."""

    timeout: float = 10.0
    max_open: int = 64
    max_per_address: int = 8


def remote_host(writer: asyncio.StreamWriter) -> str:
    """The remote address of a connection, without its port."""
    name = writer.get_extra_info("peername")
    return str(name[0]) if isinstance(name, tuple) and name else str(name)


class Slots:
    """Connections held at once, in all and per remote address."""

    def __init__(self, limit: int, per_address: int | None = None) -> None:
        self.limit = limit
        self.per_address = per_address if per_address is not None else limit
        self.open = 0
        self._held: dict[str, int] = {}

    def full(self, address: str) -> str | None:
        """Which bound another connection from ``address`` would pass: ``"all"``,
        ``"address"`` or None (there is room)."""
        if self._held.get(address, 0) >= self.per_address:
            return "address"
        return "all" if self.open >= self.limit else None

    def take(self, address: str) -> None:
        self.open += 1
        self._held[address] = self._held.get(address, 0) + 1

    def give(self, address: str) -> None:
        self.open -= 1
        held = self._held.pop(address, 0) - 1
        if held > 0:
            self._held[address] = held


class TlsGate:
    """A ``start_server`` callback: counts the connection from its accept, runs its TLS
    handshake within bounds, then hands it to ``handler``.  ``port`` names the refusals
    (``{port}_pre_handshake``, ``{port}_per_address``, ``{port}_handshake_timeout``)."""

    def __init__(
        self, context: ssl.SSLContext, bounds: Handshakes, handler: Handler, *, port: str
    ) -> None:
        self.context, self.bounds, self.handler, self.port = context, bounds, handler, port
        self.slots = Slots(bounds.max_open, bounds.max_per_address)
        # In their handshake, oldest first: each one's address and the task running it.
        self._waiting: dict[asyncio.StreamWriter, tuple[str, asyncio.Task[Any]]] = {}

    async def __call__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        address = remote_host(writer)
        full = self.slots.full(address)
        if full is not None and not self._evict(address if full == "address" else None):
            REFUSALS.count(f"{self.port}_{'per_address' if full == 'address' else 'pre_handshake'}")
            writer.transport.abort()  # nothing was read or written: free the descriptor now
            return
        if await self._handshake(writer, address):
            await self.handler(reader, writer)

    def _evict(self, address: str | None) -> bool:
        """Abort the oldest connection still in its handshake (from ``address``, if given),
        its slot given to a newcomer now — an honest handshake takes milliseconds, so the
        oldest is the likeliest to be held open (OpenSSH's MaxStartups drops early ones)."""
        oldest = next((w for w, (at, _) in self._waiting.items() if address in (None, at)), None)
        if oldest is None:
            return False
        at, handshake = self._waiting.pop(oldest)
        self.slots.give(at)
        REFUSALS.count(f"{self.port}_handshake_evicted")
        handshake.cancel()
        return True

    async def _handshake(self, writer: asyncio.StreamWriter, address: str) -> bool:
        self.slots.take(address)
        task = asyncio.current_task()
        assert task is not None, "a start_server callback runs in a task"
        self._waiting[writer] = (address, task)
        try:
            async with asyncio.timeout(self.bounds.timeout):
                # asyncio's own bound (60 s) stays as a backstop; ours comes first.
                await writer.start_tls(self.context)
        except TimeoutError:
            REFUSALS.count(f"{self.port}_handshake_timeout")
            writer.transport.abort()
            return False
        except OSError:  # ssl.SSLError is one: not TLS, or a certificate refused
            writer.transport.abort()
            return False
        except asyncio.CancelledError:
            writer.transport.abort()
            if writer in self._waiting:  # not evicted: the port is closing
                raise
            task.uncancel()
            return False
        finally:
            if self._waiting.pop(writer, None) is not None:  # not evicted: its slot is held
                self.slots.give(address)
        return True


class _AcceptErrors:
    """The loop's exception handler: one line per ``ACCEPT_LOG_INTERVAL`` for accept errors
    (with how many it stands for), everything else to the loop's default handler."""

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self.clock = clock
        self.last: float | None = None
        self.suppressed = 0

    def __call__(self, loop: asyncio.AbstractEventLoop, context: dict[str, Any]) -> None:
        if _retry_after_close(context):
            return
        if context.get("message") != _ACCEPT_ERROR:
            loop.default_exception_handler(context)
            return
        now = self.clock()
        if self.last is not None and now - self.last < ACCEPT_LOG_INTERVAL:
            self.suppressed += 1
            return
        error = context.get("exception")
        _log.error("cannot accept connections", error=str(error), suppressed=self.suppressed)
        self.last, self.suppressed = now, 0


def _retry_after_close(context: dict[str, Any]) -> bool:
    """asyncio's retry of an accept that failed for want of descriptors, run after its port
    was closed (the node stopping within the second it waits): the socket's descriptor is
    then -1, and there is nothing left to serve."""
    handle = context.get("handle")
    callback = getattr(handle, "_callback", None)
    return (
        isinstance(context.get("exception"), ValueError)
        and getattr(callback, "__name__", "") == "_start_serving"
    )


def quiet_accept_errors(loop: asyncio.AbstractEventLoop) -> None:
    """Install the rate-limited handler of accept errors on ``loop``."""
    loop.set_exception_handler(_AcceptErrors())
