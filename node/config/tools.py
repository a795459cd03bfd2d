"""The tool calls' keys: ``zone``, ``[profiles.NAME]`` (e_timeline's presets) and
``[tools.defaults]``."""

from __future__ import annotations

from typing import Any

from node.tools.timeline_spec import MAX_PAGE_SIZE, ORDERS, Profile
from node.windows.zones import zone_named

__all__ = ["read_profiles", "read_response_format", "read_zone"]


def read_zone(value: Any, problems: list[str]) -> str:
    """``zone``: an IANA zone name (UTC when it is not one)."""
    if not isinstance(value, str) or zone_named(value) is None:  # IANA only: no PST, +05:30
        problems.append(f"zone: {value!r} is not an IANA time zone name (e.g. Europe/Berlin)")
        return "UTC"
    return value


def read_profiles(raw: Any, problems: list[str]) -> dict[str, Profile]:
    """``[profiles.NAME]``: e_timeline's presets, by name."""
    if not isinstance(raw, dict):
        problems.append("profiles must be a table of tables")
        return {}
    out = {}
    for name, table in raw.items():
        where = f"profiles.{name}"
        if not isinstance(table, dict) or set(table) - {"page_size", "order_by", "lanes"}:
            problems.append(f"{where} may set only page_size, order_by and lanes")
            continue
        size, order, lanes = table.get("page_size"), table.get("order_by"), table.get("lanes", [])
        if size is not None and (type(size) is not int or not 1 <= size <= MAX_PAGE_SIZE):
            problems.append(f"{where}.page_size must be an integer from 1 to {MAX_PAGE_SIZE}")
        if order is not None and order not in ORDERS:
            problems.append(f"{where}.order_by must be one of {', '.join(ORDERS)}")
        if not isinstance(lanes, list) or not all(isinstance(x, str) and x for x in lanes):
            problems.append(f"{where}.lanes must be a list of lane names")
            lanes = []
        out[name] = Profile(size, order, tuple(lanes))
    return out


def read_response_format(raw: Any, problems: list[str]) -> str:
    """``[tools.defaults] responseFormat``: ``concise`` or ``detailed``."""
    defaults = raw.get("defaults", {}) if isinstance(raw, dict) else None
    if (
        not isinstance(defaults, dict)
        or set(raw) - {"defaults"}
        or set(defaults) - {"responseFormat"}
    ):
        problems.append("tools may hold only a [tools.defaults] table with responseFormat")
        return "detailed"
    value = defaults.get("responseFormat", "detailed")
    if value not in ("concise", "detailed"):
        problems.append("tools.defaults.responseFormat must be concise or detailed")
        return "detailed"
    return str(value)
