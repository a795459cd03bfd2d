"""The call-window view: every CallWindowRow filed in the log (docs/time-windows.md §The row).

One row per ``call.window`` entry, keyed by its store position, with its fold order (so every
node lists a call's rows in the same order: "the latest row of a call is the window it ran
with", docs/time-windows.md §Reading rows), the workspace and principal it belongs to (the
read rule: the principal and the workspace's admins) and the row as JSON, spelled with the
CallWindowRow's field names.  ``select_call_windows`` lists them for the ``call_windows`` tool.
Everything here is derived from the log: ``rebuild`` replays it.
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable, Sequence
from typing import Any

from typing_extensions import override

from node.access.callers import Caller
from node.store import Reader
from node.store.views import AppliedEntry, Erased, HiddenEntries, View
from node.store.writer import Txn
from node.views.fold import order_key

__all__ = ["CallWindowView", "select_call_windows"]

_INSERT = (
    "INSERT OR IGNORE INTO call_windows (pos, ord, wall, workspace, principal, tool, turn, "
    "call_id, row) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)"
)

_HIDE = f"DELETE FROM call_windows WHERE pos IN ({HiddenEntries.positions})"  # noqa: S608


class CallWindowView(View):
    """Keeps ``call_windows`` from the ``call.window`` entries."""

    kinds = frozenset({"call.window"})
    clear: tuple[str, ...] = ("DELETE FROM call_windows",)
    restore: tuple[str, ...] = ()
    countable: tuple[str, ...] = ("call_windows",)
    scrub: tuple[str, ...] = ()
    next_due: int | None = None  # rows are listed once their time has come, by the reader

    async def load(self, scalar: Callable[[str], Awaitable[Any]]) -> None:
        pass

    async def prepare(self, txn: Txn, payloads: Sequence[tuple[str, dict[str, Any]]]) -> None:
        pass

    def reset(self) -> None:
        pass

    async def apply(self, txn: Txn, item: AppliedEntry) -> None:
        p = item.payload
        row = p["row"]
        text = json.dumps(row, separators=(",", ":"), ensure_ascii=False)
        ord_ = order_key(item.hlc, item.writer, item.epoch, item.seq)
        txn.add(
            _INSERT,
            (
                item.pos,
                ord_,
                item.hlc.wall,
                p["workspace"],
                p["principal"],
                row["toolName"],
                row["turn"],
                row["toolCallId"],
                text,
            ),
        )

    async def hide(self, txn: Txn, hidden: HiddenEntries) -> None:
        txn.add(_HIDE, hidden.args)

    @override
    async def erase(self, txn: Txn, sr_id: str, workspace: str) -> Erased:
        return Erased()  # nothing here is derived from SR entries

    async def catch_up(self, txn: Txn, moment: int) -> None:
        pass


def _filters(
    caller: Caller, moment: int, narrowed: tuple[tuple[str, Any], ...]
) -> tuple[str, list[Any]]:
    """Rows readable by the caller (its own; every principal's with admin:workspace) whose
    time has come, narrowed by (column, value) pairs (None: not narrowed)."""
    where, params = ["workspace = ?", "wall <= ?"], [caller.workspace, moment]
    if not caller.is_admin:
        where.append("principal = ?")
        params.append(caller.principal)
    for column, value in narrowed:
        if value is not None:
            where.append(f"{column} = ?")
            params.append(value)
    return " AND ".join(where), params


def _latest_only(where: str) -> str:
    return (
        f"{where} AND NOT EXISTS (SELECT 1 FROM call_windows later "  # noqa: S608
        "WHERE later.workspace = c.workspace AND later.principal = c.principal "
        "AND later.call_id = c.call_id AND later.turn = c.turn AND later.ord > c.ord)"
    )


async def select_call_windows(
    reader: Reader,
    caller: Caller,
    moment: int,
    *,
    tool: Any = None,
    turn: Any = None,
    call_id: Any = None,
    latest: bool = False,
    limit: int,
    offset: int,
) -> list[str]:
    """The rows (JSON text) the caller may read whose time has come by ``moment``, in fold
    order; ``latest``: only each call's latest row."""
    where, params = _filters(caller, moment, (("tool", tool), ("turn", turn), ("call_id", call_id)))
    if latest:
        where = _latest_only(where)
    rows = await reader.fetchall(
        f"SELECT row FROM call_windows c WHERE {where} ORDER BY ord LIMIT ? OFFSET ?",  # noqa: S608
        (*params, limit, offset),
    )
    return [r[0] for r in rows]
