"""The SR index: which SRs exist, in which workspace, owned by whom.

It is what writes check against (an update needs an SR the caller may write).  The full
field-by-field fold of DESIGN §4.2 builds on the same entries.
"""

from __future__ import annotations

from node.store.txn import Txn
from node.views import Applied

__all__ = ["SrIndex"]

_INSERT = "INSERT OR IGNORE INTO sr_index (sr_id, workspace, owner, pos) VALUES (?, ?, ?, ?)"


class SrIndex:
    kinds = frozenset({"sr.put", "sr.correct", "sr.adjust"})

    async def apply(self, txn: Txn, item: Applied) -> None:
        p = item.payload
        if item.kind == "sr.put" and p["create"]:
            txn.add(_INSERT, (p["sr_id"], p["workspace"], p["principal"], item.pos))

    async def hide(self, txn: Txn, log_id: int, from_seq: int) -> None:
        txn.add(
            "DELETE FROM sr_index WHERE pos IN "
            "(SELECT pos FROM headers WHERE log_id = ? AND seq >= ?)",
            (log_id, from_seq),
        )
