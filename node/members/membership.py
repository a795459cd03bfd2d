"""Mesh membership: which writers may write which workspaces (docs/mesh.md §Members,
§The admission rule).

Membership is derived from the mesh authority's own log: a ``member.add`` grants a node key a
list of workspaces (``*`` for all) and a certificate expiry; a ``member.revoke`` cuts a key off
after the last (epoch, seq) still accepted.  ``Membership`` keeps the result in one dict from
node key to ``Member``, so the receive path checks an entry with one lookup (docs/mesh.md).

It is a view of the log (``node.store.views``): it applies each member entry in the append
transaction, is loaded at open by replaying the authority's applied member entries, withdraws
what a hidden (forked) authority log contributed, and is rebuilt by ``memlane views rebuild``
with the other views.  Member entries fold in the total order (wall, counter, epoch, seq), so
every node holding the same authority entries has the same members whatever order they arrived
in:

- the newest ``member.add`` of a key sets its workspaces, the workspaces whose payloads it
  may hold (``holds``, docs/partial.md), certificate expiry and label (a renewal is a new
  ``member.add``);
- a key's first ``member.revoke`` is final: later adds and revokes of that key change nothing.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Any

from typing_extensions import override

from node.identity import node_id
from node.members.errors import MeshError, UnknownMember
from node.store.members import select_authority, select_member_entries
from node.store.store import Wait
from node.store.views import AppliedEntry, Erased, HiddenEntries, View
from node.store.writer import Txn
from protocol.clock import Hlc
from protocol.entry import Header, decode_header
from protocol.errors import PayloadError
from protocol.kinds import KINDS, decode_payload, holds_place, workspace_of

__all__ = [
    "ALL_WORKSPACES",
    "DEFAULT_MAX_LOGS",
    "MEMBER_KINDS",
    "Cutoff",
    "Member",
    "Membership",
    "grant_payload",
]

ALL_WORKSPACES = "*"
# How many logs (epochs: one at init, one more at each restore) a member may open when its
# member.add names no max_logs (schema v1, or v2 without it): a rule of the mesh, the same on
# every node, so every node refuses the same logs (docs/mesh.md §Logs per writer).
DEFAULT_MAX_LOGS = 64
MEMBER_KINDS = frozenset({"member.add", "member.revoke"})


@dataclass(frozen=True, slots=True)
class Cutoff:
    """A revocation: the last (epoch, seq) of the key's log still accepted, and when (the
    revoke's ingest time, ms).  ``epoch`` None: nothing of the key is accepted."""

    epoch: bytes | None
    seq: int
    at: int

    def covers(self, epoch: bytes, seq: int) -> bool:
        return epoch == self.epoch and seq <= self.seq


@dataclass(frozen=True, slots=True)
class Member:
    """A node key's grant: workspaces (``*`` = all), certificate expiry (ms), label, when it
    was last added (ms; None for a key revoked without ever being added), its revocation."""

    key: bytes
    workspaces: tuple[str, ...]
    cert_expires: int
    label: str | None = None
    added_at: int | None = None
    revoked: Cutoff | None = None
    certificate: str | None = None  # PEM, when the grant carried one (an online renewal)
    max_logs: int = DEFAULT_MAX_LOGS
    # The workspaces as a set, None for all: what the receive path looks up.
    allowed: frozenset[str] | None = dataclasses.field(default=None, compare=False, repr=False)
    # The workspaces whose payloads it may hold (v3; ``*`` = all), and as a set, None for all.
    holds: tuple[str, ...] = (ALL_WORKSPACES,)
    held: frozenset[str] | None = dataclasses.field(default=None, compare=False, repr=False)

    @property
    def node_id(self) -> str:
        return node_id(self.key)

    def may_hold(self, workspace: str | None) -> bool:
        """Whether the node may hold the payloads placed in ``workspace`` (None: every node
        holds them — membership entries, erasures, unknown kinds)."""
        return holds_place(self.held, workspace)

    def admits(self, now: int) -> bool:
        """Whether a TLS peer with this key may connect at ``now``: unrevoked, certificate
        not expired by its newest grant."""
        return self.revoked is None and self.added_at is not None and now < self.cert_expires


@dataclass(frozen=True, slots=True)
class _Entry:
    order: tuple[int, int, bytes, int]
    log_id: int
    seq: int
    kind: str
    payload: dict[str, Any]
    wall: int


def grant_payload(
    key: bytes,
    workspaces: Sequence[str],
    cert_expires: int,
    label: str | None = None,
    certificate: str | None = None,
    max_logs: int | None = None,
    holds: Sequence[str] | None = None,
) -> dict[str, Any]:
    """A valid ``member.add`` payload, or ``MeshError`` naming what is wrong; ``max_logs``
    only when it is not the mesh's default, ``holds`` only when it is not all (``*``)."""
    payload: dict[str, Any] = {
        "node": key,
        "workspaces": list(workspaces),
        "cert_expires": cert_expires,
    }
    if label is not None:
        payload["label"] = label
    if certificate is not None:
        payload["certificate"] = certificate
    if max_logs is not None and max_logs != DEFAULT_MAX_LOGS:
        payload["max_logs"] = max_logs
    if holds is not None and ALL_WORKSPACES not in holds:
        payload["holds"] = sorted(set(holds))
    try:
        KINDS["member.add"].schema.check(payload, authoring=True)
    except PayloadError as exc:
        raise MeshError(f"{exc.field}: {exc.hint}") from exc
    return payload


def _as_set(names: tuple[str, ...]) -> frozenset[str] | None:
    return None if ALL_WORKSPACES in names else frozenset(names)


def _granted(key: bytes, entry: _Entry) -> Member:
    workspaces = tuple(entry.payload["workspaces"])
    holds = tuple(entry.payload.get("holds", (ALL_WORKSPACES,)))
    return Member(
        key,
        workspaces,
        entry.payload["cert_expires"],
        entry.payload.get("label"),
        entry.wall,
        None,
        entry.payload.get("certificate"),
        entry.payload.get("max_logs", DEFAULT_MAX_LOGS),
        _as_set(workspaces),
        holds,
        _as_set(holds),
    )


def _revoked(key: bytes, old: Member | None, entry: _Entry) -> Member:
    cut = Cutoff(entry.payload.get("last_epoch"), entry.payload["last_seq"], entry.wall)
    if old is None:
        return Member(key, (), 0, None, None, cut, allowed=frozenset(), holds=(), held=frozenset())
    return dataclasses.replace(old, revoked=cut)


class Membership(View):
    """The members of this mesh, from the authority's log; the store's ``Admission``."""

    kinds = MEMBER_KINDS
    clear: tuple[str, ...] = ()  # nothing stored: rebuilt from the log itself
    restore: tuple[str, ...] = ()
    countable: tuple[str, ...] = ()
    scrub: tuple[str, ...] = ()
    next_due: int | None = None

    def __init__(self, authority: bytes | None = None, own: bytes | None = None) -> None:
        self.authority = authority
        self.own = own  # this node's key: its grant says which payloads it holds
        self._entries: dict[tuple[int, int], _Entry] = {}
        self._members: dict[bytes, Member] = {}
        self._last: tuple[int, int, bytes, int] = (-1, 0, b"", 0)
        self._admitted: set[bytes] = set()
        self._narrowed = False

    # -- the receive path (node.store.store.Admission) -------------------------------------

    def check(self, header: Header, payload: dict[str, Any] | None) -> str | Wait | None:
        writer = header.writer
        if writer == self.authority:
            return None
        if header.kind in MEMBER_KINDS:
            return "member entries are valid only from the mesh authority's log"
        member = self._members.get(writer)
        if member is None:
            return Wait.FOR_MEMBER
        cut = member.revoked
        if cut is not None and (header.epoch != cut.epoch or header.seq > cut.seq):
            return "its writer was revoked: the entry is past the revocation's cut-off"
        allowed = member.allowed
        if allowed is not None and payload is not None:
            # A payload that is absent or of an unknown kind names no workspace this node can
            # read: it is stored, not applied, and checked when its payload or kind is known.
            workspace = workspace_of(header.kind, payload)
            if workspace is not None and workspace not in allowed:
                return f"its writer may not write into workspace {workspace!r}"
        return None

    def max_logs(self, writer: bytes) -> int | None:
        """How many logs ``writer`` may hold: None for the authority (no bound), its grant's
        ``max_logs`` for a member (a writer not admitted yet waits, and is asked again)."""
        member = self._members.get(writer)
        if writer == self.authority or member is None:
            return None
        return member.max_logs

    def may_hold(self, place: str | None) -> bool:
        """Whether this node may hold the payloads placed in ``place`` (docs/partial.md):
        as its grant's ``holds`` says; all, until it has a grant."""
        return holds_place(self.held(), place)

    def held(self) -> frozenset[str] | None:
        """The workspaces whose payloads this node holds; None for all."""
        member = self._members.get(self.own) if self.own is not None else None
        return None if member is None else member.held

    def held_by(self, key: bytes) -> frozenset[str] | None:
        """The workspaces whose payloads the node ``key`` may hold; None for all (and for a
        node without a grant)."""
        member = self._members.get(key)
        return None if member is None else member.held

    def take_admitted(self) -> set[bytes]:
        admitted, self._admitted = self._admitted, set()
        return admitted

    # -- reads ---------------------------------------------------------------------------------

    def members(self) -> list[Member]:
        """Every key the authority has added or revoked, by node id."""
        return sorted(self._members.values(), key=lambda m: m.node_id)

    def get(self, key: bytes) -> Member | None:
        return self._members.get(key)

    def find(self, name: str) -> Member:
        """The member named by its node id (``abcd-efgh-ijkl-mnop``) or its key in hex."""
        text = name.strip().lower()
        for member in self._members.values():
            if text in (member.node_id, member.node_id.replace("-", ""), member.key.hex()):
                return member
        raise UnknownMember(f"no member of this mesh is named {name!r}")

    def admits_peer(self, key: bytes, now: int) -> bool:
        """Whether ``key`` is an admitted, unrevoked node key with an unexpired grant."""
        member = self._members.get(key)
        return member is not None and member.admits(now)

    # -- the view (node.store.views.View) ------------------------------------------------------

    async def load(self, scalar: Callable[[str], Awaitable[Any]]) -> None:
        self.reset()
        self.authority = await select_authority(scalar) or self.authority
        for log_id, raw, data in await select_member_entries(scalar):
            h = decode_header(raw)
            payload = decode_payload(h.kind, data)
            self._entries[(log_id, h.seq)] = _entry(h.hlc, h.epoch, h.seq, log_id, h.kind, payload)
        self._refold(mark=False)

    async def prepare(self, txn: Txn, payloads: Sequence[tuple[str, dict[str, Any]]]) -> None:
        """Nothing to read ahead: the members are in memory."""

    @override
    async def apply(self, txn: Txn, item: AppliedEntry) -> None:
        if item.writer != self.authority or (item.log_id, item.seq) in self._entries:
            return
        entry = _entry(item.hlc, item.epoch, item.seq, item.log_id, item.kind, item.payload)
        self._entries[(item.log_id, item.seq)] = entry
        before = self.held()
        if entry.order > self._last:
            self._step(entry)
        else:  # an older authority epoch arriving late: fold again in order
            self._refold(mark=True)
        after = self.held()
        if after is not None and (before is None or not after >= before):
            self._narrowed = True

    def take_narrowed(self) -> bool:
        """Whether this node's ``holds`` narrowed since the last call: the payloads it no
        longer holds are to be withheld (``Store.withhold``, docs/partial.md)."""
        narrowed, self._narrowed = self._narrowed, False
        return narrowed

    @override
    async def erase(self, txn: Txn, sr_id: str, workspace: str) -> Erased:
        return Erased()  # nothing here is derived from SR entries

    @override
    async def hide(self, txn: Txn, hidden: HiddenEntries) -> None:
        gone = [k for k in self._entries if k[0] == hidden.log_id and k[1] >= hidden.from_seq]
        for k in gone:
            del self._entries[k]
        if gone:
            self._refold(mark=False)

    async def catch_up(self, txn: Txn, moment: int) -> None:
        """Nothing is ever due later."""

    def reset(self) -> None:
        self._entries.clear()
        self._members.clear()
        self._last = (-1, 0, b"", 0)
        self._admitted.clear()

    # -- the fold ------------------------------------------------------------------------------

    def _step(self, entry: _Entry) -> None:
        key: bytes = entry.payload["node"]
        self._last = entry.order
        old = self._members.get(key)
        if old is not None and old.revoked is not None:
            return  # a revocation is final
        if entry.kind == "member.add":
            self._members[key] = _granted(key, entry)
            if old is None:
                self._admitted.add(key)
        else:
            self._members[key] = _revoked(key, old, entry)

    def _refold(self, *, mark: bool) -> None:
        """Fold every entry again; with ``mark``, keys new to the members count as admitted."""
        before, admitted = set(self._members), self._admitted
        self._members, self._admitted = {}, set()
        self._last = (-1, 0, b"", 0)
        for entry in sorted(self._entries.values(), key=lambda e: e.order):
            self._step(entry)
        self._admitted = admitted | (set(self._members) - before if mark else set())


def _entry(hlc: Hlc, epoch: bytes, seq: int, log_id: int, kind: str, payload: Any) -> _Entry:
    # The writer is always the authority: the fold's total order reduces to these four.
    return _Entry((hlc.wall, hlc.counter, epoch, seq), log_id, seq, kind, payload, hlc.wall)
