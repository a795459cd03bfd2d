"""How answers read on a terminal (docs/cli.md §Output): lists as tables under a header row,
nothing shown as ``None``, counts with their noun in the right number, and no control
character of stored or remote data reaching the terminal raw (``visible``), nor a path's
bytes that are not UTF-8 (``shown_path``)."""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import Any

__all__ = [
    "NOTHING",
    "cell",
    "count",
    "encodes",
    "shown_path",
    "table",
    "visible",
    "visible_lines",
]

NOTHING = "—"  # a value that is absent (null in the JSON) or empty

# C0, DEL and C1 as their visible escapes (docs/cli.md §Output): an SR's title or a peer's
# error text holding ESC sequences would otherwise clear, recolour or retitle the terminal.
_NAMED = {0x09: "\\t", 0x0A: "\\n", 0x0D: "\\r"}
_CONTROLS = {c: _NAMED.get(c, f"\\x{c:02x}") for c in (*range(0x20), *range(0x7F, 0xA0))}
_IN_LINES = {c: e for c, e in _CONTROLS.items() if c != 0x0A}  # a text's own line breaks stay


def visible(text: str) -> str:
    """``text`` with every control character (C0, DEL, C1) shown as its escape: ``\\x1b``,
    ``\\n``, ``\\t``, ``\\r``."""
    return text.translate(_CONTROLS)


def visible_lines(text: str) -> str:
    """As ``visible``, but the line breaks between lines are kept: for a whole answer."""
    return text.translate(_IN_LINES)


def cell(value: object) -> str:
    """A value as a table shows it: absent or empty values as ``—``, control characters as
    their escapes (a line break inside a cell would break its row)."""
    if value is None or value == "" or value == []:
        return NOTHING
    if isinstance(value, list | tuple):
        return visible(",".join(map(str, value)))
    return visible(str(value))


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


def encodes(text: str) -> bool:
    """Whether ``text`` is Unicode UTF-8 can encode (no lone surrogates)."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def shown_path(value: Any) -> Any:
    """``value`` with every string that holds a path's undecodable bytes (lone surrogates,
    ``surrogateescape``) spelled with those bytes as ``\\xff`` escapes: what a terminal and
    a JSON parser can take (docs/cli.md §Output)."""
    if isinstance(value, str):
        if encodes(value):
            return value
        return os.fsencode(value).decode("utf-8", "backslashreplace")
    if isinstance(value, dict):
        return {shown_path(k): shown_path(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [shown_path(v) for v in value]
    return value
