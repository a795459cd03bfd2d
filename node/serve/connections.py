"""The connections of an HTTP port of ``memlane serve`` — MCP's and the web view's — bounded
(docs/mcp.md §Limits, docs/web.md): uvicorn's HTTP/1.1 protocol (h11) with the bounds it does
not have, each port with its own count and its own refusal counters (``<port>_connections``,
``<port>_header_timeout``).

- **Connections**: at most ``max_connections`` open at once, counted from their accept — over
  TLS too, whose handshake this protocol runs itself (``loop.start_tls``) so that a connection
  that never completes one is counted and bounded.  One more is closed at once (in plain HTTP
  after a ``503``), so it holds its file descriptor no longer than that (uvicorn's own
  ``limit_concurrency`` answers only once a whole request head has arrived, and asyncio's TLS
  counts nothing before the handshake ends, which it allows a minute).
- **Time**: a TLS handshake must end within ``header_timeout``, and a request's head must
  arrive within ``header_timeout`` of the connection's start, or of the answer before it on a
  kept-alive connection; else the connection is closed.  h11 bounds the head's size (16 KiB)
  but not its time, and uvicorn's keep-alive timer stops at the first byte, so a client
  sending one byte a second would hold its connection for good.
"""

from __future__ import annotations

import asyncio
import json
import ssl

import h11
from uvicorn.protocols.http.h11_impl import H11Protocol

from node.config import ServeLimits
from node.ports import Slots
from node.refusals import REFUSALS

__all__ = ["BoundedH11", "bounded_protocol"]

_BUSY_TEXT = "too many connections: try again later"
# What one connection too many is answered in plain HTTP, per port: MCP's clients read JSON-RPC.
_BUSY_BODIES = {
    "mcp": (
        "application/json",
        json.dumps(
            {"jsonrpc": "2.0", "id": None, "error": {"code": -32600, "message": _BUSY_TEXT}}
        ).encode(),
    ),
    "web": ("text/plain; charset=utf-8", _BUSY_TEXT.encode()),
}


def _busy(port: str) -> bytes:
    kind, body = _BUSY_BODIES[port]
    return (
        b"HTTP/1.1 503 Service Unavailable\r\ncontent-type: %s\r\n"
        b"content-length: %d\r\nconnection: close\r\nretry-after: 1\r\n\r\n%s"
        % (kind.encode(), len(body), body)
    )


class BoundedH11(H11Protocol):
    """One connection; the class attributes are one server's (``bounded_protocol``)."""

    slots = Slots(256)
    header_timeout = 10.0
    tls: ssl.SSLContext | None = None
    port = "mcp"  # which port's counters it counts in
    busy = _busy("mcp")
    _held = False  # a slot is taken
    _admitted = False  # uvicorn's protocol has the connection
    _head_timer: asyncio.TimerHandle | None = None
    _handshake: asyncio.Task[None] | None = None
    _early = b""  # what arrived after the handshake, before this task took the connection

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        if self.slots.full("") is not None:
            REFUSALS.count(f"{self.port}_connections")
            if self.tls is None:
                transport.write(self.busy)
            transport.close()
            return
        self.slots.take("")
        self._held = True
        if self.tls is None:
            self._admit(transport)
        else:
            self._handshake = self.loop.create_task(self._start_tls(transport))

    async def _start_tls(self, transport: asyncio.Transport) -> None:
        assert self.tls is not None
        try:
            secured = await self.loop.start_tls(
                transport,
                self,
                self.tls,
                server_side=True,
                ssl_handshake_timeout=self.header_timeout,
            )
        except ConnectionAbortedError:  # asyncio's word for a handshake out of time
            REFUSALS.count(f"{self.port}_header_timeout")
            secured = None
        except OSError:  # ssl.SSLError is one: not TLS, or refused; start_tls closed it
            secured = None
        if secured is None:  # lost during the handshake
            transport.abort()
            self._release()
            return
        self._admit(secured)

    def _admit(self, transport: asyncio.Transport) -> None:
        self._admitted = True
        super().connection_made(transport)
        self._await_head()
        early, self._early = self._early, b""
        if early:
            self.data_received(early)

    def data_received(self, data: bytes) -> None:
        if not self._admitted:  # TLS delivers what follows the handshake before start_tls returns
            if self._held:  # (at most what the transport reads before the task resumes)
                self._early += data
            return
        super().data_received(data)
        if self.conn.their_state is not h11.IDLE:  # the head is in: the request is the app's
            self._stop_waiting()

    def on_response_complete(self) -> None:
        super().on_response_complete()
        if not self.transport.is_closing() and self.conn.their_state is h11.IDLE:
            self._await_head()

    def connection_lost(self, exc: Exception | None) -> None:
        self._stop_waiting()
        self._release()
        if self._admitted:
            super().connection_lost(exc)

    def _release(self) -> None:
        if self._held:
            self._held = False
            self.slots.give("")

    def _await_head(self) -> None:
        self._stop_waiting()
        self._head_timer = self.loop.call_later(self.header_timeout, self._head_late)

    def _stop_waiting(self) -> None:
        if self._head_timer is not None:
            self._head_timer.cancel()
            self._head_timer = None

    def _head_late(self) -> None:
        self._head_timer = None
        if self.transport.is_closing() or self.conn.their_state is not h11.IDLE:
            return
        REFUSALS.count(f"{self.port}_header_timeout")
        self._unset_keepalive_if_required()
        self.transport.close()


def bounded_protocol(
    limits: ServeLimits, tls: ssl.SSLContext | None, port: str = "mcp"
) -> type[BoundedH11]:
    """uvicorn's HTTP/1.1 protocol for one server, the ``port`` named in its counters and
    answers (``mcp`` or ``web``): ``limits``' connection count and header timeout, and TLS with
    ``tls`` when given (uvicorn is then given none)."""
    return type(
        "BoundedH11",
        (BoundedH11,),
        {
            "slots": Slots(limits.max_connections),
            "header_timeout": limits.header_timeout_ms / 1000,
            "tls": tls,
            "port": port,
            "busy": _busy(port),
        },
    )
