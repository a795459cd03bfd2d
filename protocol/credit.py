"""Credit as a session keeps it (docs/protocol.md §7): the ``Balance`` one side may still
spend, what a batch spends of it and what a grant adds, within ``MAX_CREDIT``.
"""

from __future__ import annotations

from dataclasses import dataclass

from protocol.batch import WireEntry, entry_cost
from protocol.errors import ProtocolError
from protocol.messages import MAX_CREDIT

__all__ = ["Balance", "grant", "spend"]


@dataclass(frozen=True, slots=True)
class Balance:
    """Credit not yet spent: entries and bytes."""

    entries: int = 0
    nbytes: int = 0

    def covers(self, entries: int, nbytes: int) -> bool:
        return entries <= self.entries and nbytes <= self.nbytes


def spend(credit: Balance, items: tuple[WireEntry, ...], error: type[ProtocolError]) -> Balance:
    entries, nbytes = len(items), sum(map(entry_cost, items))
    if not credit.covers(entries, nbytes):
        raise error(
            f"{entries} entries of {nbytes} bytes exceed the credit of {credit.entries} "
            f"entries and {credit.nbytes} bytes",
            field="credit",
        )
    return Balance(credit.entries - entries, credit.nbytes - nbytes)


def grant(credit: Balance, entries: int, nbytes: int, error: type[ProtocolError]) -> Balance:
    total = Balance(credit.entries + entries, credit.nbytes + nbytes)
    if total.entries > MAX_CREDIT or total.nbytes > MAX_CREDIT:
        raise error(f"outstanding credit may not exceed {MAX_CREDIT}", field="credit")
    return total
