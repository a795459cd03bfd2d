"""memlane's own JSON lines export (docs/export.md §jsonl): its header first, then each SR and
episode line a record.  An SR keeps its content, metadata and links (by their exported ids,
mapped as the SRs are); an episode its fields, recorded in the order the file holds them, so
each caller's chain keeps its order.  A line with a field the format does not name is a
problem: a file that does not start with a header, or a newer export, is refused whole.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from node.exchange.export import FORMAT, VERSION
from node.exchange.notes import FRONT_MATTER
from node.exchange.records import (
    EpisodeRecord,
    FileError,
    Problem,
    Read,
    SrRecord,
    open_lines,
    too_long_or_not_text,
)
from node.views.episode_reads import COLUMNS
from node.views.shown import instant

__all__ = ["read", "sr_record"]

# The SR fields written again, and those shown that the node sets itself.
_WRITTEN = (
    "title",
    "text",
    "tags",
    "lane",
    "lane_uuid",
    "visibility",
    "content_time",
    "conversational",
)
_SR_KEYS = frozenset({"type", "text", *FRONT_MATTER})
# The episode fields work_record takes (the rest are the node's: id, ts, vault, caller, …).
_RECORDED = (
    "session_id",
    "channel",
    "episode_type",
    "task_result",
    "verdict_at",
    "tool",
    "status",
    "error_code",
    "duration_ms",
    "result_size",
    "summary",
    "tags",
    "trust",
    "eligibility",
)
_EPISODE_KEYS = frozenset({"type", *COLUMNS})


def read(path: Path) -> Iterator[Read]:
    first = True
    for number, text in open_lines(path):
        if first:
            _check_header(_header(text), path)
            first = False
            continue
        if text is None:
            yield too_long_or_not_text(number)
            continue
        try:
            record = json.loads(text)
        except json.JSONDecodeError as exc:
            yield Problem(number, f"line {number}: not JSON ({exc.msg})")
            continue
        yield from _record(number, record, path)
    if first:
        raise FileError(f"{path} is empty: not a memlane export")


def _header(text: str | None) -> Any:
    try:
        return json.loads(text or "")
    except json.JSONDecodeError:
        return None


def _record(number: int, record: Any, path: Path) -> Iterator[Read]:
    kind = record.get("type") if isinstance(record, dict) else None
    if kind == "header":  # exports joined end to end: each part's header
        _check_header(record, path)
    elif kind == "sr":
        yield _checked(number, record, _SR_KEYS, "sr_id", sr_record)
    elif kind == "episode":
        yield _checked(number, record, _EPISODE_KEYS, "id", _episode)
    elif kind != "end":
        yield Problem(number, f"line {number}: not a record of a memlane export")


def _check_header(record: Any, path: Path) -> None:
    """The first line: a memlane export's header, of a version this node reads; else the
    file is not one it reads at all."""
    header = isinstance(record, dict) and record.get("type") == "header"
    if not header or record.get("format") != FORMAT or not isinstance(record.get("version"), int):
        raise FileError(f"{path} is not a memlane export: it starts with no memlane-export header")
    if record["version"] > VERSION:
        raise FileError(
            f"{path} is a memlane export of version {record['version']}: this node reads "
            f"version {VERSION} and before"
        )


def _checked(
    number: int, record: dict[str, Any], known: frozenset[str], key: str, make: Any
) -> Read:
    unknown = sorted(set(record) - known)
    if unknown:
        return Problem(number, f"line {number}: unknown fields: {', '.join(unknown)}")
    if not isinstance(record.get(key), str) or not record[key]:
        return Problem(number, f"line {number}: no {key}")
    made: Read = make(number, record)
    return made


def sr_record(number: int, record: dict[str, Any]) -> SrRecord | Problem:
    """An exported SR (a line, or a note's front matter and text) as a record."""
    links = record.get("links", [])
    if not isinstance(links, list) or not all(isinstance(x, str) for x in links):
        return Problem(number, f"line {number}: links must be a list of sr_ids")
    fields = {k: record[k] for k in _WRITTEN if record.get(k) is not None}
    return SrRecord(
        number,
        f"memlane:{record['sr_id']}",
        fields,
        tuple(f"memlane:{x}" for x in links),
        record.get("has_correction") is True,
        record.get("has_adjustment") is True,
    )


def _episode(number: int, record: dict[str, Any]) -> Read:
    fields = {k: record[k] for k in _RECORDED if record.get(k) is not None}
    if isinstance(fields.get("verdict_at"), int):
        fields["verdict_at"] = instant(fields["verdict_at"])
    return EpisodeRecord(number, f"memlane-episode:{record['id']}", fields)
