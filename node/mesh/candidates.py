"""Which discovered nodes are dialled (docs/operations.md §Discovery).

A sighting is only a claim: anyone on the network can advertise this mesh's id.  So the
discovered nodes of this mesh take turns at a bounded number of places:

- at most ``max_peers`` are dialled at once; the others wait, at most ``max_waiting`` of them,
  in the order they were seen;
- a dialled node that has not been linked (its hello verified over mutual TLS) for
  ``evict_after`` seconds — since it was dialled, or since its link ended — gives its place to
  a waiting one, and waits again behind every node tried fewer times (a *strike*); a node
  linked again loses its strikes;
- a new sighting when ``max_waiting`` wait takes the place of the waiting node with the most
  strikes, if it has any; otherwise it is ignored.  A node seen again (perhaps at a new
  address) keeps its place, dialled or waiting.

So advertisements that point at closed ports or at listeners that never finish TLS cannot
hold every place for good: each is evicted after ``evict_after`` and tried again only after
every node tried less, while a real node, once linked, keeps its place.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass

from node.logging import get_logger
from node.mesh.discovery import Sighting
from node.mesh.peers import Peer
from node.refusals import REFUSALS

__all__ = ["Candidates", "Dialled"]

_log = get_logger("node.mesh.candidates")


@dataclass(slots=True)
class _Waiting:
    seen: Sighting
    strikes: int


@dataclass(slots=True)
class Dialled:
    """A discovered node being dialled: its sighting, its peer record, since when it has
    been without a link, and how often it was evicted since its last link."""

    seen: Sighting
    peer: Peer
    since: float
    strikes: int

    @property
    def address(self) -> str:
        return _address(self.seen)


def _address(seen: Sighting) -> str:
    return f"{seen.host}:{seen.port}"


class Candidates:
    """The discovered nodes of this mesh, dialled or waiting for a place."""

    def __init__(
        self,
        *,
        max_peers: int,
        max_waiting: int,
        evict_after: float,
        dial: Callable[[Sighting], Peer],
        hang_up: Callable[[Peer], None],
        linked: Callable[[Peer], bool],
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.max_peers, self.max_waiting, self.evict_after = max_peers, max_waiting, evict_after
        self._dial, self._hang_up, self._linked, self._clock = dial, hang_up, linked, clock
        self.dialled: dict[str, Dialled] = {}
        self.waiting: dict[str, _Waiting] = {}  # in the order each joined the queue

    def sighted(self, seen: Sighting) -> None:
        """A node of this mesh resolved (again, or at a new address)."""
        known = self.dialled.get(seen.name)
        if known is not None:
            if known.address != _address(seen):  # it moved: dial the new address instead
                self._hang_up(known.peer)
                known.seen, known.peer = seen, self._dial(seen)
            return
        waited = self.waiting.get(seen.name)
        if waited is not None:  # seen again, perhaps at a new address: it keeps its place
            waited.seen = seen
            return
        self._queue(seen, 0)
        self._fill()

    def vanished(self, name: str) -> None:
        """A discovered service went: it is dialled no more, nor waits."""
        self.waiting.pop(name, None)
        if name in self.dialled:
            self._drop(name)
            self._fill()

    def rotate(self) -> int:
        """Evict the dialled nodes unlinked for ``evict_after`` while others wait (as many as
        wait, those unlinked longest first); return how many went."""
        now = self._clock()
        for dialled in self.dialled.values():
            if self._linked(dialled.peer):
                dialled.since, dialled.strikes = now, 0
        stale = sorted(
            (d for d in self.dialled.values() if now - d.since >= self.evict_after),
            key=lambda d: d.since,
        )[: len(self.waiting)]
        for dialled in stale:
            self._drop(dialled.seen.name)
            REFUSALS.count("discovery_evicted")
            _log.info(
                "evicting a discovered node that did not link",
                name=dialled.seen.name,
                address=dialled.address,
                strikes=dialled.strikes + 1,
            )
        self._fill()
        for dialled in stale:  # behind the nodes that took their places
            self._queue(dialled.seen, dialled.strikes + 1)
        return len(stale)

    def _drop(self, name: str) -> None:
        self._hang_up(self.dialled.pop(name).peer)

    def _queue(self, seen: Sighting, strikes: int) -> None:
        if len(self.waiting) >= self.max_waiting:
            worst = max(self.waiting.values(), key=lambda w: w.strikes)  # the oldest of them
            if worst.strikes <= strikes:
                _log.warning(
                    "discovered nodes at their limit",
                    limit=self.max_waiting,
                    ignored=_address(seen),
                )
                return
            del self.waiting[worst.seen.name]
        self.waiting[seen.name] = _Waiting(seen, strikes)

    def _fill(self) -> None:
        while len(self.dialled) < self.max_peers and self.waiting:
            best = min(self.waiting.values(), key=lambda w: w.strikes)  # the oldest of them
            del self.waiting[best.seen.name]
            _log.info(
                "dialling a discovered node", name=best.seen.name, address=_address(best.seen)
            )
            peer = self._dial(best.seen)
            self.dialled[best.seen.name] = Dialled(best.seen, peer, self._clock(), best.strikes)
