"""Listening addresses (``HOST:PORT``) for the node's servers — MCP over HTTP, sync, joins —
and the rule for the MCP HTTP surface (docs/mcp.md §Where it may listen): loopback by
default; an address off loopback only with TLS, or when the operator says
``--insecure-no-tls``."""

from __future__ import annotations

import errno
import ipaddress
import socket
from dataclasses import dataclass
from pathlib import Path

from node.errors import CannotListen

__all__ = ["DEFAULT_LISTEN", "Listen", "Tls", "bind_for", "parse_listen"]

DEFAULT_LISTEN = "127.0.0.1:8765"
DEFAULT_HEALTH = "127.0.0.1:8766"


@dataclass(frozen=True, slots=True)
class Listen:
    host: str
    port: int

    @property
    def shown(self) -> str:
        """``HOST:PORT`` as it is written (an IPv6 host in brackets)."""
        return f"[{self.host}]:{self.port}" if ":" in self.host else f"{self.host}:{self.port}"

    @property
    def loopback(self) -> bool:
        """Only loopback addresses count; any other name could resolve off the machine."""
        if self.host == "localhost":
            return True
        try:
            return ipaddress.ip_address(self.host).is_loopback
        except ValueError:
            return False

    def bind(self) -> socket.socket:
        """A listening socket on (host, port); port 0 takes a free port."""
        family, kind, proto, _, address = socket.getaddrinfo(
            self.host, self.port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE
        )[0]
        sock = socket.socket(family, kind, proto)
        try:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            sock.bind(address)
            sock.listen(128)
        except OSError:
            sock.close()
            raise
        return sock


_WHY = {
    errno.EADDRINUSE: "the address is in use",
    errno.EADDRNOTAVAIL: "the address is not one of this machine's",
    errno.EACCES: "permission denied (a port below 1024 needs privileges)",
}


def bind_for(listen: Listen, purpose: str, setting: str | None = None) -> socket.socket:
    """A socket listening on ``listen`` for ``purpose`` (``"MCP"``, ``"health"`` …), or
    ``CannotListen`` whose message names the address, the reason in words and, given
    ``setting``, what sets it."""
    try:
        return listen.bind()
    except OSError as exc:
        why = _WHY.get(exc.errno or 0) or exc.strerror or type(exc).__name__
        hint = f" (set {setting})" if setting else ""
        raise CannotListen(f"cannot listen for {purpose} on {listen.shown}: {why}{hint}") from exc


@dataclass(frozen=True, slots=True)
class Tls:
    """The server's certificate chain and private key, PEM files."""

    cert: Path
    key: Path


def parse_listen(text: str) -> Listen:
    """``HOST:PORT``, with an IPv6 host in brackets (``[::1]:8765``); raises ``ValueError``."""
    host, sep, port = text.rpartition(":")
    if host.startswith("[") and host.endswith("]"):
        host = host[1:-1]
    elif ":" in host:
        raise ValueError(f"{text!r}: write an IPv6 address in brackets, e.g. [::1]:8765")
    if not sep or not host or not port.isdigit() or not 0 <= int(port) <= 65535:
        raise ValueError(f"{text!r} is not HOST:PORT (e.g. {DEFAULT_LISTEN})")
    return Listen(host, int(port))
