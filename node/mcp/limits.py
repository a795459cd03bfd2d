"""What one MCP client may make ``memlane serve`` hold (docs/mcp.md §Limits).

``BodyGate`` reads a request body whole, at most ``max_body_bytes`` of it (413 beyond), and
scans it before anything parses it as JSON: its nesting depth and its count of containers and
values, from its brackets and commas outside strings (400 beyond either).  A body of a million
``[]`` would otherwise become a million lists in the SDK's parser before it is refused.

``SessionQuota`` caps the sessions of the initialize era that one token holds open: an opening
request beyond ``max_sessions_per_token`` is answered 429, while other tokens still open theirs
(the SDK's own cap, ``max_sessions``, counts every token together and answers 503).
Both answer with a JSON-RPC error without an id, as the SDK does for what it refuses.
"""

from __future__ import annotations

import asyncio
import json
import re
from collections import defaultdict

from mcp.server.streamable_http_manager import StreamableHTTPSessionManager
from mcp_types.version import HANDSHAKE_PROTOCOL_VERSIONS
from starlette.datastructures import Headers
from starlette.responses import Response
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from node.access.callers import Caller
from node.config import ServeLimits
from node.mcp.server import CALLER_KEY
from node.refusals import REFUSALS

__all__ = ["BodyGate", "SessionQuota", "json_shape"]

_INVALID_REQUEST = -32600  # JSON-RPC 2.0 §5.1
# A string, or an unterminated one through the end of the body: every match succeeds where it
# starts, so the scan is linear however the quotes and backslashes fall.
_STRING = re.compile(rb'"[^"\\]*(?:\\.[^"\\]*)*(?:"|\\?\Z)', re.DOTALL)
_NOT_BRACKET = bytes(b for b in range(256) if b not in b"[]{}")
_DEPTH = {ord("["): 1, ord("{"): 1, ord("]"): -1, ord("}"): -1}


def _refusal(message: str, status: int) -> Response:
    body = {"jsonrpc": "2.0", "id": None, "error": {"code": _INVALID_REQUEST, "message": message}}
    return Response(json.dumps(body), status, media_type="application/json")


def json_shape(body: bytes, *, max_values: int) -> tuple[int, int]:
    """``(values, depth)`` of a JSON text from its brackets and commas outside strings; each
    step runs in C but the depth walk, which sees at most ``2 * max_values`` brackets (when
    there are more, the depth is not walked and reported as 0)."""
    bare = _STRING.sub(b"", body)
    brackets = bare.translate(None, _NOT_BRACKET)
    values = bare.count(b",") + len(brackets) // 2 + 1
    if values > max_values or len(brackets) > 2 * max_values:
        return max(values, max_values + 1), 0
    depth = deepest = 0
    for byte in brackets:
        depth += _DEPTH[byte]
        deepest = max(deepest, depth)
    return values, deepest


class BodyGate:
    """ASGI: an HTTP request's body, bounded in size, depth and values, before the app."""

    def __init__(self, app: ASGIApp, limits: ServeLimits) -> None:
        self.app = app
        self.limits = limits

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        body = await self._read(scope, receive)
        refused = _too_large() if body is None else self._refusal(body)
        if refused is not None:
            await refused(scope, receive, send)
            return
        assert body is not None
        await self.app(scope, _replay(body, receive), send)

    async def _read(self, scope: Scope, receive: Receive) -> bytes | None:
        """The whole body, or None past ``max_body_bytes`` (or a disconnect before its end)."""
        most = self.limits.max_body_bytes
        declared = Headers(scope=scope).get("content-length", "")
        if declared.isdigit() and int(declared) > most:
            return None
        body = bytearray()
        while True:
            message = await receive()
            if message["type"] != "http.request":
                return None
            body += message.get("body", b"")
            if len(body) > most:
                return None
            if not message.get("more_body", False):
                return bytes(body)

    def _refusal(self, body: bytes) -> Response | None:
        limits = self.limits
        values, depth = json_shape(body, max_values=limits.max_json_values)
        if values > limits.max_json_values or depth > limits.max_json_depth:
            REFUSALS.count("mcp_json_shape")
        if values > limits.max_json_values:
            return _refusal(
                f"request body holds more than {limits.max_json_values} JSON values", 400
            )
        if depth > limits.max_json_depth:
            return _refusal(
                f"request body nests JSON deeper than {limits.max_json_depth} levels", 400
            )
        return None


def _too_large() -> Response:
    REFUSALS.count("mcp_body_bytes")
    return _refusal("request body too large", 413)


def _replay(body: bytes, receive: Receive) -> Receive:
    """A ``receive`` that gives ``body`` once, whole, then what the connection sends."""
    given = False

    async def replayed() -> Message:
        nonlocal given
        if given:
            return await receive()
        given = True
        return {"type": "http.request", "body": body, "more_body": False}

    return replayed


class SessionQuota:
    """ASGI: an opening request of the initialize era (no ``Mcp-Session-Id``; no protocol
    version header, or one of the handshake's) goes on only while its token holds fewer than
    ``most`` sessions.  A token's openings take turns, so two at once cannot both take the
    last place; the count is the SDK manager's own record of whose each open session is."""

    def __init__(self, app: ASGIApp, manager: StreamableHTTPSessionManager, most: int) -> None:
        self.app = app
        self.manager = manager
        self.most = most
        # One lock per token that has opened a session: as many as the store holds tokens.
        self._turns: defaultdict[str, asyncio.Lock] = defaultdict(asyncio.Lock)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        caller = scope.get(CALLER_KEY)
        if not isinstance(caller, Caller) or not _opens_session(scope):
            await self.app(scope, receive, send)
            return
        turn = self._turns[caller.token_id]
        async with turn:
            if self._held(caller.token_id) >= self.most:
                REFUSALS.count("mcp_sessions_per_token")
                refused = _refusal(
                    f"this token already holds {self.most} open sessions: end "
                    "one (DELETE) or let one expire",
                    429,
                )
                await refused(scope, receive, send)
            else:
                await self.app(scope, receive, send)

    def _held(self, token_id: str) -> int:
        owners = self.manager._session_owners.values()  # the SDK keeps no public count
        return sum(1 for owner in owners if owner["client_id"] == token_id)


def _opens_session(scope: Scope) -> bool:
    headers = Headers(scope=scope)
    version = headers.get("mcp-protocol-version")
    return (
        scope["method"] == "POST"
        and "mcp-session-id" not in headers
        and (version is None or version in HANDSHAKE_PROTOCOL_VERSIONS)
    )
