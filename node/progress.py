"""How long work reports how far it is: a ``Progress`` is told ``(phase, done, total)`` as the
work goes (``done`` reaching ``total`` at the end of each phase), in whatever unit the phase
counts — entries, bytes, pages.  The library never draws; the CLI shows it on a terminal."""

from __future__ import annotations

from collections.abc import Callable

__all__ = ["Progress"]

Progress = Callable[[str, int, int], None]
