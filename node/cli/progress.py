"""Progress on long work, drawn on stderr when it is a terminal and nowhere else: one tqdm bar
per phase the work tells of (node/progress.py), each closed when its phase is whole."""

from __future__ import annotations

import sys
from typing import Any

from node.progress import Progress

__all__ = ["BYTES", "ENTRIES", "bars"]

BYTES, ENTRIES = "B", "entries"


def bars(units: dict[str, str]) -> Progress | None:
    """A ``Progress`` that draws each phase of ``units`` (phase → ``BYTES`` or a word); None
    when stderr is not a terminal, so a pipe, a file or a log gets nothing."""
    if not sys.stderr.isatty():
        return None
    from tqdm import tqdm  # only when there is a terminal to draw on

    shown: dict[str, Any] = {}

    def show(phase: str, done: int, total: int) -> None:
        bar = shown.get(phase)
        if bar is None:
            unit = units.get(phase, ENTRIES)
            bar = shown[phase] = tqdm(
                total=total,
                desc=f"{phase:<8}",
                unit=unit,
                unit_scale=unit == BYTES,
                unit_divisor=1024,
                file=sys.stderr,
                leave=True,
                dynamic_ncols=True,
            )
        if bar.disable:
            return
        bar.total = total
        bar.update(done - bar.n)
        if done >= total:
            bar.close()

    return show
