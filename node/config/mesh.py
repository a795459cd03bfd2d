"""``[mesh]``: the sync listener, the peers ``memlane serve`` dials, and what other parties
may make its sync port hold."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from node.address import Listen
from node.config.values import count_keys, read_address, read_bounds, read_timeout

__all__ = ["MeshLimits", "read_mesh", "read_mesh_limits"]


@dataclass(frozen=True, slots=True)
class MeshLimits:
    """What other parties may make ``memlane serve``'s sync port hold (docs/mesh.md §Memory
    and limits): connections, and those still in their TLS handshake; how long a dialled
    peer is waited for at most between two tries (``backoff_max``), and how long a link's
    peer may answer nothing before the link is closed (``dead_peer_after``)."""

    max_connections: int = 32
    max_connections_per_key: int = 4
    max_handshakes: int = 64
    max_handshakes_per_address: int = 8
    handshake_timeout_ms: int = 10_000
    backoff_max_ms: int = 30_000
    dead_peer_after_ms: int = 30_000


_MESH_LIMITS = count_keys(MeshLimits)

_MESH_KEYS = (*_MESH_LIMITS, "handshake_timeout", "backoff_max", "dead_peer_after")


def read_mesh(raw: Any, problems: list[str]) -> tuple[Listen | None, tuple[Listen, ...]]:
    """``[mesh]``'s listener and peers."""
    if not isinstance(raw, dict) or set(raw) - {"listen", "peers", *_MESH_KEYS}:
        problems.append(f"mesh may set only listen, peers and {', '.join(_MESH_KEYS)}")
        return None, ()
    listen = None
    if "listen" in raw:
        listen = read_address(raw["listen"], "mesh.listen", problems, any_port=True)
    peers = raw.get("peers", [])
    if not isinstance(peers, list):
        problems.append('mesh.peers must be a list of "HOST:PORT" strings')
        return listen, ()
    found = [read_address(p, "mesh.peers", problems, any_port=False) for p in peers]
    return listen, tuple(p for p in found if p is not None)


def read_mesh_limits(raw: Any, problems: list[str]) -> MeshLimits:
    """``[mesh]``'s limits (a table ``read_mesh`` refused gives the defaults)."""
    if not isinstance(raw, dict) or set(raw) - {"listen", "peers", *_MESH_KEYS}:
        return MeshLimits()  # read_mesh said so
    values = read_bounds(raw, _MESH_LIMITS, "mesh", problems)
    values |= read_timeout(raw, "handshake_timeout", "mesh", problems)
    values |= read_timeout(raw, "backoff_max", "mesh", problems)  # a duration: 1s at least
    values |= read_timeout(raw, "dead_peer_after", "mesh", problems)
    return MeshLimits(**values)
