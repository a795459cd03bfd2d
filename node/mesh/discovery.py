"""Finding the mesh's nodes on the local network with zeroconf (docs/operations.md
§Discovery).

A node that runs sync advertises ``_memlane._tcp.local.``: its sync port, and TXT properties
``v`` (1), ``mesh`` and ``node`` (hex).  It browses the same type and reports each service
it resolves as a ``Sighting`` — only a hint of where a node may be: whoever answers there
must still prove, by mutual TLS, that it holds an admitted key of this mesh.  What to do with
a sighting (same mesh only, not this node, a capped table) is the sync service's choice.
"""

from __future__ import annotations

import asyncio
import ipaddress
import socket
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

import ifaddr
from zeroconf import InterfaceChoice, IPVersion, ServiceStateChange, Zeroconf
from zeroconf.asyncio import AsyncServiceBrowser, AsyncServiceInfo, AsyncZeroconf

from node.identity import node_id
from node.logging import get_logger

__all__ = ["SERVICE_TYPE", "Discovery", "Sighting", "advertised_addresses", "sighting"]

_log = get_logger("node.mesh.discovery")

SERVICE_TYPE = "_memlane._tcp.local."
_RESOLVE_MS = 3000
_WILDCARDS = ("", "0.0.0.0", "::")  # noqa: S104 — names, not a bind


@dataclass(frozen=True, slots=True)
class Sighting:
    """A service seen on the network: its instance name and what it claims to be."""

    name: str
    mesh: bytes
    key: bytes
    host: str
    port: int


def _hex(value: bytes | None, size: int) -> bytes | None:
    try:
        raw = bytes.fromhex((value or b"").decode("ascii"))
    except (UnicodeDecodeError, ValueError):
        return None
    return raw if len(raw) == size else None


def sighting(
    name: str, properties: Mapping[bytes, bytes | None], addresses: Sequence[str], port: int
) -> Sighting | None:
    """The sighting a resolved service makes, or None when it is not a memlane node's
    (another version, a malformed property, no address)."""
    mesh, key = _hex(properties.get(b"mesh"), 16), _hex(properties.get(b"node"), 32)
    if properties.get(b"v") != b"1" or mesh is None or key is None or not addresses or port <= 0:
        return None
    routable = [a for a in addresses if not ipaddress.ip_address(a).is_loopback]
    return Sighting(name, mesh, key, (routable or list(addresses))[0], port)


def advertised_addresses(host: str, interfaces: Sequence[str]) -> list[str]:
    """The IPv4 addresses to advertise for a listener on ``host``: that host itself, or for a
    wildcard the configured interfaces, else every address but loopback's (loopback's only
    when there is nothing else)."""
    if host not in _WILDCARDS:
        return [host]
    if interfaces:
        return [a for a in interfaces if ipaddress.ip_address(a).version == 4]
    found = sorted(
        {ip.ip for adapter in ifaddr.get_adapters() for ip in adapter.ips if isinstance(ip.ip, str)}
    )
    return [a for a in found if not ipaddress.ip_address(a).is_loopback] or found


class Discovery:
    """Advertise this node and report what is found: ``found(sighting)`` when a service
    resolves (again after a change), ``lost(name)`` when it goes."""

    def __init__(
        self,
        *,
        mesh: bytes,
        key: bytes,
        interfaces: Sequence[str],
        found: Callable[[Sighting], None],
        lost: Callable[[str], None],
    ) -> None:
        self.mesh, self.key, self.interfaces = mesh, key, list(interfaces)
        self.name = f"memlane-{node_id(key)}.{SERVICE_TYPE}"
        self._found, self._lost = found, lost
        self._zc: AsyncZeroconf | None = None
        self._browser: AsyncServiceBrowser | None = None
        self._resolving: set[asyncio.Task[None]] = set()

    async def start(self, host: str | None, port: int | None) -> None:
        """Advertise a sync listener on ``host``:``port`` (None: nothing to advertise) and
        start browsing."""
        choice = self.interfaces or InterfaceChoice.All
        self._zc = AsyncZeroconf(interfaces=choice, ip_version=IPVersion.V4Only)
        if host is not None and port is not None:
            addresses = advertised_addresses(host, self.interfaces)
            info = AsyncServiceInfo(
                SERVICE_TYPE,
                self.name,
                port=port,
                addresses=[socket.inet_aton(a) for a in addresses],
                properties={"v": "1", "mesh": self.mesh.hex(), "node": self.key.hex()},
            )
            await self._zc.async_register_service(info, allow_name_change=True)
            _log.info("advertising on zeroconf", name=self.name, addresses=addresses, port=port)
        self._browser = AsyncServiceBrowser(
            self._zc.zeroconf, SERVICE_TYPE, handlers=[self._changed]
        )

    async def close(self) -> None:
        """Stop browsing and withdraw the advertisement (a goodbye on the network)."""
        for task in list(self._resolving):
            task.cancel()
        await asyncio.gather(*self._resolving, return_exceptions=True)
        if self._browser is not None:
            await self._browser.async_cancel()
        if self._zc is not None:
            await self._zc.async_unregister_all_services()
            await self._zc.async_close()
        self._browser = self._zc = None

    def _changed(
        self,
        zeroconf: Zeroconf,
        service_type: str,  # noqa: ARG002 - zeroconf passes each argument by its name
        name: str,
        state_change: ServiceStateChange,
    ) -> None:
        if name == self.name:
            return
        if state_change is ServiceStateChange.Removed:
            self._lost(name)
            return
        task = asyncio.ensure_future(self._resolve(zeroconf, name))
        self._resolving.add(task)
        task.add_done_callback(self._resolving.discard)

    async def _resolve(self, zeroconf: Zeroconf, name: str) -> None:
        info = AsyncServiceInfo(SERVICE_TYPE, name)
        if not await info.async_request(zeroconf, _RESOLVE_MS):
            return
        seen = sighting(
            name, info.properties, info.parsed_addresses(IPVersion.V4Only), info.port or 0
        )
        if seen is None:
            _log.info("ignoring a service that is not a memlane node's", name=name)
            return
        self._found(seen)
