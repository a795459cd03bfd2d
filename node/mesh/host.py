"""What every sync connection of a node works with: ``LinkOptions``, its limits and timers,
and ``LinkHost``, what the links share — the store, its change signal, the peer table.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from node.mesh.fetch import PAYLOAD_RETRY, Fetch, Filled
from node.mesh.outbox import LARGEST_ENTRY
from node.mesh.peers import PeerTable
from node.replica import Commits, Replica
from protocol.batch import MAX_BATCH_ENTRIES
from protocol.frontier import MAX_FRONTIER_LOGS

__all__ = ["LinkHost", "LinkOptions"]


@dataclass(frozen=True, slots=True)
class LinkOptions:
    """Per-connection limits and timers (seconds); tests shorten them."""

    credit_entries: int = 1024  # credit granted: entries in flight towards this node
    credit_bytes: int = 8 << 20  # … and bytes (at least one largest entry, §7)
    # Entries sent in one batch: half the credit, so the peer's credit holds two — the next
    # batch travels while the peer stores one, and a cut loses no more than the credit.
    batch_entries: int = 512
    read_chunk: int = 64 << 10
    hello_timeout: float = 10.0
    write_timeout: float = 30.0
    close_timeout: float = 5.0
    round_interval: float = 300.0  # start a new round this long after the last one began
    min_round_interval: float = 1.0  # answer a peer's new round no sooner than this
    max_fork_proofs: int = 256  # fork proofs one connection may bring
    # Seconds before payloads a peer could not give are asked of it again (docs/partial.md).
    payload_retry: float = PAYLOAD_RETRY
    # Tips in one frontier message: the protocol's most; tests send fewer to see parts travel.
    frontier_part: int = MAX_FRONTIER_LOGS

    def __post_init__(self) -> None:
        if not 0 < self.frontier_part <= MAX_FRONTIER_LOGS:
            raise ValueError(f"frontier_part must be in [1, {MAX_FRONTIER_LOGS}]")
        if not 0 < self.credit_entries <= MAX_BATCH_ENTRIES * 64:
            raise ValueError("credit_entries must be positive")
        if not 0 < self.batch_entries <= MAX_BATCH_ENTRIES:
            raise ValueError(f"batch_entries must be in [1, {MAX_BATCH_ENTRIES}]")
        if self.credit_bytes < LARGEST_ENTRY:
            raise ValueError(f"credit_bytes must be at least {LARGEST_ENTRY} (one entry)")


@dataclass(slots=True)
class LinkHost:
    """What every link of a node shares: the store, its change signal, the peer table."""

    replica: Replica
    commits: Commits
    table: PeerTable
    options: LinkOptions
    # Whether a node key may sync with this node (membership); None lets every key in.
    admits: Callable[[bytes], bool] | None = None
    # Each link's fetch and its wake-up (docs/partial.md): what fills payloads here tells
    # the others, whose peers may now have more of what this node lacks.
    fetches: dict[Fetch, asyncio.Event] = field(default_factory=dict)

    def filled(self, by: Fetch | None, filled: Sequence[Filled]) -> None:
        """Payloads were filled in through the link of ``by``: every other link passes them
        on and asks again."""
        if not filled:
            return
        for fetch, wake in self.fetches.items():
            if fetch is not by:
                fetch.refill(filled)
                wake.set()
