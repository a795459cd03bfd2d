"""Helpers for the sync tests: nodes of one mesh, a sync service per node, waiting for
convergence on change signals, a cuttable TCP relay, and a hand-driven peer that misbehaves."""

from __future__ import annotations

import asyncio
import os
import shutil
import socket
import sqlite3
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping, Sequence
from contextlib import asynccontextmanager, closing, suppress
from dataclasses import dataclass, field
from pathlib import Path
from typing import TypeVar

from node.identity import AUTHORITY_KEY_FILE, DB_FILE, NODE_KEY_FILE, random_bytes
from node.mesh.host import LinkOptions
from node.mesh.sync import Sync, SyncOptions
from node.node import Node
from protocol.entry import Entry
from protocol.frames import FrameReader, encode_frame
from protocol.messages import Hello, Message, decode_message, encode_message
from protocol.signing import SigningKey
from tests.node.helpers import FAR_FUTURE_MS, ForeignWriter, admit

M = TypeVar("M", bound=Message)

FAST = SyncOptions(
    link=LinkOptions(hello_timeout=2.0, write_timeout=2.0, close_timeout=1.0),
    poll_interval=0.01,
    backoff_initial=0.02,
    backoff_max=0.2,
)


async def make_mesh(
    root: Path,
    names: Sequence[str],
    wall: Callable[[], int],
    writers: Sequence[ForeignWriter] = (),
    holds: Mapping[str, Sequence[str]] | None = None,
) -> dict[str, Path]:
    """Nodes of one mesh: the first is initialised (it holds the authority key) and admits the
    other nodes' keys and ``writers``; each other node is a copy of it with its own node key,
    log epoch and audit feed id, and without the authority key.  ``holds`` names, for some of
    the other nodes, the workspaces whose payloads their grant holds (docs/partial.md)."""
    first = root / names[0]
    info = await Node.init(first, wall=wall)
    for writer in writers:
        writer.mesh = info.mesh
    seeds = {name: random_bytes(32) for name in names[1:]}
    async with Node.open(first, wall=wall) as node:
        for name, seed in seeds.items():
            await node.membership.admit_member(
                SigningKey(seed).public, cert_expires=FAR_FUTURE_MS, holds=(holds or {}).get(name)
            )
        await admit(node, *writers)
    dirs = {names[0]: first}
    for name, seed in seeds.items():
        path = dirs[name] = root / name
        shutil.copytree(first, path)
        (path / AUTHORITY_KEY_FILE).unlink()
        (path / NODE_KEY_FILE).unlink()
        fd = os.open(path / NODE_KEY_FILE, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "wb") as f:
            f.write(seed)
        with closing(sqlite3.connect(path / DB_FILE)) as db, db:
            for key, value in (
                ("epoch", random_bytes(8)),
                ("feed_id", random_bytes(8).hex().encode()),
            ):
                db.execute("UPDATE state SET value = ? WHERE key = ?", (value, key))
    return dirs


@asynccontextmanager
async def syncing(node: Node, options: SyncOptions = FAST) -> AsyncIterator[Sync]:
    async with Sync(node.replica(), key=node.key.public, options=options) as sync:
        yield sync


async def frontier_digest(node: Node) -> bytes:
    snap = await node.replica().snapshot()
    return snap.frontier.digest()


async def held(node: Node) -> set[tuple[bytes, bytes | None]]:
    """Every entry the node holds, as (id, payload)."""
    return {(e.id, e.payload) for e in await node.entries()}


async def until(
    check: Callable[[], Awaitable[bool]], syncs: Sequence[Sync], *, within: float = 10.0
) -> None:
    """Wait until ``check()`` holds, looking again whenever a node's store or peer table
    changes."""
    async with asyncio.timeout(within):
        while True:
            versions = [s.commits.version for s in syncs]
            if await check():
                return
            waits = [
                asyncio.ensure_future(s.commits.wait(v))
                for s, v in zip(syncs, versions, strict=True)
            ]
            waits += [asyncio.ensure_future(_table_moved(s)) for s in syncs]
            try:
                await asyncio.wait(waits, return_when=asyncio.FIRST_COMPLETED)
            finally:
                for w in waits:
                    w.cancel()


async def _table_moved(sync: Sync) -> None:
    version = sync.peers.version
    await sync.peers.wait_for(lambda table: table.version > version)


async def converged(nodes: Sequence[Node], syncs: Sequence[Sync], *, within: float = 10.0) -> None:
    """Wait until every node has the same frontier."""

    async def same() -> bool:
        return len({await frontier_digest(n) for n in nodes}) == 1

    await until(same, syncs, within=within)


async def own_ids(node: Node) -> set[bytes]:
    """Ids of the entries this node authored itself (its node key's logs)."""
    return {e.id for e in await node.entries() if e.header.writer == node.key.public}


# -- a relay that can be cut ---------------------------------------------------------------------


@dataclass
class Relay:
    """A TCP relay to ``target``.  The first connection carries at most ``budget`` bytes from
    the target back to the client, then stalls; ``cut`` drops every connection and holds new
    ones until ``reopen``."""

    target: tuple[str, int]
    budget: int | None = None
    stalled: asyncio.Event = field(default_factory=asyncio.Event)
    gate: asyncio.Event = field(default_factory=asyncio.Event)
    connections: int = 0
    _writers: list[asyncio.StreamWriter] = field(default_factory=list)
    _tasks: set[asyncio.Task[None]] = field(default_factory=set)
    _server: asyncio.Server | None = None

    async def start(self) -> tuple[str, int]:
        self.gate.set()
        self._server = await asyncio.start_server(self._handle, "127.0.0.1", 0)
        host, port = self._server.sockets[0].getsockname()[:2]
        return host, port

    async def close(self) -> None:
        self.cut()
        if self._server is not None:
            self._server.close()
        for task in self._tasks:
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)

    def cut(self) -> None:
        self.gate.clear()
        for w in self._writers:
            w.transport.abort()
        self._writers.clear()

    def reopen(self) -> None:
        self.gate.set()

    async def _handle(self, cr: asyncio.StreamReader, cw: asyncio.StreamWriter) -> None:
        number = self.connections
        self.connections += 1
        self._writers.append(cw)
        await self.gate.wait()
        ur, uw = await asyncio.open_connection(*self.target)
        self._writers.append(uw)
        budget = self.budget if number == 0 else None
        for task in (self._pipe(cr, uw, None), self._pipe(ur, cw, budget)):
            t = asyncio.create_task(task)
            self._tasks.add(t)
            t.add_done_callback(self._tasks.discard)

    async def _pipe(
        self, src: asyncio.StreamReader, dst: asyncio.StreamWriter, budget: int | None
    ) -> None:
        try:
            while data := await src.read(65536):
                if budget is not None:
                    data = data[:budget]
                    budget -= len(data)
                dst.write(data)
                await dst.drain()
                if budget == 0:
                    self.stalled.set()
                    await asyncio.Event().wait()  # forward nothing more
        except (OSError, asyncio.IncompleteReadError):
            pass
        finally:
            dst.transport.abort()


# -- a peer driven by hand ---------------------------------------------------------------------


class RawPeer:
    """A client that speaks the protocol by hand, with no session to stop it saying what it
    may not; it keeps every byte the node sends."""

    def __init__(self, mesh: bytes, key: bytes | None = None) -> None:
        self.hello = Hello(1, 0, mesh, key or random_bytes(32))
        self.data = bytearray()
        self.reader: asyncio.StreamReader
        self.writer: asyncio.StreamWriter

    async def connect(self, address: tuple[str, int], *, rcvbuf: int | None = None) -> None:
        if rcvbuf is None:
            self.reader, self.writer = await asyncio.open_connection(*address)
            return
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, rcvbuf)  # before connecting
        sock.setblocking(False)
        await asyncio.get_running_loop().sock_connect(sock, address)
        self.reader, self.writer = await asyncio.open_connection(sock=sock)

    def say(self, *messages: Message) -> None:
        for message in messages:
            self.send_raw(frame(message))

    def send_raw(self, data: bytes) -> None:
        self.writer.write(data)

    def messages(self) -> list[Message]:
        """Every whole message the node has sent so far."""
        reader, out = FrameReader(), []
        reader.feed(bytes(self.data))
        while (body := reader.next_frame()) is not None:
            out.append(decode_message(body))
        return out

    async def until(self, kind: type[M], *, count: int = 1, within: float = 5.0) -> list[M]:
        """Read until the node has sent ``count`` messages of ``kind``; all of them so far."""
        async with asyncio.timeout(within):
            while True:
                found = [m for m in self.messages() if isinstance(m, kind)]
                if len(found) >= count:
                    return found
                chunk = await self.reader.read(65536)
                if not chunk:
                    raise AssertionError(f"closed before a {kind.__name__}: {self.messages()}")
                self.data += chunk

    async def closed(self, *, within: float = 5.0) -> list[Message]:
        """Read until the node closes the connection; every message it sent."""
        async with asyncio.timeout(within):
            with suppress(ConnectionResetError):
                while chunk := await self.reader.read(65536):
                    self.data += chunk
        return self.messages()

    def close(self) -> None:
        if hasattr(self, "writer"):
            self.writer.transport.abort()


def frame(message: Message) -> bytes:
    """A frame built without any session's checks."""
    return encode_frame(encode_message(message))


def wire(entries: Sequence[Entry]) -> tuple[tuple[bytes, bytes | None], ...]:
    return tuple((e.raw, e.payload) for e in entries)


async def write_own(node: Node, n: int) -> None:
    issued = await node.create_token("a", "team", ("read:workspace", "write:workspace"))
    caller = await node.authenticate(issued.token)
    await asyncio.gather(*(node.e_write(caller, title=f"a {i}", text="a" * 300) for i in range(n)))
