"""The one transition table of a sync session (docs/protocol.md §5).

The protocol is symmetric: each side's stream of messages follows the same table, and a
session tracks two states, what *we* have said and what *they* have said.  A step is a message
sent, except ``ENTRIES_DONE`` (an ``Entries`` batch with ``done`` set) and ``DIGESTS_MATCH``,
which the session takes for both sides at once when both digests of a round are in and equal.
Conditions that look across the two directions (the digests differ, the peer's frontier is in,
credit suffices, a want is outstanding) are checked by the session; *which* steps are possible
in which state, and where they lead, is written only here.
"""

from __future__ import annotations

from collections.abc import Mapping
from enum import Enum

__all__ = ["TRANSITIONS", "State", "Step", "next_state", "state_diagram"]


class State(Enum):
    """How far one side's stream has got."""

    IDLE = "idle"  # nothing said yet
    HELLO = "hello"  # said hello
    DIGEST = "digest"  # said its frontier digest for this round
    FRONTIER = "frontier"  # said its full frontier (the digests differ)
    STREAMING = "streaming"  # sent entries batches, not the last
    LIVE = "live"  # caught its peer up this round; pushes new entries
    CLOSED = "closed"  # said bye or error
    ERROR = "error"  # the session failed; never reached through the table


class Step(Enum):
    """What moves a side from one state to the next."""

    HELLO = "hello"
    DIGEST = "frontier digest"
    FRONTIER = "frontier"
    FRONTIER_PART = "frontier (more)"  # a frontier part with another to follow
    ENTRIES = "entries"
    ENTRIES_DONE = "entries (done)"
    DIGESTS_MATCH = "digests match"
    PUSH = "push"
    CREDIT = "credit"
    FORK_PROOF = "fork proof"
    WANT = "want"
    PAYLOADS = "payloads"
    ERROR = "error"
    BYE = "bye"


_OPEN = (State.HELLO, State.DIGEST, State.FRONTIER, State.STREAMING, State.LIVE)
_PROGRESS: dict[tuple[State, Step], State] = {
    (State.IDLE, Step.HELLO): State.HELLO,
    (State.HELLO, Step.DIGEST): State.DIGEST,
    (State.DIGEST, Step.FRONTIER_PART): State.DIGEST,
    (State.DIGEST, Step.FRONTIER): State.FRONTIER,
    (State.DIGEST, Step.DIGESTS_MATCH): State.LIVE,
    (State.FRONTIER, Step.ENTRIES): State.STREAMING,
    (State.FRONTIER, Step.ENTRIES_DONE): State.LIVE,
    (State.STREAMING, Step.ENTRIES): State.STREAMING,
    (State.STREAMING, Step.ENTRIES_DONE): State.LIVE,
    (State.LIVE, Step.PUSH): State.LIVE,
    (State.LIVE, Step.DIGEST): State.DIGEST,  # a new round
}

TRANSITIONS: Mapping[tuple[State, Step], State] = {
    **_PROGRESS,
    # Credit, fork proofs and payload requests and answers may be said at any time after
    # hello, and change nothing here: a want and its answer are paired by the session.
    **{(s, Step.CREDIT): s for s in _OPEN},
    **{(s, Step.FORK_PROOF): s for s in _OPEN},
    **{(s, Step.WANT): s for s in _OPEN},
    **{(s, Step.PAYLOADS): s for s in _OPEN},
    # Either side may close from any state short of closed, hello not excepted.
    **{(s, Step.ERROR): State.CLOSED for s in (State.IDLE, *_OPEN)},
    **{(s, Step.BYE): State.CLOSED for s in (State.IDLE, *_OPEN)},
}
"""(state, step) → next state; a pair not here is a protocol violation."""


def next_state(state: State, step: Step) -> State | None:
    """Where ``step`` leads from ``state``, or None when it is not allowed there."""
    return TRANSITIONS.get((state, step))


def state_diagram() -> str:
    """The table as a Mermaid ``stateDiagram-v2`` block (docs/protocol.md embeds it)."""
    edges: dict[tuple[State, State], list[str]] = {}
    for (source, step), target in TRANSITIONS.items():
        edges.setdefault((source, target), []).append(step.value)
    order = list(State)
    lines = ["stateDiagram-v2", f"    [*] --> {State.IDLE.name}"]
    for (source, target), steps in sorted(
        edges.items(), key=lambda edge: (order.index(edge[0][0]), order.index(edge[0][1]))
    ):
        lines.append(f"    {source.name} --> {target.name}: {', '.join(steps)}")
    lines.append(f"    {State.CLOSED.name} --> [*]")
    return "\n".join(lines) + "\n"
