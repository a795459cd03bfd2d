"""How answers read on a terminal (docs/cli.md §Output): lists as tables under a header row,
nothing shown as ``None``, counts with their noun in the right number."""

from __future__ import annotations

from collections.abc import Sequence

__all__ = ["NOTHING", "cell", "count", "table"]

NOTHING = "—"  # a value that is absent (null in the JSON) or empty


def cell(value: object) -> str:
    """A value as a table shows it: absent or empty values as ``—``."""
    if value is None or value == "" or value == []:
        return NOTHING
    if isinstance(value, list | tuple):
        return ",".join(map(str, value))
    return str(value)


def table(header: Sequence[str], rows: Sequence[Sequence[object]]) -> list[str]:
    """The header row and a line per row, every column as wide as its widest cell but the
    last, which is not padded; no lines at all when there are no rows (the caller says so)."""
    if not rows:
        return []
    cells = [list(header), *([cell(v) for v in row] for row in rows)]
    widths = [max(len(line[i]) for line in cells) for i in range(len(header) - 1)]
    return [
        "  ".join([*(c.ljust(w) for c, w in zip(line, widths, strict=False)), line[-1]])
        for line in cells
    ]


def count(n: int, one: str, many: str | None = None) -> str:
    """``1 entry``, ``2 entries``, ``1,204 SRs``."""
    return f"{n:,} {one if n == 1 else many or one + 's'}"
