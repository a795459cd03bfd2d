"""The MCP HTTP port's connections, bounded (docs/mcp.md §Limits): uvicorn's HTTP/1.1
protocol (h11) with two bounds it does not have.

- **Connections**: at most ``max_connections`` open at once.  One more is answered ``503`` at
  once, without reading it, and closed, so it holds its file descriptor no longer than that
  (uvicorn's own ``limit_concurrency`` answers only once a whole request head has arrived).
- **A request's head** must arrive within ``header_timeout`` of the connection's start, or of
  the answer before it on a kept-alive connection; else the connection is closed.  h11 bounds
  the head's size (16 KiB) but not its time, and uvicorn's keep-alive timer stops at the first
  byte, so a client sending one byte a second would hold its connection for good.
"""

from __future__ import annotations

import asyncio
import json

import h11
from uvicorn.protocols.http.h11_impl import H11Protocol

from node.config import ServeLimits
from node.refusals import REFUSALS

__all__ = ["bounded_protocol"]

_BUSY_BODY = json.dumps({"jsonrpc": "2.0", "id": None, "error": {
    "code": -32600, "message": "too many connections: try again later"}}).encode()  # fmt: skip
_BUSY = (
    b"HTTP/1.1 503 Service Unavailable\r\ncontent-type: application/json\r\n"
    b"content-length: %d\r\nconnection: close\r\nretry-after: 1\r\n\r\n%s"
    % (len(_BUSY_BODY), _BUSY_BODY)
)


class _Bounded(H11Protocol):
    max_connections = 256
    header_timeout = 10.0
    _refused = False
    _head_timer: asyncio.TimerHandle | None = None

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        if len(self.connections) >= self.max_connections:
            REFUSALS.count("mcp_connections")
            self.transport, self._refused = transport, True
            transport.write(_BUSY)
            transport.close()
            return
        super().connection_made(transport)
        self._await_head()

    def data_received(self, data: bytes) -> None:
        if self._refused:
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
        super().connection_lost(exc)

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
        REFUSALS.count("mcp_header_timeout")
        self._unset_keepalive_if_required()
        self.transport.close()


def bounded_protocol(limits: ServeLimits) -> type[H11Protocol]:
    """uvicorn's HTTP/1.1 protocol with ``limits``' connection count and header timeout."""
    return type("BoundedH11", (_Bounded,), {
        "max_connections": limits.max_connections,
        "header_timeout": limits.header_timeout_ms / 1000,
    })  # fmt: skip
