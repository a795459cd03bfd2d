"""Views: state derived from the log, written in the same transaction as each append.

Each view module handles some kinds.  ``apply`` receives each entry as it is appended;
``hide`` withdraws what a log contributed from a position on (a fork hides a log from the
fork point).  A view can be rebuilt by replaying the log, so it never holds anything the log
does not.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Protocol

from node.store.txn import Txn
from protocol.clock import Hlc

__all__ = ["Applied", "View"]


@dataclass(frozen=True, slots=True)
class Applied:
    """One entry being applied: its store position, place in its log, clock, kind and
    decoded payload (everything but its signature, which may still be being made)."""

    pos: int
    log_id: int
    writer: bytes
    epoch: bytes
    seq: int
    hlc: Hlc
    kind: str
    payload: dict[str, Any]
    fresh: bool = False  # authored here with a new id: nothing of it can exist yet


class View(Protocol):
    kinds: frozenset[str]

    async def apply(self, txn: Txn, item: Applied) -> None: ...

    async def hide(self, txn: Txn, log_id: int, from_seq: int) -> None: ...

    def reset(self) -> None:
        """Forget in-memory caches (a batch was rolled back)."""
