"""``[discovery]``: advertising this node's sync listener with zeroconf, and how many of the
nodes found the same way are dialled."""

from __future__ import annotations

import ipaddress
from typing import Any

from node.config.values import parse_duration_ms
from node.errors import ConfigError

__all__ = ["read_discovery"]


def read_discovery(raw: Any, problems: list[str]) -> dict[str, Any]:
    """``NodeConfig``'s ``discovery*`` values of ``[discovery]``."""
    if not isinstance(raw, dict) or set(raw) - {"enabled", "interfaces", *_DISCOVERY_BOUNDS}:
        problems.append(
            "discovery may set only enabled, interfaces, max_peers, max_waiting and evict_after"
        )
        return {}
    out: dict[str, Any] = {}
    enabled = raw.get("enabled", True)
    if not isinstance(enabled, bool):
        problems.append("discovery.enabled must be true or false (on or off)")
    out["discovery"] = enabled is True
    interfaces = raw.get("interfaces", [])
    if not isinstance(interfaces, list) or not all(_is_ip(i) for i in interfaces):
        problems.append("discovery.interfaces must be a list of IP addresses")
    else:
        out["discovery_interfaces"] = tuple(interfaces)
    for key, top in (("max_peers", 256), ("max_waiting", 4096)):
        cap = raw.get(key, _DISCOVERY_BOUNDS[key])
        if type(cap) is not int or not 1 <= cap <= top:
            problems.append(f"discovery.{key} must be an integer from 1 to {top}")
        else:
            out[f"discovery_{key}"] = cap
    if "evict_after" in raw:
        try:
            out["discovery_evict_after_ms"] = parse_duration_ms(raw["evict_after"])
        except ConfigError as exc:
            problems.append(f"discovery.evict_after: {exc}")
    return out


_DISCOVERY_BOUNDS = {"max_peers": 16, "max_waiting": 64, "evict_after": "10s"}


def _is_ip(text: Any) -> bool:
    if not isinstance(text, str):
        return False
    try:
        ipaddress.ip_address(text)
    except ValueError:
        return False
    return True
