"""What an importer reads out of a file (docs/export.md §Importing): SR and episode records,
each named by its source's own key for it, and the problems of the lines it could not read.

An imported record's id is made from the importing caller and the record's key, which names its
source (``derived_id``): the same file imported again names the same ids, so what is already
there is seen and nothing is written twice; and a link names its target by the target's key,
so it can be written before the target is.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, BinaryIO

from node.access.callers import Caller
from node.errors import NodeError
from node.identity import uuid8
from protocol.timefmt import format_instant

__all__ = [
    "MAX_LINE",
    "EpisodeRecord",
    "FileError",
    "Problem",
    "Read",
    "SrRecord",
    "derived_id",
    "instant_of",
    "lines",
]

MAX_LINE = 1 << 20  # a line (or a note) longer than 1 MiB is a problem, not a record


class FileError(NodeError):
    """A file that cannot be imported at all (not of the format named, or of a newer one)."""


@dataclass(frozen=True, slots=True)
class SrRecord:
    """An SR to create: e_write's fields, and the keys of the records it links to."""

    line: int
    key: str
    fields: dict[str, Any]
    links: tuple[str, ...] = ()
    corrected: bool = False  # shown with has_correction where it comes from
    adjusted: bool = False  # … with has_adjustment
    at: str = ""  # where it is, when not a line of a file: a note's path, a record's number


@dataclass(frozen=True, slots=True)
class EpisodeRecord:
    """An episode to record: work_record's fields."""

    line: int
    key: str
    fields: dict[str, Any] = field(default_factory=dict)
    at: str = ""


@dataclass(frozen=True, slots=True)
class Problem:
    """A line (or note, or record) that is skipped, and why."""

    line: int
    message: str
    where: str = ""  # a note's path, for a folder


Read = SrRecord | EpisodeRecord | Problem


def derived_id(caller: Caller, key: str) -> str:
    """The id an imported record gets: a UUID (version 8) of the caller's workspace and
    principal and the record's key (``source:its own key``, e.g. ``memlane:<sr_id>``)."""
    return uuid8("memlane-import", caller.workspace, caller.principal, key)


def lines(f: BinaryIO) -> Iterator[tuple[int, str | None]]:
    """(number, text) of each non-blank line; text None for a line past ``MAX_LINE`` bytes or
    not UTF-8 (the rest of it is read through and dropped)."""
    number = 0
    while raw := f.readline(MAX_LINE + 1):
        number += 1
        if len(raw) > MAX_LINE and not raw.endswith(b"\n"):
            while (rest := f.readline(MAX_LINE)) and not rest.endswith(b"\n"):
                pass
            yield number, None
            continue
        try:
            text = raw.decode("utf-8").strip()
        except UnicodeDecodeError:
            yield number, None
            continue
        if text:
            yield number, text


def too_long_or_not_text(line: int) -> Problem:
    return Problem(line, f"line {line}: longer than {MAX_LINE} bytes, or not UTF-8 text")


def instant_of(value: Any) -> str | None:
    """An ISO-8601 date or time of another tool (any offset, any fraction) as memlane's
    instant text (UTC, milliseconds); None when there is none or it cannot be read."""
    if isinstance(value, datetime):
        moment = value if value.tzinfo else value.replace(tzinfo=UTC)
    elif isinstance(value, str) and value.strip():
        try:
            moment = datetime.fromisoformat(value.strip().replace("Z", "+00:00"))
        except ValueError:
            return None
        moment = moment if moment.tzinfo else moment.replace(tzinfo=UTC)
    elif hasattr(value, "isoformat") and hasattr(value, "year"):  # a date
        moment = datetime(value.year, value.month, value.day, tzinfo=UTC)
    else:
        return None
    ms = int(moment.timestamp() * 1000)
    return format_instant(ms) if ms >= 0 else None


def open_lines(path: Path) -> Iterator[tuple[int, str | None]]:
    with path.open("rb") as f:
        yield from lines(f)
