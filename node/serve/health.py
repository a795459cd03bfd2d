"""``memlane serve``'s health endpoint (docs/operations.md §Health and metrics): plain HTTP,
``GET /healthz`` and ``GET /metrics``, nothing else, no token — so keep it on loopback or a
network only the operators' scrapers reach (it is ``127.0.0.1:8766`` by default).

``/healthz`` answers ``200`` when the store takes a write transaction within two seconds and
``503`` when it does not, or when the disk refused a write (full, or an I/O error) within the
last minute and no write as large has committed since (small writes may pass on a full disk,
a sync batch not); the JSON body also says whether sync runs and how many peer nodes it knows
and how many of them are connected, counted per node however many connections one has had
(peers come and go; they do not make a node unhealthy).  ``/metrics`` is
``node.serve.metrics`` in the Prometheus text format.  A request is read with limits (8 KiB of
head, five seconds); anything else is answered ``404`` or ``405`` and the connection closed.  At
most ``MAX_CONNECTIONS`` (16) connections are open at once; one more is closed at once, so
connections to this port cannot take the process's file descriptors.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import socket
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from http import HTTPStatus
from typing import TYPE_CHECKING, Any

from node.address import Listen, bind_for
from node.errors import NodeError
from node.ports import Slots
from node.refusals import REFUSALS
from node.serve.metrics import Metrics, render

if TYPE_CHECKING:
    from node.mesh.service import SyncService
    from node.node import Node

__all__ = ["MAX_CONNECTIONS", "HealthEndpoint", "health", "health_server"]

MAX_CONNECTIONS = 16  # a few scrapers and probes; each is answered and closed
_HEAD_LIMIT = 8192
_READ_SECONDS = 5.0
_WRITE_PROBE_SECONDS = 2.0
# A write the disk refused (full, an I/O error) keeps /healthz at 503 this long: longer than
# the sync links' backoff_max (30 s), so a link failing at each try keeps it there.
DISK_REFUSAL_HELD = 60.0
_TEXT = "text/plain; version=0.0.4; charset=utf-8"


async def health(node: Node, service: SyncService | None) -> tuple[bool, dict[str, Any]]:
    """(healthy, the body of ``/healthz``)."""

    try:
        async with asyncio.timeout(_WRITE_PROBE_SECONDS):
            await node.refresh()  # a write transaction that writes nothing
        writable = node.store.write_failure(DISK_REFUSAL_HELD)  # one begins on a full disk
    except (NodeError, TimeoutError) as exc:
        writable = str(exc) or "no write transaction within 2 s"
    peers = [] if service is None else service.sync.peers.nodes()
    body = {
        "status": "ok" if writable is None else "unhealthy",
        "node_id": node.info.node_id,
        "store": "writable" if writable is None else f"not writable: {writable}",
        "sync": service is not None,
        "peers": {"known": len(peers), "connected": sum(p.connected for p in peers)},
    }
    return writable is None, body


class HealthEndpoint:
    """Answers the two paths for one node (and its sync service, once running)."""

    def __init__(self, node: Node, service: SyncService | None) -> None:
        self.node, self.service = node, service
        self.metrics = Metrics(node, service)
        self.slots = Slots(MAX_CONNECTIONS)

    async def answer(self, method: str, path: str) -> tuple[HTTPStatus, str, bytes]:
        if path not in ("/healthz", "/metrics"):
            return HTTPStatus.NOT_FOUND, "text/plain", b"not found\n"
        if method not in ("GET", "HEAD"):
            return HTTPStatus.METHOD_NOT_ALLOWED, "text/plain", b"GET only\n"
        if path == "/metrics":
            return HTTPStatus.OK, _TEXT, render(await self.metrics.collect()).encode()
        healthy, body = await health(self.node, self.service)
        status = HTTPStatus.OK if healthy else HTTPStatus.SERVICE_UNAVAILABLE
        return status, "application/json", json.dumps(body, sort_keys=True).encode() + b"\n"

    async def handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        if self.slots.full("") is not None:
            REFUSALS.count("health_connections")
            writer.transport.abort()
            return
        self.slots.take("")
        try:
            await self._answer(reader, writer)
        finally:
            self.slots.give("")

    async def _answer(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            async with asyncio.timeout(_READ_SECONDS):
                head = await reader.readuntil(b"\r\n\r\n")
            method, path = _request_line(head)
            status, kind, body = await self.answer(method, path)
        except (asyncio.IncompleteReadError, asyncio.LimitOverrunError, TimeoutError, ValueError):
            status, kind, body, method = HTTPStatus.BAD_REQUEST, "text/plain", b"bad request\n", ""
        except NodeError as exc:
            status, kind, body = HTTPStatus.SERVICE_UNAVAILABLE, "text/plain", f"{exc}\n".encode()
        writer.write(
            f"HTTP/1.1 {status.value} {status.phrase}\r\nContent-Type: {kind}\r\n"
            f"Content-Length: {len(body)}\r\nConnection: close\r\n\r\n".encode()
            + (b"" if method == "HEAD" else body)
        )
        with contextlib.suppress(OSError):
            await writer.drain()
            writer.close()
            await writer.wait_closed()


def _request_line(head: bytes) -> tuple[str, str]:
    line = head.split(b"\r\n", 1)[0].decode("ascii")
    method, target, version = line.split(" ")
    if not version.startswith("HTTP/1."):
        raise ValueError(version)
    return method, target.split("?", 1)[0]


@asynccontextmanager
async def health_server(
    endpoint: HealthEndpoint, listen: Listen | socket.socket
) -> AsyncIterator[str]:
    """Serve ``endpoint`` on ``listen`` (an address, or a socket bound and listening) until
    the block ends; yields the base URL."""
    await endpoint.metrics.start()
    sock = listen if isinstance(listen, socket.socket) else bind_for(listen, "health")
    server = await asyncio.start_server(endpoint.handle, sock=sock, limit=_HEAD_LIMIT)
    host, port = server.sockets[0].getsockname()[:2]
    try:
        yield f"http://{f'[{host}]' if ':' in host else host}:{port}"
    finally:
        server.close()
        await server.wait_closed()
