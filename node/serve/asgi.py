"""An ASGI app served by uvicorn inside the node's event loop, on a socket the caller bound
(so port 0 works and the address is known before the first request), with the bounded
connections of ``node.serve.connections``: ``memlane serve``'s MCP port and its web view.
Stopping is the caller's: leaving ``asgi_server`` stops serving.
"""

from __future__ import annotations

import asyncio
import socket
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager, contextmanager
from dataclasses import dataclass
from typing import Any, Literal

import uvicorn
from starlette.types import ASGIApp

from node.address import Tls
from node.config import ServeLimits
from node.serve.connections import bounded_protocol

__all__ = ["Endpoint", "asgi_server"]

_GRACE_SECONDS = 5  # open streams get this long to finish when the server stops
# asyncio accepts up to the listen backlog's length of connections in one turn of the loop,
# before any protocol can close the one beyond max_connections: uvicorn's 2,048 would take
# that many descriptors at once.  asyncio's own default, as on the other ports.
_BACKLOG = 100


@dataclass(frozen=True, slots=True)
class Endpoint:
    url: str  # where clients connect, e.g. http://127.0.0.1:8765/mcp
    stopped: asyncio.Task[None]  # ends if the server stops on its own


class _Embedded(uvicorn.Server):
    """uvicorn inside a loop it does not own: the owner handles signals and says when to
    stop, so uvicorn neither installs handlers nor re-raises a signal on its way out."""

    @contextmanager
    def capture_signals(self) -> Iterator[None]:
        yield


def _url(listener: socket.socket, tls: Tls | None, path: str) -> str:
    host, port = listener.getsockname()[:2]
    host = f"[{host}]" if ":" in host else host
    return f"{'https' if tls else 'http'}://{host}:{port}{path}"


@asynccontextmanager
async def asgi_server(
    app: ASGIApp,
    listener: socket.socket,
    limits: ServeLimits,
    *,
    port: str,
    tls: Tls | None = None,
    path: str = "/",
    lifespan: Literal["on", "off"] = "off",
) -> AsyncIterator[Endpoint]:
    """Serve ``app`` on ``listener`` (bound and listening) until the block ends, its
    connections bounded by ``limits`` and counted as ``port``'s; ``path`` ends the URL it
    answers at.  A certificate or key that cannot be loaded raises before anything is served
    (``OSError``, of which ``ssl.SSLError`` is one)."""
    listener.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)  # small answers go at once
    options: dict[str, Any] = {}
    if tls is not None:
        options = {"ssl_certfile": str(tls.cert), "ssl_keyfile": str(tls.key)}
    config = uvicorn.Config(
        app,
        lifespan=lifespan,
        ws="none",
        log_config=None,
        log_level="warning",
        access_log=False,
        proxy_headers=False,
        server_header=False,
        timeout_graceful_shutdown=_GRACE_SECONDS,
        backlog=_BACKLOG,
        **options,
    )
    try:
        config.load()
    except OSError as exc:  # ssl.SSLError is one; nothing else here touches files
        raise OSError(f"cannot load the TLS certificate or key: {exc}") from exc
    # The protocol runs the TLS handshake itself, so that it counts and bounds connections
    # from their accept (node.serve.connections); uvicorn listens in plain TCP.
    config.http_protocol_class = bounded_protocol(limits, config.ssl, port)
    config.ssl = None
    server = _Embedded(config)
    serving = asyncio.create_task(server.serve(sockets=[listener]))
    try:
        yield Endpoint(_url(listener, tls, path), serving)
    finally:
        server.should_exit = True
        await serving
