"""The MCP server over an open node (docs/mcp.md): the tools of ``node.tools.catalog``, each call
answered by ``Node.call``.

Nothing of a tool lives here.  Arguments go through as the client sent them — the SDK's
low-level server does not check them against the schemas, so the tool layer sees every value
and words every refusal.  An answer is the tool's JSON, as structured content and as one text
block; a refusal is the tool result ``{"error": "<text>"}`` with ``isError`` set (a call refused
before dispatch adds its ``call_window``).  The caller is authenticated on every call, so a
token revoked mid-session stops working at its next call.

The turn's context travels in the request's ``_meta`` under ``memlane/turn``
(docs/time-windows.md); it reaches the tools that declare period forms as their ``turn``.

A server built for a surface (``stdio``, ``http``) counts each call it answers — its tool,
whether it was refused, how long it took — in ``node.serve.meter``, for ``/metrics``.
"""

from __future__ import annotations

import json
import time
import traceback
from collections.abc import Mapping
from importlib.metadata import PackageNotFoundError, version
from typing import Any

import mcp.types as types
from mcp.server import Server, ServerRequestContext
from starlette.requests import Request

from node.access.callers import Caller
from node.errors import DiskRefused, Refusal
from node.logging import get_logger
from node.node import Node
from node.serve.meter import METER, ToolMeter
from node.tools.catalog import CATALOG, ToolSpec, by_name, unknown_tool
from node.tools.windows import turn_argument
from node.windows.turn import META_KEY

__all__ = [
    "CALLER_KEY",
    "INTERNAL_ERROR",
    "SERVER_NAME",
    "bearer_token",
    "build_server",
    "tool_result",
]

SERVER_NAME = "memlane"
CALLER_KEY = "memlane.caller"  # the ASGI scope key under which the bearer gate leaves the caller
INTERNAL_ERROR = "internal error"
_INSTRUCTIONS = (
    "A memlane memory node. Knowledge records (SRs): e_write, e_correct, e_adjust, e_delete, "
    "e_undelete; read them in time order with e_timeline, catch up with e_audit. Episodes of "
    "your work: work_record, work_result, work_forget; read them with work_episodes and "
    "work_episode_chain. Every answer is scoped to what your token may read; a refusal is "
    '{"error": "..."}.'
)
_log = get_logger("node.mcp")

Context = ServerRequestContext[Any, Any]


def _version() -> str:
    try:
        return version("memlane")
    except PackageNotFoundError:  # run from a source tree that was never installed
        return ""


def _tool(spec: ToolSpec) -> types.Tool:
    hints = spec.hints
    return types.Tool(
        name=spec.name,
        title=spec.title,
        description=spec.description,
        input_schema=dict(spec.input_schema),
        output_schema=dict(spec.output_schema),
        annotations=types.ToolAnnotations(
            title=spec.title,
            read_only_hint=hints.read_only,
            destructive_hint=hints.destructive,
            idempotent_hint=hints.idempotent,
            open_world_hint=hints.open_world,
        ),
    )


def tool_result(answer: dict[str, Any], *, error: bool = False) -> types.CallToolResult:
    """``answer`` as structured content and as its JSON text (for clients that read text)."""
    text = json.dumps(answer, ensure_ascii=False)
    return types.CallToolResult(
        content=[types.TextContent(text=text)], structured_content=answer, is_error=error
    )


def _refused(text: str) -> types.CallToolResult:
    return tool_result({"error": text}, error=True)


def _turn(params: types.CallToolRequestParams) -> dict[str, Any]:
    """The ``turn`` keyword of a call whose ``_meta`` carries the turn's context."""
    meta: dict[str, Any] = dict(params.meta or {})
    return {"turn": meta[META_KEY]} if META_KEY in meta else {}


def bearer_token(headers: Mapping[str, str]) -> str | None:
    """The token of an ``Authorization: Bearer <token>`` header, else None."""
    scheme, _, token = headers.get("authorization", "").partition(" ")
    token = token.strip()
    return token if scheme.lower() == "bearer" and token else None


class _Tools:
    """The two handlers the server registers, over one node."""

    def __init__(
        self, node: Node, token: str | None, surface: str | None, meter: ToolMeter
    ) -> None:
        self.node = node
        self.token = token
        self.surface = surface
        self.meter = meter
        if surface is not None:
            meter.serve(surface)
        self.listing = types.ListToolsResult(tools=[_tool(spec) for spec in CATALOG])

    async def caller_of(self, ctx: Context) -> Caller:
        """The caller of this call: the fixed token's, checked again now; or over HTTP, the
        one the bearer gate authenticated for this very request."""
        request = ctx.request
        if self.token is None and isinstance(request, Request):
            checked = request.scope.get(CALLER_KEY)
            if isinstance(checked, Caller):
                return checked
            return await self.node.authenticate(bearer_token(request.headers))
        return await self.node.authenticate(self.token)

    async def list_tools(
        self, _ctx: Context, _params: types.PaginatedRequestParams | None
    ) -> types.ListToolsResult:
        return self.listing

    async def call_tool(
        self, ctx: Context, params: types.CallToolRequestParams
    ) -> types.CallToolResult:
        """The call's answer, counted for the surface (from its arrival here to its answer)."""
        started = time.perf_counter()
        result = await self._answer(ctx, params)
        if self.surface is not None:
            elapsed = time.perf_counter() - started
            self.meter.record(self.surface, params.name, elapsed, refused=bool(result.is_error))
        return result

    async def _answer(
        self, ctx: Context, params: types.CallToolRequestParams
    ) -> types.CallToolResult:
        spec = by_name(params.name)
        if spec is None:
            return _refused(unknown_tool(params.name))
        arguments = params.arguments or {}
        periods = self.node.periods()
        turn = _turn(params) if spec.name in periods else {}
        if "turn" in arguments and spec.name in periods:
            return _refused(turn_argument(spec.name).text)
        try:
            caller = await self.caller_of(ctx)
            return tool_result(await self.node.call(spec.name, caller, **arguments, **turn))
        except Refusal as refusal:
            return tool_result(refusal.answer(), error=True)
        except DiskRefused as refused:  # the client may try again once space returns
            _log.warning("tool call failed", tool=spec.name, error=str(refused))
            return _refused(str(refused))
        except Exception:  # the surface's boundary: a client sees no internals
            _log.error("tool call failed", tool=spec.name, traceback=traceback.format_exc())
            return _refused(INTERNAL_ERROR)


def _input_schema(_name: str) -> Mapping[str, Any] | None:
    """No tool declares an argument carried in an ``Mcp-Param-*`` header, so there is nothing
    for the SDK to check against a schema (None skips a scan of it on every call)."""
    return None


def build_server(
    node: Node,
    *,
    token: str | None = None,
    surface: str | None = None,
    meter: ToolMeter = METER,
) -> Server[Any]:
    """The MCP server over ``node``.  With ``token``, every call acts as that token's
    principal (stdio, or a client in the same process); without, each call acts as the
    bearer token of the HTTP request that carries it.  With ``surface`` (``stdio``,
    ``http``), every call is counted in ``meter``."""
    tools = _Tools(node, token, surface, meter)
    return Server(
        SERVER_NAME,
        version=_version(),
        instructions=_INSTRUCTIONS,
        get_tool_input_schema=_input_schema,
        on_list_tools=tools.list_tools,
        on_call_tool=tools.call_tool,
    )
