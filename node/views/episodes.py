"""The episode view: each episode's state at this node's moment (docs/tools/episodes.md).

- ``episode_entries`` holds one row per episode entry — a record, an amendment or a forget —
  with the later-known fields it sets (``task_result``, ``verdict_at``, ``status``,
  ``eligibility``, ``trust``) as JSON.
- ``episodes`` holds each recorded episode, keyed by its vault and id: the fields of its
  record, each later-known field from the newest amendment that sets it and whose time has
  come (else from the record), and ``blocked`` when a forget of it exists.  Records,
  amendments and forgets count only within their own vault (an entry written into another
  workspace cannot touch an episode), and whatever order they arrive in, the row is the same:
  it is computed from ``episode_entries`` by one statement (``_REFRESH``).
- Forget wins: a record arriving after its forget is stored blocked, and a forget takes effect
  on arrival even when its clock is ahead (hiding early is the safe direction; the answer is
  still the same on every node holding the same entries).
- An amendment from the future waits in ``episode_due`` until the clock reaches it.  A record
  from the future is stored at once; reads show an episode only once its ``ts`` has come.

Everything here is derived from the log: ``rebuild`` replays it.
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable, Sequence
from typing import Any

from typing_extensions import override

from node.store.views import AppliedEntry, Erased, HiddenEntries, View
from node.store.writer import Txn
from node.views.fold import order_key

__all__ = ["LATER", "EpisodeView", "select_manager", "select_newest_id"]

LATER = ("task_result", "verdict_at", "status", "eligibility", "trust")
_DEFAULT = {"status": "recorded", "eligibility": "eligible"}
_KIND = {"episode.record": 0, "episode.amend": 1, "episode.forget": 2}

_ENTRY = (
    "INSERT OR IGNORE INTO episode_entries (id, ord, pos, wall, kind, vault, fields) "
    "VALUES (?, ?, ?, ?, ?, ?, ?)"
)
# The first record of an id in a vault (by the fold's order) is the episode, whichever arrives
# first.
_RECORD = (
    "INSERT INTO episodes (id, ord, pos, ts, vault, session_id, caller, channel, episode_type, "
    "tool, error_code, duration_ms, result_size, summary, tags, prev_id, expires_at, status, "
    "eligibility, blocked) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, "
    "?15, ?16, ?17, '', '', 0) ON CONFLICT (vault, id) DO UPDATE SET ord = ?2, pos = ?3, ts = ?4, "
    "vault = ?5, session_id = ?6, caller = ?7, channel = ?8, episode_type = ?9, tool = ?10, "
    "error_code = ?11, duration_ms = ?12, result_size = ?13, summary = ?14, tags = ?15, "
    "prev_id = ?16, expires_at = ?17 WHERE ?2 < episodes.ord"
)


def _latest(name: str) -> str:
    """The value of a later-known field: the newest due amendment setting it, else the
    episode's record."""
    value = (
        f"(SELECT json_extract(a.fields, '$.{name}') FROM episode_entries a "  # noqa: S608
        "WHERE a.id = episodes.id AND a.vault = episodes.vault "
        "AND (a.kind = 1 AND a.wall <= ?2 OR a.kind = 0 AND a.ord = episodes.ord) "
        f"AND json_type(a.fields, '$.{name}') IS NOT NULL "
        "ORDER BY a.kind DESC, a.ord DESC LIMIT 1)"
    )
    return f"coalesce({value}, '{_DEFAULT[name]}')" if name in _DEFAULT else value


_REFRESH = (
    "UPDATE episodes SET blocked = EXISTS (SELECT 1 FROM episode_entries f "  # noqa: S608
    "WHERE f.id = episodes.id AND f.kind = 2 AND f.vault = episodes.vault), "
    + ", ".join(f"{name} = {_latest(name)}" for name in LATER)
    + " WHERE vault = ?3 AND id = ?1"
)
# Statements run grouped by their text in the order each was first queued (``Txn``): a
# record's refresh has its own text so it always runs after the record's row is written, even
# when an amendment earlier in the batch queued the plain refresh first.
_REFRESH_RECORD = _REFRESH + " /* after a record */"
_DUE = "INSERT OR IGNORE INTO episode_due (wall, vault, id) VALUES (?, ?, ?)"
_MANAGER = "SELECT vault, caller FROM episodes WHERE vault = ? AND id = ? AND blocked = 0"
_NEWEST = (
    "SELECT id FROM episodes WHERE vault = ? AND caller = ? AND blocked = 0 "
    "ORDER BY ts DESC, ord DESC LIMIT 1"
)


def _later(payload: dict[str, Any]) -> str:
    return json.dumps({k: payload[k] for k in LATER if k in payload}, separators=(",", ":"))


def _record_row(item: AppliedEntry) -> tuple[Any, ...]:
    p = item.payload
    return (
        p["id"],
        order_key(item.hlc, item.writer, item.epoch, item.seq),
        item.pos,
        item.hlc.wall,
        p["vault"],
        p.get("session_id"),
        p["caller"],
        p["channel"],
        p["episode_type"],
        p.get("tool"),
        p.get("error_code"),
        p.get("duration_ms"),
        p.get("result_size"),
        p.get("summary"),
        json.dumps(p.get("tags", []), separators=(",", ":")),
        p.get("prev_id"),
        p.get("expires_at"),
    )


class EpisodeView(View):
    """Keeps ``episodes`` from the episode entries."""

    kinds = frozenset(_KIND)
    clear: tuple[str, ...] = (
        "DELETE FROM episode_entries",
        "DELETE FROM episodes",
        "DELETE FROM episode_due",
    )
    restore: tuple[str, ...] = ()
    countable: tuple[str, ...] = ("episode_entries", "episodes", "episode_due")
    scrub: tuple[str, ...] = ()

    def __init__(self) -> None:
        self.next_due: int | None = None

    async def load(self, scalar: Callable[[str], Awaitable[Any]]) -> None:
        self.next_due = await scalar("SELECT min(wall) FROM episode_due")

    async def prepare(self, txn: Txn, payloads: Sequence[tuple[str, dict[str, Any]]]) -> None:
        pass  # every step is SQL over rows already written

    def reset(self) -> None:
        pass  # keeps nothing in memory but ``next_due``, which ``load`` restores

    async def apply(self, txn: Txn, item: AppliedEntry) -> None:
        p, kind, wall = item.payload, _KIND[item.kind], item.hlc.wall
        ord_ = order_key(item.hlc, item.writer, item.epoch, item.seq)
        txn.add(_ENTRY, (p["id"], ord_, item.pos, wall, kind, p["vault"], _later(p)))
        key = (p["id"], item.moment, p["vault"])
        if kind == 0:
            txn.add(_RECORD, _record_row(item))
            txn.add(_REFRESH_RECORD, key)
            return
        txn.add(_REFRESH, key)
        if kind == 1 and wall > key[1]:
            txn.add(_DUE, (wall, p["vault"], p["id"]))
            self.next_due = wall if self.next_due is None else min(self.next_due, wall)

    @override
    async def erase(self, txn: Txn, sr_id: str, workspace: str) -> Erased:
        return Erased()  # nothing here is derived from SR entries

    async def hide(self, txn: Txn, hidden: HiddenEntries) -> None:
        """Withdraw a forked log's records and amendments.  Its forgets stay: hiding never
        brings a forgotten episode back."""
        at = hidden.positions
        rows = await txn.fetchall(
            f"SELECT DISTINCT id, vault FROM episode_entries WHERE pos IN ({at}) AND kind < 2",  # noqa: S608
            hidden.args,
        )
        txn.add(f"DELETE FROM episodes WHERE pos IN ({at})", hidden.args)  # noqa: S608
        txn.add(f"DELETE FROM episode_entries WHERE pos IN ({at}) AND kind < 2", hidden.args)  # noqa: S608
        for episode_id, vault in rows:
            txn.add(_REFRESH, (episode_id, hidden.moment, vault))

    async def catch_up(self, txn: Txn, moment: int) -> None:
        """Apply the amendments whose time has come by ``moment``."""
        rows = await txn.fetchall(
            "SELECT DISTINCT id, vault FROM episode_due WHERE wall <= ?", (moment,)
        )
        for episode_id, vault in rows:
            txn.add(_REFRESH, (episode_id, moment, vault))
        txn.add("DELETE FROM episode_due WHERE wall <= ?", (moment,))
        row = await txn.fetchone("SELECT min(wall) FROM episode_due")
        self.next_due = row[0] if row else None


async def select_manager(txn: Txn, vault: str, episode_id: str) -> tuple[str, str] | None:
    """The vault and caller of the episode ``episode_id`` of ``vault``, unless forgotten."""
    row = await txn.fetchone(_MANAGER, (vault, episode_id))
    return None if row is None else (str(row[0]), str(row[1]))


async def select_newest_id(txn: Txn, vault: str, caller: str) -> Any:
    """The id of ``caller``'s newest episode in ``vault`` not forgotten (None: none)."""
    row = await txn.fetchone(_NEWEST, (vault, caller))
    return row[0] if row else None
