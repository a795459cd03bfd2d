"""The episode index: each episode's vault and caller, and whether it is forgotten.

``episode.forget`` wins over any later arrival of the episode (DESIGN §2): the id is kept in
``forgotten`` so an ``episode.record`` that arrives afterwards is indexed as forgotten.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from typing import Any

from node.store.txn import Txn
from node.store.views import Applied

__all__ = ["EpisodeIndex"]

_RECORD = (
    "INSERT OR IGNORE INTO episode_index "
    "(id, vault, caller, pos, hlc_wall, hlc_counter, forgotten) "
    "VALUES (?, ?, ?, ?, ?, ?, EXISTS (SELECT 1 FROM forgotten WHERE id = ?))"
)
_FORGET = "INSERT OR IGNORE INTO forgotten (id) VALUES (?)"
_MARK = "UPDATE episode_index SET forgotten = 1 WHERE id = ?"


class EpisodeIndex:
    kinds = frozenset({"episode.record", "episode.amend", "episode.forget"})
    clear: tuple[str, ...] = ("DELETE FROM episode_index", "DELETE FROM forgotten")
    next_due: int | None = None  # episodes take effect on arrival

    def bind(self, moment: Callable[[], int]) -> None:
        pass

    async def load(self, scalar: Callable[[str], Awaitable[Any]]) -> None:
        pass

    async def prepare(self, txn: Txn, payloads: Sequence[tuple[str, dict[str, Any]]]) -> None:
        pass

    async def catch_up(self, txn: Txn, moment: int) -> None:
        pass

    async def apply(self, txn: Txn, item: Applied) -> None:
        p = item.payload
        if item.kind == "episode.record":
            hlc = item.hlc
            row = (p["id"], p["vault"], p["caller"], item.pos, hlc.wall, hlc.counter, p["id"])
            txn.add(_RECORD, row)
        elif item.kind == "episode.forget":
            txn.add(_FORGET, (p["id"],))
            txn.add(_MARK, (p["id"],))

    def reset(self) -> None:
        pass  # keeps nothing in memory

    async def hide(self, txn: Txn, log_id: int, from_seq: int) -> None:
        txn.add(
            "DELETE FROM episode_index WHERE pos IN "
            "(SELECT pos FROM headers WHERE log_id = ? AND seq >= ?)",
            (log_id, from_seq),
        )
