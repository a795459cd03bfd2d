"""Hybrid logical clock (docs/entries.md §Clocks and the three times).

An ``Hlc`` is (wall ms, counter), ordered as a tuple.  The ``HybridClock`` is pure: callers pass
in the physical wall time, so the same inputs always give the same timestamps.  It never moves
backwards.  A received timestamp within ``max_skew_ms`` past the local wall clock moves it
forward, as HLC does; one from further ahead moves it not at all (not even up to the bound) —
its entry is stored as its writer said and takes effect when its time comes (the caller audits
it as ``clock_skew``).
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
        """Observe a received timestamp; return False when it is beyond the skew.

        Within ``wall_ms + max_skew_ms`` the clock advances to ``received``; beyond, it stays
        where it was (docs/entries.md §Clocks and the three times).
        """
        if received.wall > wall_ms + self.max_skew_ms:
            return False
        if received > self._last:
            self._last = received
        return True

    def _tick(self, wall_ms: int) -> Hlc:
        wall_ms = min(wall_ms, MAX_WALL_MS)  # clamp before comparing, or a wall past the
        if wall_ms > self._last.wall:  # maximum would reissue (MAX_WALL_MS, 0) every time
            return Hlc(wall_ms, 0)
        if self._last.counter < MAX_COUNTER:
            return Hlc(self._last.wall, self._last.counter + 1)
        return Hlc(self._last.wall + 1, 0)
