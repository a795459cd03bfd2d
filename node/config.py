"""Node configuration: ``config.toml`` in the data directory, every key optional.

- ``max_clock_skew`` (``"5m"``): how far past its own wall clock a received entry may pull
  this node's clock;
- ``synchronous`` (``"FULL"``): SQLite durability; FULL makes every acknowledged write survive
  a crash;
- ``pending_limit`` (``10000``): entries that may wait for a gap or an authenticating entry;
- ``pending_per_source`` (``1000``): of those, the entries one source (a peer node, a bundle)
  may hold; it holds at most the same share of ``pending_bytes``;
- ``pending_bytes`` (``67108864``, 64 MiB): the bytes (headers and payloads) waiting in all;
- ``pending_expiry`` (``"7d"``): a waiting entry older than this by the node's wall clock at its
  arrival is dropped (it is sent again while its gap is open);
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
- ``[mesh] max_connections`` (``32``), ``max_connections_per_key`` (``4``): sync connections
  open at once, in all and per node key (counted from its certificate, before hello);
- ``[mesh] max_handshakes`` (``64``), ``max_handshakes_per_address`` (``8``),
  ``handshake_timeout`` (``"10s"``): sync connections in their TLS handshake at once, in all
  and from one remote address, counted from accept, and how long one may take;
- ``[serve] mcp_http`` (``"127.0.0.1:8765"``): where ``memlane serve`` answers MCP;
- ``[serve] health`` (``"127.0.0.1:8766"``): where it answers ``/healthz`` and ``/metrics``
  (``"off"``: nowhere);
- ``[serve] max_body_bytes`` (``1048576``), ``max_json_depth`` (``32``), ``max_json_values``
  (``100000``): the bounds on an MCP request body, checked before it is parsed as JSON;
- ``[serve] max_sessions`` (``10000``), ``max_sessions_per_token`` (``16``): the open MCP
  sessions of the initialize era, in all and per token;
- ``[serve] max_connections`` (``256``), ``header_timeout`` (``"10s"``): MCP HTTP connections
  open at once, and how long one may take to send a request's head (from its connect, or
  from the answer before);
- ``[discovery] enabled`` (``true``): while sync runs, advertise this node's sync listener
  with zeroconf and dial the nodes of the same mesh found the same way;
- ``[discovery] interfaces`` (``[]``: every interface): the addresses zeroconf uses, e.g.
  ``["127.0.0.1"]``;
- ``[discovery] max_peers`` (``16``): at most this many discovered nodes are dialled at once;
- ``[discovery] max_waiting`` (``64``): at most this many more wait for a place;
- ``[discovery] evict_after`` (``"10s"``): a dialled discovered node that has not linked for
  this long gives its place to a waiting one;
- ``[search] embedder`` (``"none"``): the semantic leg of ``e_timeline find`` — ``"none"``,
  ``"wordllama"`` (a 256-d model whose weights ship in the ``memlane[semantic]`` wheel, loaded
  with no network) or ``"endpoint"`` (an OpenAI-compatible ``/v1/embeddings`` server);
- ``[search] url`` and ``model`` (required for ``endpoint``): the server's base URL
  (``http://`` or ``https://``; ``/v1/embeddings`` is added) and the model it is asked for;
- ``[search] key_file`` (unset): an absolute path (``~`` expands) to a readable file whose
  content, stripped, is sent as ``Authorization: Bearer …``;
- ``[search] timeout`` (``"10s"``, at most ``"10m"``): the bound on one request to the endpoint;
- ``[search] batch`` (``32``, 1–256): at most this many texts per request;
- ``[search] fusion_weight`` (``0.25``, 0–1): the vector leg's weight in the reciprocal-rank
  fusion with BM25 (docs/search.md).

The file is ``config.toml`` in the data directory unless ``--config FILE`` (or
``MEMLANE_CONFIG``) names another.  Environment variables override the file and flags
override both: ``MEMLANE_MCP_HTTP``, ``MEMLANE_HEALTH``, ``MEMLANE_SYNC_LISTEN``,
``MEMLANE_PEERS`` (comma-separated) and ``MEMLANE_DISCOVERY`` (``on``/``off``).  Every problem
is reported at once (``InvalidConfig.problems``); ``memlane config check`` lists them.
"""

from __future__ import annotations

import ipaddress
import os
import re
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any
from urllib.parse import SplitResult, urlsplit

from node.address import DEFAULT_HEALTH, DEFAULT_LISTEN, Listen, parse_listen
from node.errors import ConfigError
from node.search.settings import EMBEDDERS, SearchConfig
from node.tools.timeline_spec import MAX_PAGE_SIZE, ORDERS, Profile
from node.windows.zones import zone_named

__all__ = [
    "CONFIG_FILE",
    "EMBEDDERS",
    "ENVIRONMENT",
    "InvalidConfig",
    "MeshLimits",
    "NodeConfig",
    "SearchConfig",
    "ServeLimits",
    "parse_duration_ms",
]

CONFIG_FILE = "config.toml"
_MCP_HTTP, _HEALTH = parse_listen(DEFAULT_LISTEN), parse_listen(DEFAULT_HEALTH)


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


@dataclass(frozen=True, slots=True)
class MeshLimits:
    """What other parties may make ``memlane serve``'s sync port hold (docs/mesh.md §Memory
    and limits): connections, and those still in their TLS handshake."""

    max_connections: int = 32
    max_connections_per_key: int = 4
    max_handshakes: int = 64
    max_handshakes_per_address: int = 8
    handshake_timeout_ms: int = 10_000


def _counts(cls: type) -> tuple[str, ...]:
    """The integer bounds of a limits class (a ``*_ms`` field is a duration key)."""
    return tuple(f.name for f in fields(cls) if not f.name.endswith("_ms"))


_LIMITS = _counts(ServeLimits)
_MESH_LIMITS = _counts(MeshLimits)
_PENDING = {"pending_per_source": 1_000, "pending_bytes": 64 << 20}
_KEYS = {"max_clock_skew", "synchronous", "pending_limit", "zone", "profiles", "tools", "mesh",
         "serve", "discovery", "retention", "search", "pending_expiry", *_PENDING}  # fmt: skip
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
    """``^[1-9][0-9]*[smhdw]$`` (docs/time-windows.md §Declaring period forms) → milliseconds."""
    m = re.fullmatch(r"([1-9][0-9]*)([smhdw])", text) if isinstance(text, str) else None
    if m is None:
        raise ConfigError(f"{text!r} is not a duration like 30s, 5m, 2h, 1d or 1w")
    return int(m[1]) * _UNIT_MS[m[2]]


_MESH_KEYS = (*_MESH_LIMITS, "handshake_timeout")
_SERVE_KEYS = (*_LIMITS, "header_timeout")
_SEARCH_KEYS = {"embedder", "url", "model", "key_file", "timeout", "batch", "fusion_weight"}
_MAX_BATCH = 256
_MAX_TIMEOUT_MS = 10 * 60_000


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
        values.update(_pending(raw, problems))
        values["zone"] = _zone(raw.get("zone", "UTC"), problems)
        try:
            if "retention" in raw:
                values["retention_ms"] = parse_duration_ms(raw["retention"])
        except ConfigError as exc:
            problems.append(f"retention: {exc}")
        values["profiles"] = _profiles(raw.get("profiles", {}), problems)
        values["response_format"] = _response_format(raw.get("tools", {}), problems)
        values["mesh_listen"], values["mesh_peers"] = _mesh(raw.get("mesh", {}), problems)
        values["mesh_limits"] = _mesh_limits(raw.get("mesh", {}), problems)
        values.update(_serve(raw.get("serve", {}), problems))
        values.update(_discovery(raw.get("discovery", {}), problems))
        values["search"] = _search(raw.get("search", {}), problems)
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
    if not isinstance(raw, dict) or set(raw) - {"listen", "peers", *_MESH_KEYS}:
        problems.append(f"mesh may set only listen, peers and {', '.join(_MESH_KEYS)}")
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


def _mesh_limits(raw: Any, problems: list[str]) -> MeshLimits:
    if not isinstance(raw, dict) or set(raw) - {"listen", "peers", *_MESH_KEYS}:
        return MeshLimits()  # _mesh said so
    values = _bounds(raw, _MESH_LIMITS, "mesh", problems)
    return MeshLimits(**values, **_timeout(raw, "handshake_timeout", "mesh", problems))


def _bounds(raw: dict[str, Any], keys: tuple[str, ...], table: str,
            problems: list[str]) -> dict[str, int]:  # fmt: skip
    values = {key: raw[key] for key in keys if key in raw}
    for key, value in values.items():
        if type(value) is not int or value < 1:
            problems.append(f"{table}.{key} must be a positive integer")
    return values


def _timeout(raw: dict[str, Any], key: str, table: str, problems: list[str]) -> dict[str, int]:
    """``{key}_ms`` from a duration key, at most ten minutes; nothing when it is absent."""
    if key not in raw:
        return {}
    try:
        ms = parse_duration_ms(raw[key])
    except ConfigError as exc:
        problems.append(f"{table}.{key}: {exc}")
        return {}
    if ms > _MAX_TIMEOUT_MS:
        problems.append(f"{table}.{key} must be at most 10m")
    return {f"{key}_ms": ms}


def _serve(raw: Any, problems: list[str]) -> dict[str, Any]:
    if not isinstance(raw, dict) or set(raw) - {"mcp_http", "health", *_SERVE_KEYS}:
        problems.append(f"serve may set only mcp_http, health and {', '.join(_SERVE_KEYS)}")
        return {}
    out: dict[str, Any] = {"serve_limits": _serve_limits(raw, problems)}
    if "mcp_http" in raw:
        out["mcp_http"] = _address(raw["mcp_http"], "serve.mcp_http", problems, any_port=True)
    if raw.get("health") == "off":
        out["health"] = None
    elif "health" in raw:
        out["health"] = _address(raw["health"], "serve.health", problems, any_port=True)
    return out


def _serve_limits(raw: dict[str, Any], problems: list[str]) -> ServeLimits:
    values = _bounds(raw, _LIMITS, "serve", problems)
    return ServeLimits(**values, **_timeout(raw, "header_timeout", "serve", problems))


def _discovery(raw: Any, problems: list[str]) -> dict[str, Any]:
    if not isinstance(raw, dict) or set(raw) - {"enabled", "interfaces", *_DISCOVERY_BOUNDS}:
        problems.append("discovery may set only enabled, interfaces, max_peers, max_waiting and "
                        "evict_after")  # fmt: skip
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


def _search(raw: Any, problems: list[str]) -> SearchConfig:
    if not isinstance(raw, dict) or set(raw) - _SEARCH_KEYS:
        problems.append(f"search may set only {', '.join(sorted(_SEARCH_KEYS))}")
        return SearchConfig()
    before = len(problems)
    embedder = raw.get("embedder", "none")
    if embedder not in EMBEDDERS:
        problems.append(f"search.embedder must be one of {', '.join(EMBEDDERS)}")
    values = {"embedder": embedder, **_search_endpoint(raw, embedder, problems)}
    values.update(_search_bounds(raw, problems))
    return SearchConfig(**values) if len(problems) == before else SearchConfig()


def _search_endpoint(raw: dict[str, Any], embedder: Any, problems: list[str]) -> dict[str, Any]:
    url, model, key_file = raw.get("url"), raw.get("model"), raw.get("key_file")
    if embedder == "endpoint" and url is None:
        problems.append('search.url is required when search.embedder is "endpoint"')
    elif url is not None:
        _check_url(url, problems)
    if embedder == "endpoint" and model is None:
        problems.append('search.model is required when search.embedder is "endpoint"')
    elif model is not None and (not isinstance(model, str) or not model.strip()):
        problems.append("search.model must be a model name")
    path = _key_file(key_file, problems) if key_file is not None else None
    return {"url": url, "model": model, "key_file": path}


def _check_url(url: Any, problems: list[str]) -> None:
    parts = _url_parts(url)
    if parts is None:
        problems.append(f"search.url: {url!r} is not an http:// or https:// URL")
    elif parts.username is not None or parts.password is not None:
        problems.append("search.url must not hold credentials (use search.key_file)")
    elif parts.query or parts.fragment or parts.path.rstrip("/").endswith("/v1"):
        problems.append(f"search.url: {url!r} must be the server's base URL, without /v1 "
                        "(/v1/embeddings is added), a query or a fragment")  # fmt: skip


def _url_parts(url: Any) -> SplitResult | None:
    if not isinstance(url, str):
        return None
    try:
        parts = urlsplit(url)
        if parts.scheme in ("http", "https") and parts.hostname and parts.port != 0:
            return parts  # (.port raises ValueError for a port that is not a number)
    except ValueError:
        pass
    return None


def _key_file(value: Any, problems: list[str]) -> Path | None:
    path = Path(value).expanduser() if isinstance(value, str) and value else None
    if path is None or not path.is_absolute():
        problems.append("search.key_file must be an absolute path")
        return None
    if not path.is_file() or not os.access(path, os.R_OK):
        problems.append(f"search.key_file: {str(path)!r} is not a readable file")
        return None
    return path


def _search_bounds(raw: dict[str, Any], problems: list[str]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    try:
        if "timeout" in raw:
            out["timeout_ms"] = parse_duration_ms(raw["timeout"])
            if out["timeout_ms"] > _MAX_TIMEOUT_MS:
                problems.append("search.timeout must be at most 10m")
    except ConfigError as exc:
        problems.append(f"search.timeout: {exc}")
    batch = raw.get("batch", 32)
    if type(batch) is not int or not 1 <= batch <= _MAX_BATCH:
        problems.append(f"search.batch must be an integer from 1 to {_MAX_BATCH}")
    out["batch"] = batch
    weight = raw.get("fusion_weight", 0.25)
    if type(weight) not in (int, float) or not 0 <= weight <= 1:  # bool is not a weight
        problems.append("search.fusion_weight must be a number from 0 to 1")
    out["fusion_weight"] = float(weight) if type(weight) in (int, float) else 0.25
    return out
