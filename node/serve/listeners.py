"""The ports ``memlane serve`` listens on, every one bound before anything else starts
(docs/operations.md §Ports): a port that cannot be bound ends ``serve`` before it has opened a
link, dialled a peer or advertised itself, with a message that names the address, the reason
in words and what sets it — ``cannot listen for health on 127.0.0.1:8766: the address is in
use (set --health-listen, MEMLANE_HEALTH or [serve] health)``."""

from __future__ import annotations

import socket
from collections.abc import Mapping
from contextlib import ExitStack

from node.address import Listen, bind_for

__all__ = ["PORTS", "bind_all"]

# What each port is for, and what sets it, as its message names them.
PORTS = {
    "mcp_http": ("MCP", "--mcp-http, MEMLANE_MCP_HTTP or [serve] mcp_http"),
    "web": ("the web view", "--web"),
    "health": ("health", "--health-listen, MEMLANE_HEALTH or [serve] health"),
    "sync": ("sync", "--sync-listen, MEMLANE_SYNC_LISTEN or [mesh] listen"),
    "join": ("joins", "--join-listen"),
}


def bind_all(
    stack: ExitStack, wanted: Mapping[str, Listen | None]
) -> dict[str, socket.socket | None]:
    """A listening socket for each port of ``wanted`` that is set (keys of ``PORTS``), each
    closed with ``stack``; ``CannotListen`` at the first that cannot be bound (those bound
    before it are closed with the stack)."""
    bound: dict[str, socket.socket | None] = {}
    for name, listen in wanted.items():
        purpose, setting = PORTS[name]
        sock = None if listen is None else bind_for(listen, purpose, setting)
        bound[name] = None if sock is None else stack.enter_context(sock)
    return bound
