"""What the store asks of a view (docs/architecture.md: views read the store; the store only
calls them).

A view is state derived from the log, written in the same transaction as each append:
``apply`` receives each entry as it is appended, ``hide`` withdraws what a log contributed
from a position on (a fork), ``clear`` lists the statements that empty it so the log can be
replayed into it, and ``restore`` those that put back, after the replay, what it keeps that
the log does not (the SR view's local deletions); ``countable`` names its tables whose rows
``Reader.count`` may count, and ``erase`` withdraws what an erased SR left in it.  A view
that holds versions not yet due (an entry from the future takes effect when its time comes:
docs/tools/e_timeline.md §Views at a moment) keeps ``next_due`` and makes them current in
``catch_up``.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar, Protocol

from node.store.writer import Txn
from protocol.clock import Hlc

__all__ = [
    "ENTRY_COLUMNS",
    "AppliedEntry",
    "Erased",
    "HiddenEntries",
    "View",
    "entries_at",
    "entry_id_at",
]


@dataclass(frozen=True, slots=True)
class AppliedEntry:
    """One entry being applied: its store position, place in its log, clock, kind and
    decoded payload (everything but its signature, which may still be being made), and this
    node's moment as it is applied: a version whose time has not come by then is kept until
    it has (``View.catch_up``)."""

    pos: int
    log_id: int
    writer: bytes
    epoch: bytes
    seq: int
    hlc: Hlc
    kind: str
    payload: dict[str, Any]
    moment: int
    fresh: bool = False  # authored here with a new id: nothing of it can exist yet


@dataclass(frozen=True, slots=True)
class HiddenEntries:
    """What ``hide`` withdraws: a log's entries from ``from_seq`` on (a fork), at this node's
    ``moment``.  ``positions`` lists their store positions, for a view's ``pos IN (…)`` (its
    ``args`` fill it)."""

    log_id: int
    from_seq: int
    moment: int
    positions: ClassVar[str] = "SELECT pos FROM headers WHERE log_id = ? AND seq >= ?"

    @property
    def args(self) -> tuple[int, int]:
        return (self.log_id, self.from_seq)


@dataclass(frozen=True, slots=True)
class Erased:
    """What a view withdrew of an erased SR: the store positions of the entries its rows came
    from, and who could read the SR by its last state (owner, private) if the view knew it."""

    positions: tuple[int, ...] = ()
    readers: tuple[str, bool] | None = None


# The entry logged at a view's row, for a view that folds its rows again from the log: joined
# on the row's position column (``entries_at``), ``ENTRY_COLUMNS`` are its kind, its payload's
# bytes and its writer's key.
ENTRY_COLUMNS = "h.kind, p.data, l.writer"


def entry_id_at(pos: str) -> str:
    """The id of the entry at the position column ``pos``, as a scalar subquery."""
    return f"(SELECT h.id FROM headers h WHERE h.pos = {pos})"  # noqa: S608 - a column name


def entries_at(pos: str) -> str:
    """The joins that bring ``ENTRY_COLUMNS`` to the rows whose position column is ``pos``."""
    return (
        f"JOIN headers h ON h.pos = {pos} JOIN payloads p ON p.pos = {pos} "
        "JOIN logs l ON l.log_id = h.log_id"
    )


class View(Protocol):
    kinds: frozenset[str]
    clear: tuple[str, ...]
    restore: tuple[str, ...]
    countable: tuple[str, ...]
    scrub: tuple[str, ...]  # merging away what erased rows left (node/store/erasure.py)
    next_due: int | None

    async def load(self, scalar: Callable[[str], Awaitable[Any]]) -> None:
        """Load in-memory state at open and after a rolled-back batch."""

    async def prepare(self, txn: Txn, payloads: Sequence[tuple[str, dict[str, Any]]]) -> None:
        """Before a received batch is applied: read ahead what its (kind, payload)s touch."""

    async def apply(self, txn: Txn, item: AppliedEntry) -> None: ...

    async def hide(self, txn: Txn, hidden: HiddenEntries) -> None: ...

    async def erase(self, txn: Txn, sr_id: str, workspace: str) -> Erased | None:
        """Withdraw every row derived from the SR ``sr_id`` of ``workspace``
        (node/store/erasure.py) and say what they came from; None, withdrawing nothing, when
        this view holds that SR in another workspace."""

    async def catch_up(self, txn: Txn, moment: int) -> None:
        """Make current what has come due by ``moment``."""

    def settle(self, db: sqlite3.Connection) -> None:
        """On the writer connection's thread, once the transaction's rows are written (at its
        commit, and at each flush of a long one): bring what is derived from them up to date
        (the text index of node/views/search_index.py).  Most views derive nothing more."""
        del db

    def reset(self) -> None:
        """Forget in-memory caches (a batch was rolled back, or the view is rebuilt)."""
