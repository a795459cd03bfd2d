"""Shared test helpers: a wall clock the test moves, a writer of another node (and its
admission to the node's mesh), and row counts for "nothing stored"."""

from __future__ import annotations

import hashlib
import os
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import pytest

from node.access.callers import Caller
from node.errors import Refusal
from node.node import Node
from node.store.reader import AuditRow, LogRow, StoredEntry
from protocol.clock import Hlc
from protocol.entry import Entry
from protocol.kinds import encode_payload
from protocol.signing import SigningKey, seal

# Every table whose rows "nothing stored" covers: headers, payloads, views.
STORED_TABLES = (
    "headers",
    "payloads",
    "logs",
    "sr_versions",
    "srs",
    "sr_tags",
    "sr_links",
    "sr_due",
    "episode_entries",
    "episodes",
    "episode_due",
    "call_windows",
    "forks",
)


def sr_payload(sr_id: str, workspace: str = "team", **fields: Any) -> dict[str, Any]:
    return {"sr_id": sr_id, "workspace": workspace, "principal": "remote", "create": True} | fields


@dataclass
class ForeignWriter:
    """Another node's log: seals entries for ``mesh`` with its own key and epoch."""

    mesh: bytes
    seed: bytes = b"\x07" * 32
    epoch: bytes = b"\x01" * 8
    wall: int = 1_790_000_000_000
    entries: list[Entry] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.key = SigningKey(self.seed)

    def next(
        self,
        kind: str = "sr.put",
        payload: dict[str, Any] | None = None,
        *,
        raw_payload: bytes | None = None,
        hlc: Hlc | None = None,
    ) -> Entry:
        seq = len(self.entries) + 1
        if raw_payload is None:
            sr_id = f"00000000-0000-7000-8000-{seq:012d}"
            raw_payload = encode_payload(kind, payload or sr_payload(sr_id, title=f"t{seq}"))
        prev = self.entries[-1].id if self.entries else None
        self.wall += 1
        entry = seal(
            self.key,
            mesh=self.mesh,
            epoch=self.epoch,
            seq=seq,
            prev=prev,
            hlc=hlc or Hlc(self.wall, 0),
            kind=kind,
            payload=raw_payload,
        )
        self.entries.append(entry)
        return entry

    def run(self, n: int) -> list[Entry]:
        return [self.next() for _ in range(n)]


FAR_FUTURE_MS = 253_402_300_799_999


async def admit(
    node: Node, *writers: ForeignWriter | bytes, workspaces: Sequence[str] = ("*",)
) -> None:
    """Make each writer (or writer key) a member of ``node``'s mesh: a ``member.add`` for its
    key, authored through the node's authority key (a writer never admitted waits in the
    pending area)."""
    for writer in writers:
        key = writer if isinstance(writer, bytes) else writer.key.public
        await node.membership.admit_member(key, workspaces=workspaces, cert_expires=FAR_FUTURE_MS)


async def counts(node: Node) -> dict[str, int]:
    reader = node.reader()
    return {t: await reader.count(t) for t in STORED_TABLES}


async def held_entries(node: Node) -> list[tuple[LogRow, StoredEntry]]:
    """Every stored entry with its log, log by log in seq order (the reader's selects)."""
    reader = node.reader()
    return [
        (log, e)
        for log in await reader.select_logs()
        async for e in reader.iter_entries(log.log_id)
    ]


async def digest(node: Node) -> str:
    """A digest of every stored header and payload, in store order."""
    h = hashlib.sha256()
    for _, entry in sorted(await held_entries(node), key=lambda held: held[1].pos):
        h.update(entry.raw)
        h.update(entry.payload if entry.payload is not None else b"-")
    return h.hexdigest()


async def stored(node: Node) -> dict[str, int]:
    """Everything a refused call must leave untouched: log, views, audit, deletions."""
    reader = node.reader()
    return await counts(node) | {t: await reader.count(t) for t in ("audit", "deletions")}


async def refused(node: Node, tool: str, caller: Any, /, **args: Any) -> str:
    """Call ``tool``, expect a Refusal, check nothing was stored; return the text."""
    before = await stored(node)
    with pytest.raises(Refusal) as info:
        await getattr(node, tool)(caller, **args)
    assert await stored(node) == before
    assert str(info.value) == info.value.text
    return info.value.text


async def events(node: Node, name: str) -> list[AuditRow]:
    """The node's audit events named ``name``, in feed order."""
    reader = node.reader()
    return [row for row in await reader.select_audit(limit=1_000_000) if row.event == name]


async def pending(node: Node) -> set[bytes]:
    """The ids of the entries waiting in the pending area."""
    reader = node.reader()
    return {bytes(r[0]) for r in await reader.fetchall("SELECT id FROM pending")}


def strangers(mesh: bytes, n: int) -> list[Entry]:
    """Junk: first entries of writers no ``member.add`` admits, each left waiting for one."""
    return [ForeignWriter(mesh, seed=os.urandom(32)).next() for _ in range(n)]


def size(entry: Entry) -> int:
    return len(entry.raw) + len(entry.payload or b"")


class Wall:
    """A wall clock the test moves by hand (ms since the Unix epoch)."""

    def __init__(self, now: int = 1_790_000_000_000) -> None:
        self.now = now

    def __call__(self) -> int:
        return self.now


CallerFactory = Callable[..., Awaitable[Caller]]
