"""A link's rounds (docs/protocol.md §6): the round in progress — the snapshot its digest was
taken of, when it began, its catch-up outbox — and when the next is due: a peer's new round is
answered no sooner than ``min_round_interval`` after the last began, and once both sides are
live this side opens one ``round_interval`` after it.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from node.mesh.host import LinkOptions
from node.mesh.outbox import Outbox
from node.replica import FrontierSnapshot
from protocol.session import Session

__all__ = ["Round", "Rounds"]


@dataclass(slots=True)
class Round:
    snapshot: FrontierSnapshot
    started: float
    outbox: Outbox | None = None
    finished: bool = False


class Rounds:
    """One link's rounds and their timers, on the clock it is given (the event loop's)."""

    def __init__(self, options: LinkOptions, clock: Callable[[], float]) -> None:
        self._options = options
        self._clock = clock
        self.current: Round | None = None
        self._last = float("-inf")

    def start(self, snapshot: FrontierSnapshot) -> Round:
        """A new round of ``snapshot``, begun now."""
        self.current = Round(snapshot, self._clock())
        self._last = self.current.started
        return self.current

    def next_timer(self, session: Session) -> float | None:
        """Seconds until a timer of this link is due: a round to answer or to start."""
        now = self._clock()
        if session.owes_digest:
            return max(0.0, self._last + self._options.min_round_interval - now)
        if session.caught_up:
            return max(0.0, self._last + self._options.round_interval - now)
        return None

    def may_answer(self) -> bool:
        since = self._clock() - self._last
        return self.current is None or since >= self._options.min_round_interval

    def due(self) -> bool:
        return self._clock() - self._last >= self._options.round_interval
