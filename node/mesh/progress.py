"""A catch-up in the serving node's log: while a link takes entries from a peer this node is
behind, a line every few seconds (what arrived, how far behind it still is), and one when it
has caught up.  A catch-up that one batch settles writes nothing."""

from __future__ import annotations

import time

from node.logging import get_logger

__all__ = ["EVERY_S", "CatchUpLog"]

EVERY_S = 5.0
_log = get_logger("node.mesh.sync")


class CatchUpLog:
    """One link's lines; ``took`` after each batch the link stored."""

    def __init__(self, every: float = EVERY_S) -> None:
        self.every = every
        self._told_at: float | None = None  # the last line's moment; None: not catching up

    def took(self, peer: str, received: int, behind: int) -> None:
        now = time.monotonic()
        if behind and (self._told_at is None or now - self._told_at >= self.every):
            self._told_at = now
            _log.info("catching up", peer=peer, received=received, behind=behind)
        elif not behind and self._told_at is not None:
            self._told_at = None
            _log.info("caught up", peer=peer, received=received)
