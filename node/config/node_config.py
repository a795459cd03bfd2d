"""``NodeConfig``: the whole configuration as one frozen value — ``config.toml`` read, the
``MEMLANE_*`` overrides written over it, every section checked and every problem reported at
once — and the top-level keys (``max_clock_skew``, ``synchronous``, the pending area's
bounds, ``retention``)."""

from __future__ import annotations

import tomllib
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from node.address import DEFAULT_HEALTH, DEFAULT_LISTEN, Listen, parse_listen
from node.config.discovery import read_discovery
from node.config.mesh import MeshLimits, read_mesh, read_mesh_limits
from node.config.search import read_search
from node.config.serve import ServeLimits, read_serve
from node.config.tools import read_profiles, read_response_format, read_zone
from node.config.values import InvalidConfig, parse_duration_ms
from node.errors import ConfigError
from node.search.settings import SearchConfig
from node.tools.timeline_spec import Profile

__all__ = ["CONFIG_FILE", "ENVIRONMENT", "NodeConfig"]


CONFIG_FILE = "config.toml"

_MCP_HTTP, _HEALTH = parse_listen(DEFAULT_LISTEN), parse_listen(DEFAULT_HEALTH)

_PENDING = {"pending_per_source": 1_000, "pending_bytes": 64 << 20}
_KEYS = {
    "max_clock_skew",
    "synchronous",
    "pending_limit",
    "zone",
    "profiles",
    "tools",
    "mesh",
    "serve",
    "discovery",
    "retention",
    "search",
    "pending_expiry",
    *_PENDING,
}
# environment variable → (table, key, how its text becomes the value)
ENVIRONMENT: dict[str, tuple[str, str, Any]] = {
    "MEMLANE_MCP_HTTP": ("serve", "mcp_http", str),
    "MEMLANE_HEALTH": ("serve", "health", str),
    "MEMLANE_SYNC_LISTEN": ("mesh", "listen", str),
    "MEMLANE_PEERS": ("mesh", "peers", lambda t: [p.strip() for p in t.split(",") if p.strip()]),
    "MEMLANE_DISCOVERY": ("discovery", "enabled", lambda t: {"on": True, "off": False}.get(t, t)),
}


@dataclass(frozen=True, slots=True)
class NodeConfig:
    max_clock_skew_ms: int = 5 * 60_000
    synchronous: str = "FULL"
    pending_limit: int = 10_000
    pending_per_source: int = 1_000
    pending_bytes: int = 64 << 20
    pending_expiry_ms: int = 7 * 86_400_000
    zone: str = "UTC"
    retention_ms: int | None = None
    profiles: dict[str, Profile] = field(default_factory=dict)
    response_format: str = "detailed"
    mesh_listen: Listen | None = None
    mesh_peers: tuple[Listen, ...] = ()
    mcp_http: Listen = _MCP_HTTP
    health: Listen | None = _HEALTH
    serve_limits: ServeLimits = field(default_factory=ServeLimits)
    mesh_limits: MeshLimits = field(default_factory=MeshLimits)
    discovery: bool = True
    discovery_interfaces: tuple[str, ...] = ()
    discovery_max_peers: int = 16
    discovery_max_waiting: int = 64
    discovery_evict_after_ms: int = 10_000
    search: SearchConfig = field(default_factory=SearchConfig)

    @classmethod
    def load(
        cls, data_dir: Path, file: Path | None = None, environ: Mapping[str, str] | None = None
    ) -> NodeConfig:
        """The configuration in ``file`` (default: ``config.toml`` in ``data_dir``, which may
        be absent), with ``environ``'s ``MEMLANE_*`` overrides when given."""
        path = file or data_dir / CONFIG_FILE
        raw: dict[str, Any] = {}
        if file is not None or path.exists():
            try:
                raw = tomllib.loads(path.read_text(encoding="utf-8"))
            except tomllib.TOMLDecodeError as exc:
                raise InvalidConfig(str(path), [str(exc)]) from exc
            except OSError as exc:
                raise InvalidConfig(str(path), [exc.strerror or str(exc)]) from exc
            except UnicodeDecodeError as exc:  # TOML is UTF-8 (toml.io, spec 1.0 §Spec)
                bad = f"not UTF-8 text: byte {exc.object[exc.start]:#04x} at offset {exc.start}"
                raise InvalidConfig(str(path), [bad]) from exc
        try:
            return cls.from_mapping(_overridden(raw, environ or {}), str(path))
        except InvalidConfig as exc:
            raise _blamed(exc, environ or {}) from None

    @classmethod
    def from_mapping(cls, raw: dict[str, Any], where: str = "config") -> NodeConfig:
        problems: list[str] = []
        problems += [f"unknown key {k!r}" for k in sorted(set(raw) - _KEYS)]
        values: dict[str, Any] = {}
        try:
            if "max_clock_skew" in raw:
                values["max_clock_skew_ms"] = parse_duration_ms(raw["max_clock_skew"])
        except ConfigError as exc:
            problems.append(f"max_clock_skew: {exc}")
        sync = raw.get("synchronous", "FULL")
        if sync not in ("OFF", "NORMAL", "FULL", "EXTRA"):
            problems.append("synchronous must be OFF, NORMAL, FULL or EXTRA")
        values["synchronous"] = sync
        limit = raw.get("pending_limit", 10_000)
        if type(limit) is not int or limit < 0:
            problems.append("pending_limit must be a non-negative integer")
        values["pending_limit"] = limit
        values.update(_pending(raw, problems))
        values["zone"] = read_zone(raw.get("zone", "UTC"), problems)
        try:
            if "retention" in raw:
                values["retention_ms"] = parse_duration_ms(raw["retention"])
        except ConfigError as exc:
            problems.append(f"retention: {exc}")
        values["profiles"] = read_profiles(raw.get("profiles", {}), problems)
        values["response_format"] = read_response_format(raw.get("tools", {}), problems)
        values["mesh_listen"], values["mesh_peers"] = read_mesh(raw.get("mesh", {}), problems)
        values["mesh_limits"] = read_mesh_limits(raw.get("mesh", {}), problems)
        values.update(read_serve(raw.get("serve", {}), problems))
        values.update(read_discovery(raw.get("discovery", {}), problems))
        values["search"] = read_search(raw.get("search", {}), problems)
        if problems:
            raise InvalidConfig(where, problems)
        return cls(**values)


def _overridden(raw: dict[str, Any], environ: Mapping[str, str]) -> dict[str, Any]:
    """``raw`` with the ``MEMLANE_*`` variables of ``environ`` written over it."""
    out = dict(raw)
    for name, (table, key, convert) in ENVIRONMENT.items():
        if name in environ:
            section = out.get(table)
            out[table] = {
                **(section if isinstance(section, dict) else {}),
                key: convert(environ[name]),
            }
    return out


def _blamed(exc: InvalidConfig, environ: Mapping[str, str]) -> InvalidConfig:
    """``exc`` with each problem a ``MEMLANE_*`` variable's value has on its own blamed on the
    variable, not on the file it overrides."""
    by_variable: dict[str, str] = {}
    for name in ENVIRONMENT:
        if name in environ:
            try:
                NodeConfig.from_mapping(_overridden({}, {name: environ[name]}))
            except InvalidConfig as alone:
                by_variable |= dict.fromkeys(alone.problems, name)
    sources = [by_variable.get(p, exc.where) for p in exc.problems]
    return InvalidConfig(exc.where, exc.problems, sources)


def _pending(raw: dict[str, Any], problems: list[str]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, default in _PENDING.items():
        value = raw.get(key, default)
        if type(value) is not int or value < 0:
            problems.append(f"{key} must be a non-negative integer")
        out[key] = value
    try:
        if "pending_expiry" in raw:
            out["pending_expiry_ms"] = parse_duration_ms(raw["pending_expiry"])
    except ConfigError as exc:
        problems.append(f"pending_expiry: {exc}")
    return out
