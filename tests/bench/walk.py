"""How far one entry walks through the code: the files of ``node/`` and ``protocol/`` whose code
runs for one warm ``e_write`` over MCP's streamable HTTP, and the files of ``node/store/`` that
run for one batch received from a peer (``Replica.receive``, as a sync link hands it on).

A trace function on every thread (set before the node opens, so the store's connection threads
carry it too) records the file of each frame entered or resumed while a call is watched; the
call watched comes after a first one of the same kind has warmed every cache.  The rows count
files and the notes name them: a shorter walk for a reader following one write or one batch —
a structure figure, not a speed.
"""

from __future__ import annotations

import asyncio
import socket
import sys
import tempfile
import threading
from collections.abc import Awaitable, Callable
from pathlib import Path
from types import FrameType
from typing import Any

import httpx2
from mcp import Client
from mcp.client.streamable_http import streamable_http_client

from node.mcp.http import http_server
from node.node import Node, system_wall
from tests.bench.common import SMOKE, Check, tail, verdict
from tests.node.synckit import make_mesh

__all__ = ["run", "walk_receive", "walk_write"]

ROOT = Path(__file__).resolve().parents[2]
# At most: the files of node/ and protocol/ one e_write over MCP HTTP runs, and of node/store/
# one received batch runs (issue 40 asked 15 and 8; by this count the write's floor is the rooms
# it passes, each a job of its own: docs/benchmarks.md §walk).
WRITE_FILES = 30
RECEIVE_FILES = 8


class _Watch:
    """Files entered while ``watching``, on any thread traced."""

    def __init__(self) -> None:
        self.files: set[str] = set()
        self.watching = False

    def trace(self, frame: FrameType, _event: str, _arg: Any) -> None:
        if self.watching:
            self.files.add(frame.f_code.co_filename)

    async def around(self, call: Callable[[], Awaitable[object]]) -> list[str]:
        self.files.clear()
        self.watching = True
        try:
            await call()
            await asyncio.sleep(0.05)  # the commit's waiters and the thread's tail
        finally:
            self.watching = False
        return sorted(
            str(Path(f).relative_to(ROOT))
            for f in self.files
            if Path(f).is_relative_to(ROOT / "node") or Path(f).is_relative_to(ROOT / "protocol")
        )


async def walk_write(root: Path, watch: _Watch) -> list[str]:
    """The files one warm ``e_write`` over MCP HTTP runs."""
    await Node.init(root / "node")
    async with Node.open(root / "node") as node:
        issued = await node.create_token("alice", "w", ["read:workspace", "write:workspace"])
        listener = socket.socket()
        listener.bind(("127.0.0.1", 0))
        listener.listen()
        async with http_server(node, listener) as endpoint:
            headers = {"Authorization": f"Bearer {issued.token}"}
            async with httpx2.AsyncClient(headers=headers, timeout=30) as http:
                transport = streamable_http_client(endpoint.url, http_client=http)
                async with Client(transport) as client:
                    await client.call_tool("e_write", {"title": "warm", "text": "up"})
                    return await watch.around(
                        lambda: client.call_tool("e_write", {"title": "one", "text": "entry"})
                    )


async def walk_receive(root: Path, watch: _Watch) -> list[str]:
    """The files of ``node/store/`` one warm received batch runs."""
    dirs = await make_mesh(root, ["a", "b"], wall=system_wall)
    async with Node.open(dirs["a"]) as a:
        caller = await a.authenticate(
            (await a.create_token("alice", "w", ["read:workspace", "write:workspace"])).token
        )
        for i in range(40):
            await a.e_write(caller, title=f"sr {i}", text="a few words of text")
        entries = [e for e in await a.entries() if e.header.kind == "sr.put"]
    async with Node.open(dirs["b"]) as b:
        replica = b.replica()
        await replica.receive(entries[:20], source="peer:a")
        files = await watch.around(lambda: replica.receive(entries[20:], source="peer:a"))
    return [f for f in files if f.startswith("node/store/")]


def run(
    *,
    quick: bool = False,
    workdir: Path | None = None,
) -> str:
    watch = _Watch()
    sys.settrace(watch.trace)
    threading.settrace(watch.trace)
    try:
        with tempfile.TemporaryDirectory(dir=workdir) as tmp:
            write = asyncio.run(walk_write(Path(tmp) / "write", watch))
            receive = asyncio.run(walk_receive(Path(tmp) / "receive", watch))
    finally:
        sys.settrace(None)
        threading.settrace(None)  # type: ignore[arg-type]
    modules = sorted(p.name for p in (ROOT / "node" / "store").glob("*.py"))
    checks = [
        Check(
            "e_write over MCP HTTP: files of node/, protocol/",
            str(len(write)),
            f"<= {WRITE_FILES}",
            verdict(len(write) <= WRITE_FILES),
        ),
        Check(
            "one received batch: files of node/store/",
            str(len(receive)),
            f"<= {RECEIVE_FILES}",
            verdict(len(receive) <= RECEIVE_FILES),
        ),
        Check("modules of node/store/", str(len(modules)), "", "(info)"),
    ]
    notes = [f"e_write: {' '.join(write)}", f"receive: {' '.join(receive)}"]
    title = "The walk of one entry: the files whose code runs" + (SMOKE if quick else "")
    return "\n".join([title, *tail(checks, notes)])
