"""The SR view: every SR's version history and its current state
(docs/tools/e_timeline.md §Views at a moment).

- ``sr_versions`` holds, for each SR entry, the SR's full state after folding every entry of
  that SR up to it in the fold's total order.  An entry that arrives late with an older clock
  lands in the middle: the versions after it are folded again.
- ``srs`` holds each existing SR's state at this node's moment — the newest version whose
  ingest time has come (``wall ≤`` this node's clock) — with its local deletion flag, and the
  search and link tables follow it (``sr_fts``, ``sr_tags``, ``sr_links``).  A version from
  the future waits in ``sr_due`` until the clock reaches it.
- ``deletions`` holds this node's local deletes and undeletes (``mark_deleted``), never in
  the log; ``srs.deleted`` is an SR's newest.
- ``store_items`` follows ``srs`` for the SRs that are LangGraph store items, and a deleted
  item (a tombstone version) is withdrawn like an SR not yet created (node/views/items.py).

Everything here is derived from the log (plus local deletions): ``rebuild`` replays it.
"""

from __future__ import annotations

import json
import re
import sqlite3
import unicodedata
from collections import OrderedDict
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

from node.identity import node_id
from node.store.views import (
    ENTRY_COLUMNS,
    AppliedEntry,
    Erased,
    HiddenEntries,
    entries_at,
    entry_id_at,
)
from node.store.writer import Fetch, Txn
from node.views.fold import SrState, digests, fold_all, fold_entry, order_key
from node.views.items import CLEAR as ITEMS_CLEAR
from node.views.items import is_tombstone, show_item
from node.views.search_index import CLEAR as INDEX_CLEAR
from node.views.search_index import TextIndex
from node.views.shown import shown_blob
from node.views.tokens import token_count
from protocol.canonical import decode_canonical
from protocol.clock import Hlc
from protocol.kinds import MAX_ERASED, decode_payload

__all__ = [
    "DOC_SLOTS",
    "LAST_MS",
    "LiveSr",
    "SrView",
    "entry_ids",
    "mark_deleted",
    "select_live",
    "state_blob",
    "terms",
    "token_count",
]

# Tokens as FTS5's unicode61 tokenizer cuts them: runs of letters and digits.
_TOKEN = re.compile(r"[^\W_]+")


def terms(text: str) -> list[str]:
    """Search terms of ``text`` as the index holds them: lower case, Latin diacritics off."""
    folded = unicodedata.normalize("NFKD", text.lower())
    return _TOKEN.findall("".join(c for c in folded if not unicodedata.combining(c)))


_VERSION = (
    "INSERT OR REPLACE INTO sr_versions (sr_id, ord, pos, wall, state, present, workspace, "
    "owner, private, full_digest, public_digest, links_digest) "
    "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)"
)
# The search index is written one row a statement, ``VALUES`` only: FTS5 flushes what it holds
# in memory at every statement savepoint, which SQLite opens for an ``INSERT … SELECT`` (a
# segment an SR, measured ~4 × the cost of the row: docs/benchmarks.md §sync).  Withdrawing an
# SR's row gives FTS5 the values it indexed (the index is contentless); an SR with no shown
# row gives a NULL rowid, and FTS5 ignores a 'delete' without an integer rowid.
_FTS_OUT = (
    "INSERT INTO sr_fts (sr_fts, rowid, title, text, tags) VALUES ('delete', "
    "(SELECT doc FROM srs WHERE sr_id = ?1 AND live = 1), "
    "(SELECT title FROM srs WHERE sr_id = ?1), (SELECT text FROM srs WHERE sr_id = ?1), "
    "(SELECT tags_text FROM srs WHERE sr_id = ?1))"
)
# An SR's doc (the rowid of ``srs``, ``sr_docs`` and of its search row) is keyed by its ingest
# time: the millisecond times ``DOC_SLOTS`` plus the next free slot of that millisecond, so
# the search index lists docs in time order (``doc // DOC_SLOTS`` is the millisecond).  A new
# ingest time moves the doc.  A millisecond whose slots are all taken (never in practice)
# sends its overflow below zero, where readers that rely on the order look first.
DOC_SLOTS = 1 << 21
LAST_MS = (1 << 42) - 2  # the last millisecond a doc key holds (in the year 2109)
_BUCKET = f"(max(0, min(coalesce(?11, 0), {LAST_MS})) * {DOC_SLOTS})"
_NEW_DOC = (
    f"(SELECT CASE WHEN last IS NULL THEN {_BUCKET} "  # noqa: S608 - numbers only
    f"WHEN last + 1 < {_BUCKET} + {DOC_SLOTS} THEN last + 1 "
    "ELSE min(0, (SELECT min(doc) FROM srs)) - 1 END FROM (SELECT "
    f"(SELECT doc FROM srs WHERE doc >= {_BUCKET} AND doc < {_BUCKET} + {DOC_SLOTS} "
    "ORDER BY doc DESC LIMIT 1) AS last))"
)
_CURRENT = (
    "INSERT INTO srs (doc, sr_id, live, workspace, owner, private, lane, conversational, "  # noqa: S608
    "title, text, tags_text, ingest_time, content_time, created_time, shown, doclen) "
    f"VALUES ({_NEW_DOC}, ?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, "
    "?15) ON CONFLICT (sr_id) DO UPDATE SET "
    "doc = CASE WHEN srs.ingest_time IS ?11 THEN srs.doc ELSE excluded.doc END, "
    "live = ?2, workspace = ?3, owner = ?4, private = ?5, "
    "lane = ?6, conversational = ?7, title = ?8, text = ?9, tags_text = ?10, "
    "ingest_time = ?11, content_time = ?12, created_time = ?13, shown = ?14, doclen = ?15"
)
_FTS_IN = (
    "INSERT INTO sr_fts (rowid, title, text, tags) "
    "VALUES ((SELECT doc FROM srs WHERE sr_id = ?1), ?2, ?3, ?4)"
)
_TAGS_OUT = "DELETE FROM sr_tags WHERE sr_id = ?"
_TAGS_IN = "INSERT OR IGNORE INTO sr_tags (tag, sr_id) SELECT value, ?1 FROM json_each(?2)"
_LINKS_OUT = "DELETE FROM sr_links WHERE src = ?"
_LINKS_IN = "INSERT OR IGNORE INTO sr_links (src, dst) SELECT ?1, value FROM json_each(?2)"
_HIDE = f"DELETE FROM sr_versions WHERE pos IN ({HiddenEntries.positions})"  # noqa: S608
_HIDDEN = f"SELECT DISTINCT sr_id FROM sr_versions WHERE pos IN ({HiddenEntries.positions})"  # noqa: S608
_LOGGED = (  # every version of an SR, with the entry it was folded from
    f"SELECT v.ord, v.pos, v.wall, {ENTRY_COLUMNS} FROM sr_versions v {entries_at('v.pos')} "  # noqa: S608
    "WHERE v.sr_id = ? ORDER BY v.ord"
)
_DUE = "INSERT OR IGNORE INTO sr_due (wall, sr_id) VALUES (?, ?)"
_LIVE = "SELECT workspace, owner, private, deleted FROM srs WHERE sr_id = ? AND live = 1"
_DELETION = (
    "INSERT INTO deletions (sr_id, deleted, hlc_wall, hlc_counter, principal) "
    "VALUES (?, ?, ?, ?, ?)"
)
_FLAG_DELETED = "UPDATE srs SET deleted = ? WHERE sr_id = ?"
# Replayed rows start undeleted; only SRs with local deletions need their newest flag again.
_DELETIONS_REAPPLY = (
    "UPDATE srs SET deleted = coalesce((SELECT d.deleted FROM deletions d "
    "WHERE d.sr_id = srs.sr_id ORDER BY d.hlc_wall DESC, d.hlc_counter DESC, d.pos DESC "
    "LIMIT 1), 0) WHERE sr_id IN (SELECT sr_id FROM deletions)"
)
# After the SR's current row is withdrawn (``SrView.erase``): everything else derived from it.
_ERASE = (
    "DELETE FROM srs WHERE sr_id = ?",
    "DELETE FROM sr_versions WHERE sr_id = ?",
    "DELETE FROM sr_due WHERE sr_id = ?",
    "DELETE FROM deletions WHERE sr_id = ?",
)
_ENTRY_IDS = (
    f"SELECT {entry_id_at('v.pos')} FROM sr_versions v WHERE v.sr_id = ? "  # noqa: S608
    "ORDER BY v.ord LIMIT ?"
)
_CACHE = 4096
# The node id of a writer's key: an SR entry's writer is one of a mesh's few nodes.
_writer_id = lru_cache(maxsize=256)(node_id)


def state_blob(state: SrState) -> bytes:
    return state.canonical()


def _state(blob: bytes) -> SrState:
    return SrState.from_doc(decode_canonical(bytes(blob), what="sr state"))


class SrView:
    """Folds SR entries into versions and keeps the current-state tables."""

    kinds = frozenset({"sr.put", "sr.correct", "sr.adjust"})
    clear: tuple[str, ...] = (
        "DELETE FROM sr_versions",
        "DELETE FROM srs",
        "DELETE FROM sr_stats",
        "DELETE FROM sr_tags",
        "DELETE FROM sr_links",
        "DELETE FROM sr_due",
        "INSERT INTO sr_fts (sr_fts) VALUES ('delete-all')",
        *INDEX_CLEAR,
        *ITEMS_CLEAR,
    )
    restore: tuple[str, ...] = (_DELETIONS_REAPPLY,)
    countable: tuple[str, ...] = (
        "deletions",
        "sr_versions",
        "srs",
        "sr_tags",
        "sr_links",
        "sr_due",
        "sr_fts",
        "sr_segments",
        "store_items",
    )
    # An erased SR's terms stay in the index's older segments until a merge reaches them.
    scrub: tuple[str, ...] = ("INSERT INTO sr_fts (sr_fts) VALUES ('optimize')",)

    def __init__(self) -> None:
        self._latest: OrderedDict[str, tuple[bytes, SrState] | None] = OrderedDict()
        # The earliest version still waiting for its time (None: none).  Reads check it before
        # every answer, so it is kept here (loaded with the store's other in-memory state).
        self.next_due: int | None = None
        self.index = TextIndex()

    async def load(self, scalar: Callable[[str], Awaitable[Any]]) -> None:
        self.next_due = await scalar("SELECT min(wall) FROM sr_due")

    def reset(self) -> None:
        """Forget cached states (after a rolled-back batch)."""
        self._latest.clear()
        self.index.reset()

    def settle(self, db: sqlite3.Connection) -> None:
        self.index.settle(db)

    def _note_due(self, txn: Txn, wall: int, sr_id: str) -> None:
        txn.add(_DUE, (wall, sr_id))
        self.next_due = wall if self.next_due is None else min(self.next_due, wall)

    async def apply(self, txn: Txn, item: AppliedEntry) -> None:
        sr_id = item.payload["sr_id"]
        ord_ = order_key(item.hlc, item.writer, item.epoch, item.seq)
        latest = await self._latest_of(txn, sr_id, fresh=item.fresh)
        if latest is None or (ord_ > latest[0] and (latest[1].exists or not _creates(item))):
            prev = latest[1] if latest else SrState(sr_id)
            writer = _writer_id(item.writer)
            state = fold_entry(prev, item.kind, item.hlc.wall, item.payload, writer)
            txn.add(_VERSION, _version_row(sr_id, ord_, item.pos, item.hlc.wall, state))
            self._cache(sr_id, (ord_, state))
            self._show(txn, sr_id, item, state, ord_, shown=latest is not None)
        else:
            await self._refold(txn, sr_id, item.moment, item, ord_)

    async def hide(self, txn: Txn, hidden: HiddenEntries) -> None:
        rows = await txn.fetchall(_HIDDEN, hidden.args)
        txn.add(_HIDE, hidden.args)
        for (sr_id,) in rows:
            self._latest.pop(sr_id, None)
            await self._refold(txn, sr_id, hidden.moment, None, b"")

    async def erase(self, txn: Txn, sr_id: str, workspace: str) -> Erased | None:
        """Withdraw the SR whole (node/store/erasure.py): its search, tag and link rows, its
        current row, its versions, its due times and this node's deletions of it."""
        latest = await self._latest_of(txn, sr_id, fresh=False)
        last = latest[1] if latest else None
        if last is not None and last.workspace != workspace:
            return None
        rows = await txn.fetchall("SELECT pos FROM sr_versions WHERE sr_id = ?", (sr_id,))
        self._write_current(txn, sr_id, SrState(sr_id))  # withdrawn: no search, tag, link rows
        for sql in _ERASE:
            txn.add(sql, (sr_id,))
        self._cache(sr_id, None)
        readers = None if last is None else (last.owner or "", last.visibility == "private")
        return Erased(tuple(int(pos) for (pos,) in rows), readers)

    # -- reading what is there -------------------------------------------------------------

    async def prepare(self, txn: Txn, payloads: Sequence[tuple[str, dict[str, Any]]]) -> None:
        """Load the newest version of each SR a batch is about to touch, in one read."""
        sr_ids = {p["sr_id"] for kind, p in payloads if kind in self.kinds}
        await self._load(txn.fetchall, [s for s in sr_ids if s not in self._latest])

    async def _load(self, fetch: Fetch, wanted: list[str]) -> None:
        for start in range(0, len(wanted), 500):
            chunk = wanted[start : start + 500]
            rows = await fetch(
                "SELECT sr_id, ord, state FROM sr_versions WHERE sr_id IN "  # noqa: S608
                f"({','.join('?' * len(chunk))}) ORDER BY sr_id, ord",
                chunk,
            )
            newest = {r[0]: (bytes(r[1]), r[2]) for r in rows}  # ascending: the last wins
            for sr_id in chunk:
                found = newest.get(sr_id)
                self._cache(sr_id, None if found is None else (found[0], _state(found[1])))

    async def _latest_of(
        self, txn: Txn, sr_id: str, *, fresh: bool
    ) -> tuple[bytes, SrState] | None:
        if sr_id in self._latest or fresh:
            return self._latest.get(sr_id)
        row = await txn.fetchone(
            "SELECT ord, state FROM sr_versions WHERE sr_id = ? ORDER BY ord DESC LIMIT 1",
            (sr_id,),
        )
        return None if row is None else (bytes(row[0]), _state(row[1]))

    def _cache(self, sr_id: str, value: tuple[bytes, SrState] | None) -> None:
        self._latest[sr_id] = value
        self._latest.move_to_end(sr_id)
        if len(self._latest) > _CACHE:
            self._latest.popitem(last=False)

    # -- folding again from the start ------------------------------------------------------

    async def _refold(
        self, txn: Txn, sr_id: str, moment: int, item: AppliedEntry | None, ord_: bytes
    ) -> None:
        """Fold every version of the SR again (an entry landed before others, or a create
        arrived after entries it precedes, or a log was hidden) and show the newest whose time
        has come by ``moment``."""
        rows = await txn.fetchall(_LOGGED, (sr_id,))
        entries = [
            (
                bytes(o),
                pos,
                wall,
                kind,
                decode_payload(kind, bytes(data)),
                _writer_id(bytes(writer)),
            )
            for o, pos, wall, kind, data, writer in rows
        ]
        if item is not None:
            entries.append(
                (ord_, item.pos, item.hlc.wall, item.kind, item.payload, _writer_id(item.writer))
            )
            entries.sort(key=lambda e: e[0])
        states = fold_all(sr_id, [(k, w, p, n) for _, _, w, k, p, n in entries])
        for (o, pos, wall, _, _, _), state in zip(entries, states, strict=True):
            txn.add(_VERSION, _version_row(sr_id, o, pos, wall, state))
        await self._show_latest(txn, sr_id, moment, entries, states)

    async def _show_latest(
        self, txn: Txn, sr_id: str, moment: int, entries: list[Any], states: list[SrState]
    ) -> None:
        due = [(e[0], s) for e, s in zip(entries, states, strict=True) if e[2] <= moment]
        for e in entries:
            if e[2] > moment:
                self._note_due(txn, e[2], sr_id)
        if entries:
            self._cache(sr_id, (entries[-1][0], states[-1]))
        ord_, state = due[-1] if due else (b"", SrState(sr_id))
        self._write_current(txn, sr_id, state, ord_=ord_)

    def _show(
        self,
        txn: Txn,
        sr_id: str,
        item: AppliedEntry,
        state: SrState,
        ord_: bytes,
        *,
        shown: bool,
    ) -> None:
        """Make ``state`` (``item``'s, of fold order ``ord_``) current, or queue it until its
        time comes."""
        wall = item.hlc.wall
        if wall > item.moment:
            self._note_due(txn, wall, sr_id)
        else:
            self._write_current(txn, sr_id, state, shown=shown, ord_=ord_)

    def _write_current(
        self, txn: Txn, sr_id: str, state: SrState, *, shown: bool = True, ord_: bytes = b""
    ) -> None:
        """Queue ``state`` (its version's fold order ``ord_``) as the SR's current row, keyed
        by the SR, whether it is shown or withdrawn (a withdrawn SR — not created, erased, a
        deleted store item — has no search, tag or link rows): within one write only the last
        state counts.  ``shown`` False: the SR had no version before this write, so it has no
        rows to take out (nor does a later write of it in the same batch find any: statements
        run in the order first queued, each with all its rows)."""
        live = state.exists and not is_tombstone(state)
        tags = list(state.tags) if live else []
        tags_text = " ".join(tags)
        if shown:
            txn.put(_FTS_OUT, sr_id, (sr_id,))
            txn.put(_TAGS_OUT, sr_id, (sr_id,))
            txn.put(_LINKS_OUT, sr_id, (sr_id,))
        else:  # each still runs before the statement that puts back
            txn.reserve(_FTS_OUT, _TAGS_OUT, _LINKS_OUT)
        txn.put(
            _CURRENT,
            sr_id,
            (
                sr_id,
                int(live),
                state.workspace or "",
                state.owner or "",
                int(state.visibility == "private"),
                state.lane,
                int(state.conversational),
                state.title,
                state.text,
                tags_text,
                state.ingest_time,
                state.content_time if state.content_time is not None else state.created_time,
                state.created_time,
                shown_blob(state) if live else b"",
                token_count(state.title) + token_count(state.text) + len(tags),
            ),
        )
        txn.put(_FTS_IN, sr_id, (sr_id, state.title, state.text, tags_text) if live else None)
        txn.put(_TAGS_IN, sr_id, (sr_id, json.dumps(tags)) if tags else None)
        links = list(state.links) if live else []
        txn.put(_LINKS_IN, sr_id, (sr_id, json.dumps(links)) if links else None)
        show_item(txn, sr_id, state, ord_)

    async def catch_up(self, txn: Txn, moment: int) -> None:
        """Make current every version whose time has come by ``moment``."""
        rows = await txn.fetchall("SELECT DISTINCT sr_id FROM sr_due WHERE wall <= ?", (moment,))
        for (sr_id,) in rows:
            row = await txn.fetchone(
                "SELECT ord, state FROM sr_versions WHERE sr_id = ? AND wall <= ? "
                "ORDER BY ord DESC LIMIT 1",
                (sr_id, moment),
            )
            if row is not None:
                self._write_current(txn, sr_id, _state(row[1]), ord_=bytes(row[0]))
        txn.add("DELETE FROM sr_due WHERE wall <= ?", (moment,))
        row = await txn.fetchone("SELECT min(wall) FROM sr_due")
        self.next_due = row[0] if row else None


def _version_row(sr_id: str, ord_: bytes, pos: int, wall: int, state: SrState) -> tuple[Any, ...]:
    full, public, links = digests(state)
    return (
        sr_id,
        ord_,
        pos,
        wall,
        state_blob(state),
        int(state.exists and not is_tombstone(state)),
        state.workspace or "",
        state.owner or "",
        int(state.visibility == "private"),
        full,
        public,
        links,
    )


def _creates(item: AppliedEntry) -> bool:
    return item.kind == "sr.put" and bool(item.payload.get("create"))


@dataclass(frozen=True, slots=True)
class LiveSr:
    """An SR shown at this moment, as the read rule and the write tools see it."""

    workspace: str
    owner: str
    private: bool
    deleted: bool  # deleted on this node


async def select_live(txn: Txn, sr_id: str) -> LiveSr | None:
    """The SR ``sr_id`` as shown at this moment (deleted here or not), or None."""
    row = await txn.fetchone(_LIVE, (sr_id,))
    if row is None:
        return None
    return LiveSr(str(row[0]), str(row[1]), bool(row[2]), bool(row[3]))


def mark_deleted(txn: Txn, sr_id: str, deleted: bool, hlc: Hlc, principal: str) -> None:
    """Delete (or undelete) an SR on this node only: a local row stamped with this node's
    clock, and the flag of its current row (docs/authority.md, e_delete / e_undelete)."""
    txn.add(_DELETION, (sr_id, int(deleted), hlc.wall, hlc.counter, principal))
    txn.add(_FLAG_DELETED, (int(deleted), sr_id))


async def entry_ids(txn: Txn, sr_id: str) -> list[str]:
    """The ids (hex) of the SR's entries this node holds, oldest first, at most ``MAX_ERASED``:
    what an ``sr.erase`` names (one authored in the same batch is not sealed yet: left out)."""
    rows = await txn.fetchall(_ENTRY_IDS, (sr_id, MAX_ERASED))
    return [bytes(entry_id).hex() for (entry_id,) in rows if entry_id is not None]
