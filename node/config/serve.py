"""``[serve]``: where ``memlane serve`` answers MCP and ``/healthz``, and what one MCP client
may make it hold."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from node.config.values import count_keys, read_address, read_bounds, read_timeout

__all__ = ["ServeLimits", "read_serve"]


@dataclass(frozen=True, slots=True)
class ServeLimits:
    """What one MCP client may make ``memlane serve`` hold (docs/mcp.md §Limits)."""

    max_body_bytes: int = 1 << 20
    max_json_depth: int = 32
    max_json_values: int = 100_000
    max_sessions: int = 10_000
    max_sessions_per_token: int = 16
    max_connections: int = 256
    header_timeout_ms: int = 10_000


_LIMITS = count_keys(ServeLimits)

_SERVE_KEYS = (*_LIMITS, "header_timeout")


def read_serve(raw: Any, problems: list[str]) -> dict[str, Any]:
    """``NodeConfig``'s values of ``[serve]``: its addresses and ``serve_limits``."""
    if not isinstance(raw, dict) or set(raw) - {"mcp_http", "health", *_SERVE_KEYS}:
        problems.append(f"serve may set only mcp_http, health and {', '.join(_SERVE_KEYS)}")
        return {}
    out: dict[str, Any] = {"serve_limits": _serve_limits(raw, problems)}
    if "mcp_http" in raw:
        out["mcp_http"] = read_address(raw["mcp_http"], "serve.mcp_http", problems, any_port=True)
    if raw.get("health") == "off":
        out["health"] = None
    elif "health" in raw:
        out["health"] = read_address(raw["health"], "serve.health", problems, any_port=True)
    return out


def _serve_limits(raw: dict[str, Any], problems: list[str]) -> ServeLimits:
    values = read_bounds(raw, _LIMITS, "serve", problems)
    return ServeLimits(**values, **read_timeout(raw, "header_timeout", "serve", problems))
