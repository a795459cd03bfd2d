"""How many logs one writer may hold (docs/mesh.md §Logs per writer).

A writer opens a log (an epoch) at init and at each restore, so an honest one holds a few.  Its
``member.add`` bounds how many (``max_logs``, 64 by default), and every node applies the bound
alike, so that every node ends holding the same logs whatever order they arrived in:

- a writer's logs are ranked by their first entry's clock (wall, counter), then epoch — what
  the writer signed, the same on every node;
- a node holds at most ``max_logs`` of them: the first-ranked it has seen.  The first entry of
  a log ranked after all those it holds, once it holds ``max_logs``, is rejected;
- one ranked before the last it holds takes that one's place: the last is dropped — hidden
  whole (``node.store.heads.DROPPED``), left out of the frontier, and refused any further
  entry — so a node that saw a later log first ends, once it has seen the earlier ones, where
  every other node does.

A dropped log's rows stay, as a fork's do: the log is append-only, and what a hidden log held
changes no answer.
"""

from __future__ import annotations

from dataclasses import dataclass

from node.store.heads import LogHead, LogTable
from node.store.writer import Txn
from protocol.entry import Header

__all__ = ["TooManyLogs", "make_room"]

_HELD = (
    "SELECT l.epoch, h.hlc_wall, h.hlc_counter FROM logs l "
    "JOIN headers h ON h.log_id = l.log_id AND h.seq = 1 "
    "WHERE l.writer = ? AND coalesce(l.forked_at, 1) <> 0"
)


@dataclass(frozen=True, slots=True)
class TooManyLogs:
    """The writer holds ``most`` logs ranked before the new one: it is rejected."""

    most: int

    @property
    def reason(self) -> str:
        return (
            f"its writer already holds {self.most} logs, the most its member.add allows, "
            "all opened before this one"
        )


async def make_room(
    txn: Txn, logs: LogTable, first: Header, most: int
) -> TooManyLogs | LogHead | None:
    """Whether ``first`` (seq 1 of a log its writer does not hold yet) may open it: None when
    the writer holds fewer than ``most`` logs, ``TooManyLogs`` when it holds ``most`` ranked before,
    else the head of the held log it displaces (the caller drops it)."""
    if logs.writer_logs[first.writer] < most:
        logs.writer_logs[first.writer] += 1
        return None
    held = await txn.fetchall(_HELD, (first.writer,))
    ranked = sorted((int(wall), int(counter), bytes(epoch)) for epoch, wall, counter in held)
    if len(ranked) < most:  # the count ran ahead of the rows (it is a cache): trust the rows
        return None
    if (first.hlc.wall, first.hlc.counter, first.epoch) > ranked[most - 1]:
        return TooManyLogs(most)
    return logs.heads[(first.writer, ranked[-1][2])]  # dropped; ``first`` takes its place
