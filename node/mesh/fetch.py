"""Partial replication on one connection (docs/partial.md): how each entry goes to the peer —
whole, or its header and its workspace tag where the peer's grant does not hold the
workspace — and the payloads this node lacks, asked of the peer by id, and the peer's asks
answered.

``Fetch`` is the connection's state for both: the link (node/mesh/link.py) and the simulated
mesh (tests/sim) drive it the same way — ``wire`` for each entry sent, ``want`` when both
sides are live and nothing is asked, ``answer`` when the session owes the peer one,
``received`` when an answer comes, and ``refill`` when another connection filled payloads in
(``take_refills`` then gives the entries to push on).
"""

from __future__ import annotations

from collections.abc import Collection, Sequence

from node.replica import Replica
from node.store import Received
from node.store.reader import SpanEntry
from protocol.batch import WireEntry
from protocol.kinds import holds_place
from protocol.payloads import MAX_WANT, PARTIAL, Payloads, Want, payloads_room

__all__ = ["MAX_REFILLS", "PAYLOAD_RETRY", "Fetch", "Filled"]

# Seconds before the entries a peer could not give are asked of it again (docs/operations.md).
PAYLOAD_RETRY = 30.0
# Payloads filled in here that wait to be passed on to one peer; beyond, the peer fetches.
MAX_REFILLS = 4096

Filled = tuple[int, int, str | None]
"""An entry whose payload was filled in: the store's log id, its seq, its place."""


class Fetch:
    """One connection's partial replication: what the peer is sent, asked and answered."""

    def __init__(
        self, replica: Replica, peer: bytes, features: Collection[str], *, retry: float
    ) -> None:
        self.replica = replica
        self.peer = peer
        self.tags = PARTIAL in features  # the peer takes tags, and wants
        self.retry = retry
        self._cursor = 0  # the position the pass through the missing entries has reached
        self._next_pass = float("-inf")
        self._due = True  # a new pass starts as soon as the last one ends
        self._asked: dict[bytes, bytes] = {}  # id -> raw header, of the want unanswered
        self._refills: list[Filled] = []

    def refill(self, filled: Sequence[Filled]) -> None:
        """This node filled in payloads through another link: pass on those the peer may
        hold (it may lack them: headers outrun payloads), and ask it again (it may have what
        this node still lacks)."""
        self.again()
        held = self.replica.peer_held(self.peer)
        room = MAX_REFILLS - len(self._refills)
        self._refills += [f for f in filled if holds_place(held, f[2])][: max(room, 0)]

    def take_refills(self) -> list[Filled]:
        refills, self._refills = self._refills, []
        return refills

    def wire(self, row: SpanEntry) -> WireEntry:
        """``row`` as it goes to the peer: with its payload where the peer's grant holds the
        payload's place, else its header and, to a peer that takes them, its tag."""
        held = self.replica.peer_held(self.peer)
        if row.payload is not None and holds_place(held, row.workspace):
            return row.raw, row.payload
        if self.tags and row.workspace is not None:
            return row.raw, row.workspace
        return row.raw, None

    def again(self) -> None:
        """Start a new pass once this one ends: the peer may have more (a round ended, or
        this node took in payloads another peer had, which this one may have by now)."""
        self._due = True

    async def want(self, now: float) -> Want | None:
        """The next request for payloads this node lacks and the peer may hold, if any: a
        pass through the missing entries in position order, one want at a time, then none
        until ``again`` or ``retry`` seconds on."""
        if not self.tags:
            return None
        if self._cursor == 0:
            if not self._due and now < self._next_pass:
                return None
            self._due = False
        places = _both(self.replica.held(), self.replica.peer_held(self.peer))
        rows = (
            []
            if places == frozenset()
            else await self.replica.wanted(after=self._cursor, limit=MAX_WANT, places=places)
        )
        if not rows:
            self._cursor, self._next_pass = 0, now + self.retry
            return None
        self._cursor = rows[-1].pos
        self._asked = {row.id: row.raw for row in rows}
        return Want(tuple(sorted(self._asked)))

    async def answer(self, ids: Sequence[bytes]) -> Payloads:
        """The answer to the peer's want: what fits in one frame."""
        items = await self.replica.answers(ids, self.peer)
        return Payloads(tuple(items[: payloads_room(items)]))

    def received(self, answer: Payloads) -> list[Received]:
        """The payloads the peer gave, with their headers, for the store's receive path (which
        checks each against its header and the grant); the answer's codes say why not."""
        asked, self._asked = self._asked, {}
        return [(asked[i], value) for i, value in answer.items if isinstance(value, bytes)]


def _both(ours: frozenset[str] | None, theirs: frozenset[str] | None) -> frozenset[str] | None:
    if ours is None:
        return theirs
    return ours if theirs is None else ours & theirs
