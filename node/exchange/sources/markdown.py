"""A folder of Markdown notes (the shape basic-memory and Obsidian keep, and ``memlane export
--format markdown`` writes): every ``*.md`` under it, in path order, an SR each.

A note's optional YAML front matter (between ``---`` lines at its top, at most 64 KiB, no
anchors or aliases) gives its ``title`` (else its first ``# `` heading, else its file name),
``tags`` (a list, or text split at commas and spaces), its content time (``content_time``,
``date`` or ``created``) and, for a note memlane wrote, the rest of what the SR showed; the
body is its text.  ``[[target]]``, ``[[target|label]]`` and ``[[target#part]]`` link to the
note whose path, file name, title or ``sr_id`` is the target (letter case aside); a link to
no note of the folder is a problem of its line, and the note is imported without it.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from node.exchange.notes import soft_breaks
from node.exchange.records import MAX_LINE, FileError, Problem, Read, SrRecord, instant_of
from node.exchange.sources.memlane import sr_record

__all__ = ["MAX_FRONT_MATTER", "read"]

MAX_FRONT_MATTER = 64 << 10
_LINK = re.compile(r"\[\[([^\[\]|#\n]+)(?:#[^\[\]|\n]*)?(?:\|[^\[\]\n]*)?\]\]")
_HEADING = re.compile(r"\A\s*# (.+)\n?")
_LINKS_SECTION = re.compile(r"\n*## Links\n\n(?:- \[\[[^\]\n]+\]\]\n?)+\s*\Z")


@dataclass(frozen=True, slots=True)
class _Note:
    where: str  # the path under the folder
    front: dict[str, Any]
    body: str
    body_line: int  # the line the body starts on


def read(path: Path) -> Iterator[Read]:
    if not path.is_dir():
        raise FileError(f"{path} is not a folder of Markdown notes")
    notes: dict[str, _Note] = {}
    for file in sorted(path.rglob("*.md")):
        where = file.relative_to(path).as_posix()
        note = _load(file, where)
        if isinstance(note, Problem):
            yield note
        else:
            notes[where] = note
    names = _names(notes)
    for note in notes.values():
        yield from _record(note, names)


def _load(file: Path, where: str) -> _Note | Problem:
    if file.stat().st_size > MAX_LINE:
        return Problem(1, f"{where}: longer than {MAX_LINE} bytes", where)
    try:
        text = file.read_text("utf-8").replace("\r\n", "\n")
    except UnicodeDecodeError:
        return Problem(1, f"{where}: not UTF-8 text", where)
    if not text.startswith("---\n"):
        return _Note(where, {}, text, 1)
    end = text.find("\n---", 3)
    if end < 0 or end > MAX_FRONT_MATTER:
        return Problem(1, f"{where}: front matter without its closing --- (or past 64 KiB)", where)
    front = _front_matter(text[4:end], where)
    if isinstance(front, Problem):
        return front
    rest = text[end + 4 :]
    body = rest[1:] if rest.startswith("\n") else rest
    return _Note(where, front, body, text[: end + 5].count("\n") + 1)


def _front_matter(text: str, where: str) -> dict[str, Any] | Problem:
    try:
        if any(isinstance(t, yaml.AliasToken | yaml.AnchorToken) for t in yaml.scan(text)):
            return Problem(1, f"{where}: front matter with YAML anchors or aliases", where)
        front = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        return Problem(1, f"{where}: front matter is not YAML ({exc})".replace("\n", " "), where)
    if front is None:
        return {}
    if not isinstance(front, dict):
        return Problem(1, f"{where}: front matter is not a map of fields", where)
    return front


def _title(note: _Note) -> str:
    title = note.front.get("title")
    if isinstance(title, str) and title.strip():
        return title
    heading = _HEADING.match(note.body)
    return heading.group(1).strip() if heading else Path(note.where).stem


def _key(note: _Note) -> str:
    sr_id = note.front.get("sr_id")
    return f"memlane:{sr_id}" if isinstance(sr_id, str) and sr_id else f"markdown:{note.where}"


def _names(notes: dict[str, _Note]) -> dict[str, str]:
    """What a wiki link may name (lower case) → the key of the note it names: the first note
    in path order wins a name two share."""
    names: dict[str, str] = {}
    for where, note in notes.items():
        sr_id = note.front.get("sr_id")
        for name in (where.removesuffix(".md"), Path(where).stem, _title(note), sr_id):
            if isinstance(name, str) and name:
                names.setdefault(name.strip().lower(), _key(note))
    return names


def _record(note: _Note, names: dict[str, str]) -> Iterator[Read]:
    if _key(note).startswith("memlane:"):  # a note memlane wrote: its links are its front's
        yield _memlane(note)
        return
    links: list[str] = []
    for i, line in enumerate(note.body.split("\n")):
        for target in _LINK.findall(line):
            key = names.get(target.strip().lower())
            if key is None:
                number = note.body_line + i
                yield Problem(
                    number,
                    f"{note.where}: line {number}: a link to no note of the "
                    f"folder: {target.strip()}",
                    note.where,
                )
            elif key not in links:
                links.append(key)
    yield _sr(note, links)


def _text(note: _Note, title: str) -> str:
    """The body without its title's heading and the links section memlane writes."""
    body = _LINKS_SECTION.sub("\n", note.body)
    heading = _HEADING.match(body)
    if title and heading and heading.group(1).strip() == " ".join(title.split()):
        body = body[heading.end() :]
    return body.strip("\n")


def _memlane(note: _Note) -> Read:
    """A note memlane wrote: its SR's fields, and its text as it was before the note's hard
    breaks (an SR without a title has no heading: a heading its text starts with is kept)."""
    title = note.front.get("title")
    text = soft_breaks(_text(note, title if isinstance(title, str) else ""))
    made = sr_record(1, {**note.front, "text": text})
    if isinstance(made, Problem):
        return Problem(1, f"{note.where}: {made.message}", note.where)
    return SrRecord(
        made.line, made.key, made.fields, made.links, made.corrected, made.adjusted, note.where
    )


def _sr(note: _Note, links: list[str]) -> Read:
    title = _title(note)
    fields: dict[str, Any] = {"title": title, "text": _text(note, title), "tags": _tags(note.front)}
    when = next(
        (instant_of(note.front[k]) for k in ("content_time", "date", "created") if k in note.front),
        None,
    )
    if when is not None:
        fields["content_time"] = when
    return SrRecord(1, _key(note), fields, tuple(links), at=note.where)


def _tags(front: dict[str, Any]) -> list[str]:
    tags = front.get("tags") or []
    if isinstance(tags, str):
        tags = re.split(r"[,\s]+", tags)
    if not isinstance(tags, list):
        return []
    return list(dict.fromkeys(str(t).lstrip("#") for t in tags if str(t).strip("# ")))
