"""MCP over streamable HTTP (docs/mcp.md): ``memlane serve --mcp-http HOST:PORT``.

Every HTTP request must carry ``Authorization: Bearer <token>`` naming a valid token; a
missing, unknown, expired or revoked one is answered ``401`` with one and the same body, before
anything else is read.  The challenge says only what the client already knows (RFC 6750 §3.1):
no bearer credentials get ``Bearer realm="memlane"``, a bearer token that is not valid adds
``error="invalid_token"`` — so a client reports a bad token instead of starting an
authorization flow.  The token is checked again by each tool call (``node.mcp.server``).
A session opened with one token answers only to that token (the SDK compares the credential
of every request with the one that opened the session).

uvicorn runs inside the caller's event loop — the loop that holds the open node and its
store — on a socket the caller bound, so port 0 works and the address is known before the
first request.  Stopping is the caller's: leaving ``http_server`` stops serving.  Its
HTTP/1.1 protocol is uvicorn's with a cap on open connections, counted from their accept, and
a bound on the time a TLS handshake and a request's head may take (``node.serve.connections``,
``[serve] max_connections`` and ``header_timeout``); it runs the TLS handshake itself.
"""

from __future__ import annotations

import json
import socket
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from mcp.server.auth.middleware.bearer_auth import AuthenticatedUser
from mcp.server.auth.provider import AccessToken
from starlette.datastructures import Headers
from starlette.responses import Response
from starlette.types import ASGIApp, Receive, Scope, Send

from node.address import Tls
from node.errors import Unauthenticated
from node.mcp.limits import BodyGate, SessionQuota
from node.mcp.server import CALLER_KEY, bearer_token, build_server
from node.node import Node
from node.serve.asgi import Endpoint, asgi_server

__all__ = ["MCP_PATH", "BearerGate", "Endpoint", "http_app", "http_server"]

MCP_PATH = "/mcp"
# The refusal's text exactly, as a tool answers it; the hint is a field of its own.
_UNAUTHORIZED = json.dumps({"error": Unauthenticated().text, "hint": Unauthenticated.HINT}).encode()
_REALM = 'Bearer realm="memlane"'
_INVALID_TOKEN = f'{_REALM}, error="invalid_token"'


class BearerGate:
    """ASGI: lets an HTTP request through only with a valid bearer token."""

    def __init__(self, app: ASGIApp, node: Node) -> None:
        self.app = app
        self.node = node

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":  # lifespan; uvicorn runs without websockets
            await self.app(scope, receive, send)
            return
        headers = Headers(scope=scope)
        token = bearer_token(headers)
        try:
            caller = await self.node.authenticate(token)
        except Unauthenticated:
            challenge = {"WWW-Authenticate": _challenge(headers)}
            response = Response(_UNAUTHORIZED, 401, challenge, "application/json")
            await response(scope, receive, send)
            return
        assert token is not None
        # The SDK binds a session to the credential that opened it (by client_id).
        expires = None if caller.expires is None else caller.expires // 1000
        scopes = sorted(caller.scopes)
        access = AccessToken(
            token=token, client_id=caller.token_id, scopes=scopes, expires_at=expires
        )
        scope["user"] = AuthenticatedUser(access)
        scope[CALLER_KEY] = caller  # the tool call uses it rather than looking the token up again
        await self.app(scope, receive, send)


def _challenge(headers: Headers) -> str:
    """RFC 6750 §3.1: no error code for a request without bearer credentials (no header,
    another scheme), ``invalid_token`` for a bearer token that is not valid (empty too)."""
    scheme = headers.get("authorization", "").partition(" ")[0]
    return _INVALID_TOKEN if scheme.lower() == "bearer" else _REALM


def http_app(node: Node, host: str) -> BearerGate:
    """The ASGI app: the SDK's streamable HTTP app at ``/mcp``, behind the bearer gate, the
    body's bounds and the token's session quota (``node.mcp.limits``), in that order.  On a
    loopback ``host`` the SDK also checks the ``Host`` header (DNS rebinding).  Answers are
    plain JSON rather than event streams: no tool sends anything before its result."""
    limits = node.config.serve_limits
    server = build_server(node, surface="http")
    app = server.streamable_http_app(
        streamable_http_path=MCP_PATH,
        host=host,
        json_response=True,
        max_request_body_size=limits.max_body_bytes,
        max_sessions=limits.max_sessions,
    )
    quota = SessionQuota(app, server.session_manager, limits.max_sessions_per_token)
    return BearerGate(BodyGate(quota, limits), node)


@asynccontextmanager
async def http_server(
    node: Node, listener: socket.socket, *, tls: Tls | None = None
) -> AsyncIterator[Endpoint]:
    """Serve MCP on ``listener`` (bound and listening) until the block ends
    (``node.serve.asgi``)."""
    app = http_app(node, listener.getsockname()[0])
    limits = node.config.serve_limits
    async with asgi_server(
        app, listener, limits, port="mcp", tls=tls, path=MCP_PATH, lifespan="on"
    ) as endpoint:
        yield endpoint
