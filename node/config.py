"""Node configuration: ``config.toml`` in the data directory, every key optional.

- ``max_clock_skew`` (``"5m"``): how far past its own wall clock a received entry may pull
  this node's clock;
- ``synchronous`` (``"FULL"``): SQLite durability; FULL makes every acknowledged write survive
  a crash;
- ``pending_limit`` (``10000``): entries that may wait for a gap or an authenticating entry;
- ``zone`` (``"UTC"``): the node's IANA zone (``Area/Location`` or ``UTC``) for the date and
  wall-time forms of tool calls' windows; e_timeline reads a bare ``start_date``/``end_date``
  as midnight in it (docs/time-windows.md);
- ``retention`` (unset): how far back this node promises data, a duration like ``90d``; tools
  declare it as their ``retention`` fact, so a window wholly older is refused before dispatch;
- ``[tools.defaults] responseFormat`` (``"detailed"``): the episode tools' ``response_format``
  when a call sends none (``concise`` or ``detailed``);
- ``[profiles.NAME]``: e_timeline's ``agent_profile`` presets — ``page_size`` (1–100),
  ``order_by`` (one of e_timeline's orders) and ``lanes`` (a list of lane names); each applies
  when the call does not say;
- ``[mesh] listen`` (unset: no listener): ``"HOST:PORT"`` where ``memlane serve`` accepts sync
  connections from the mesh's nodes (port 0 takes a free one; an IPv6 host in brackets).  Off
  by default: a node that only dials its peers needs none.  Mutual TLS guards it, so any
  address may be given;
- ``[mesh] peers`` (``[]``): ``["HOST:PORT", …]``, the nodes ``memlane serve`` dials and keeps
  connected;
- ``[serve] mcp_http`` (``"127.0.0.1:8765"``): where ``memlane serve`` answers MCP;
- ``[serve] health`` (``"127.0.0.1:8766"``): where it answers ``/healthz`` and ``/metrics``
  (``"off"``: nowhere);
- ``[discovery] enabled`` (``true``): while sync runs, advertise this node's sync listener
  with zeroconf and dial the nodes of the same mesh found the same way;
- ``[discovery] interfaces`` (``[]``: every interface): the addresses zeroconf uses, e.g.
  ``["127.0.0.1"]``;
- ``[discovery] max_peers`` (``16``): at most this many discovered nodes are dialled at once.

The file is ``config.toml`` in the data directory unless ``--config FILE`` (or
``MEMLANE_CONFIG``) names another.  Environment variables override the file and flags
override both: ``MEMLANE_MCP_HTTP``, ``MEMLANE_HEALTH``, ``MEMLANE_SYNC_LISTEN``,
``MEMLANE_PEERS`` (comma-separated) and ``MEMLANE_DISCOVERY`` (``on``/``off``).  Every problem
is reported at once (``InvalidConfig.problems``); ``memlane config check`` lists them.
"""

from __future__ import annotations

import ipaddress
import re
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from node.address import DEFAULT_LISTEN, Listen, parse_listen
from node.errors import ConfigError
from node.tools.timeline_spec import MAX_PAGE_SIZE, ORDERS, Profile
from node.windows.zones import zone_named

__all__ = ["CONFIG_FILE", "ENVIRONMENT", "InvalidConfig", "NodeConfig", "parse_duration_ms"]

CONFIG_FILE = "config.toml"
DEFAULT_HEALTH = "127.0.0.1:8766"
_MCP_HTTP, _HEALTH = parse_listen(DEFAULT_LISTEN), parse_listen(DEFAULT_HEALTH)
_KEYS = {"max_clock_skew", "synchronous", "pending_limit", "zone", "profiles", "tools", "mesh",
         "serve", "discovery", "retention"}  # fmt: skip
# environment variable → (table, key, how its text becomes the value)
ENVIRONMENT: dict[str, tuple[str, str, Any]] = {
    "MEMLANE_MCP_HTTP": ("serve", "mcp_http", str),
    "MEMLANE_HEALTH": ("serve", "health", str),
    "MEMLANE_SYNC_LISTEN": ("mesh", "listen", str),
    "MEMLANE_PEERS": ("mesh", "peers", lambda t: [p.strip() for p in t.split(",") if p.strip()]),
    "MEMLANE_DISCOVERY": ("discovery", "enabled", lambda t: {"on": True, "off": False}.get(t, t)),
}


class InvalidConfig(ConfigError):
    """A configuration with problems; ``problems`` lists every one of them."""

    def __init__(self, where: str, problems: list[str]) -> None:
        super().__init__(f"{where}: " + "; ".join(problems))
        self.where = where
        self.problems = problems


_UNIT_MS = {"s": 1000, "m": 60_000, "h": 3_600_000, "d": 86_400_000, "w": 604_800_000}


def parse_duration_ms(text: str) -> int:
    """``^[1-9][0-9]*[smhdw]$`` (TIME-WINDOWS §1) → milliseconds."""
    m = re.fullmatch(r"([1-9][0-9]*)([smhdw])", text) if isinstance(text, str) else None
    if m is None:
        raise ConfigError(f"{text!r} is not a duration like 30s, 5m, 2h, 1d or 1w")
    return int(m[1]) * _UNIT_MS[m[2]]


@dataclass(frozen=True, slots=True)
class NodeConfig:
    max_clock_skew_ms: int = 5 * 60_000
    synchronous: str = "FULL"
    pending_limit: int = 10_000
    zone: str = "UTC"
    retention_ms: int | None = None
    profiles: dict[str, Profile] = field(default_factory=dict)
    response_format: str = "detailed"
    mesh_listen: Listen | None = None
    mesh_peers: tuple[Listen, ...] = ()
    mcp_http: Listen = _MCP_HTTP
    health: Listen | None = _HEALTH
    discovery: bool = True
    discovery_interfaces: tuple[str, ...] = ()
    discovery_max_peers: int = 16

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
                raw = tomllib.loads(path.read_text())
            except tomllib.TOMLDecodeError as exc:
                raise InvalidConfig(str(path), [str(exc)]) from exc
            except OSError as exc:
                raise InvalidConfig(str(path), [exc.strerror or str(exc)]) from exc
        return cls.from_mapping(_overridden(raw, environ or {}), str(path))

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
        values["zone"] = _zone(raw.get("zone", "UTC"), problems)
        try:
            if "retention" in raw:
                values["retention_ms"] = parse_duration_ms(raw["retention"])
        except ConfigError as exc:
            problems.append(f"retention: {exc}")
        values["profiles"] = _profiles(raw.get("profiles", {}), problems)
        values["response_format"] = _response_format(raw.get("tools", {}), problems)
        values["mesh_listen"], values["mesh_peers"] = _mesh(raw.get("mesh", {}), problems)
        values.update(_serve(raw.get("serve", {}), problems))
        values.update(_discovery(raw.get("discovery", {}), problems))
        if problems:
            raise InvalidConfig(where, problems)
        return cls(**values)


def _overridden(raw: dict[str, Any], environ: Mapping[str, str]) -> dict[str, Any]:
    """``raw`` with the ``MEMLANE_*`` variables of ``environ`` written over it."""
    out = dict(raw)
    for name, (table, key, convert) in ENVIRONMENT.items():
        if name in environ:
            section = out.get(table)
            out[table] = {**(section if isinstance(section, dict) else {}),
                          key: convert(environ[name])}  # fmt: skip
    return out


def _zone(value: Any, problems: list[str]) -> str:
    if not isinstance(value, str) or zone_named(value) is None:  # IANA only: no PST, +05:30
        problems.append(f"zone: {value!r} is not an IANA time zone name (e.g. Europe/Berlin)")
        return "UTC"
    return value


def _profiles(raw: Any, problems: list[str]) -> dict[str, Profile]:
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


def _response_format(raw: Any, problems: list[str]) -> str:
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


def _address(text: Any, where: str, problems: list[str], *, any_port: bool) -> Listen | None:
    try:
        if not isinstance(text, str):
            raise ValueError(f'{text!r} is not a "HOST:PORT" string')
        address = parse_listen(text)
        if not any_port and address.port == 0:
            raise ValueError(f"{text!r} names no port")
    except ValueError as exc:
        problems.append(f"{where}: {exc}")
        return None
    return address


def _mesh(raw: Any, problems: list[str]) -> tuple[Listen | None, tuple[Listen, ...]]:
    if not isinstance(raw, dict) or set(raw) - {"listen", "peers"}:
        problems.append("mesh may set only listen and peers")
        return None, ()
    listen = None
    if "listen" in raw:
        listen = _address(raw["listen"], "mesh.listen", problems, any_port=True)
    peers = raw.get("peers", [])
    if not isinstance(peers, list):
        problems.append('mesh.peers must be a list of "HOST:PORT" strings')
        return listen, ()
    found = [_address(p, "mesh.peers", problems, any_port=False) for p in peers]
    return listen, tuple(p for p in found if p is not None)


def _serve(raw: Any, problems: list[str]) -> dict[str, Any]:
    if not isinstance(raw, dict) or set(raw) - {"mcp_http", "health"}:
        problems.append("serve may set only mcp_http and health")
        return {}
    out: dict[str, Any] = {}
    if "mcp_http" in raw:
        out["mcp_http"] = _address(raw["mcp_http"], "serve.mcp_http", problems, any_port=True)
    if raw.get("health") == "off":
        out["health"] = None
    elif "health" in raw:
        out["health"] = _address(raw["health"], "serve.health", problems, any_port=True)
    return out


def _discovery(raw: Any, problems: list[str]) -> dict[str, Any]:
    if not isinstance(raw, dict) or set(raw) - {"enabled", "interfaces", "max_peers"}:
        problems.append("discovery may set only enabled, interfaces and max_peers")
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
    cap = raw.get("max_peers", 16)
    if type(cap) is not int or not 1 <= cap <= 256:
        problems.append("discovery.max_peers must be an integer from 1 to 256")
    else:
        out["discovery_max_peers"] = cap
    return out


def _is_ip(text: Any) -> bool:
    if not isinstance(text, str):
        return False
    try:
        ipaddress.ip_address(text)
    except ValueError:
        return False
    return True
