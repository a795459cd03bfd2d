"""Hybrid logical clock (docs/entries.md §Clocks and the three times).

An ``Hlc`` is (wall ms, counter), ordered as a tuple.  The ``HybridClock`` is pure: callers pass
in the physical wall time, so the same inputs always give the same timestamps.  It never moves
backwards, and a received timestamp may pull it forward by at most ``max_skew_ms`` past the
local wall clock — an entry from further ahead is stored as its writer said, but does not drag
this node's clock with it (the caller audits it as ``clock_skew``).
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["DEFAULT_MAX_SKEW_MS", "MAX_COUNTER", "MAX_WALL_MS", "Hlc", "HybridClock"]

DEFAULT_MAX_SKEW_MS = 5 * 60 * 1000
MAX_COUNTER = (1 << 32) - 1
# 9999-12-31T23:59:59.999Z: the last instant the strict time format can spell.
MAX_WALL_MS = 253_402_300_799_999


@dataclass(frozen=True, slots=True, order=True)
class Hlc:
    """One hybrid logical timestamp."""

    wall: int
    counter: int = 0

    def __post_init__(self) -> None:
        if type(self.wall) is not int or not 0 <= self.wall <= MAX_WALL_MS:
            raise ValueError(f"hlc wall must be an int in [0, {MAX_WALL_MS}]")
        if type(self.counter) is not int or not 0 <= self.counter <= MAX_COUNTER:
            raise ValueError(f"hlc counter must be an int in [0, {MAX_COUNTER}]")


class HybridClock:
    """A monotonic hybrid logical clock; all time is passed in."""

    def __init__(self, start: Hlc | None = None, *, max_skew_ms: int = DEFAULT_MAX_SKEW_MS) -> None:
        self._last = start or Hlc(0, 0)
        self.max_skew_ms = max_skew_ms

    @property
    def last(self) -> Hlc:
        """The newest timestamp issued or observed."""
        return self._last

    def now(self, wall_ms: int) -> Hlc:
        """A fresh timestamp for a local event, strictly after every earlier one."""
        self._last = self._tick(max(wall_ms, 0))
        return self._last

    def update(self, received: Hlc, wall_ms: int) -> bool:
        """Observe a received timestamp; return False when it was too far ahead to follow.

        The clock advances to ``received`` but never past ``wall_ms + max_skew_ms``.
        """
        ceiling = min(wall_ms + self.max_skew_ms, MAX_WALL_MS)
        within = received.wall <= ceiling
        target = received if within else Hlc(ceiling, 0)
        if target > self._last:
            self._last = target
        return within

    def _tick(self, wall_ms: int) -> Hlc:
        wall_ms = min(wall_ms, MAX_WALL_MS)  # clamp before comparing, or a wall past the
        if wall_ms > self._last.wall:  # maximum would reissue (MAX_WALL_MS, 0) every time
            return Hlc(wall_ms, 0)
        if self._last.counter < MAX_COUNTER:
            return Hlc(self._last.wall, self._last.counter + 1)
        return Hlc(self._last.wall + 1, 0)
