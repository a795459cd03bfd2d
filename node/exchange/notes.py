"""An SR as a Markdown note (docs/export.md §markdown): the file name it gets, the note it is, and
its text's line breaks kept as Markdown keeps them.

A note is named from its title — made safe for every file system a folder of notes is opened on,
and unique in the folder letter case aside, a suffix of its ``sr_id`` telling apart two that
would share a name — so a vault opened in Obsidian is a graph of titles.  Names are given in the
order the SRs were created, so two exports of the same SRs name them alike.  A line break of the
text inside a paragraph, which Markdown would join into one line, is written as a hard break
(two spaces at the line's end); ``soft_breaks`` takes them off again, so the text read back is
the text written.
"""

from __future__ import annotations

import json
import re
import unicodedata
from collections.abc import Iterator
from typing import Any

from protocol.timefmt import parse_time

__all__ = ["FRONT_MATTER", "Names", "hard_breaks", "note", "soft_breaks"]

# The front matter's keys, in this order (docs/export.md §markdown); the title is the note's
# heading too, its text the body.
FRONT_MATTER = (
    "sr_id",
    "title",
    "tags",
    "lane",
    "lane_uuid",
    "visibility",
    "content_time",
    "ingest_time",
    "created_time",
    "conversational",
    "has_correction",
    "has_adjustment",
    "caller",
    "node_id",
    "links",
)

MAX_NAME = 120  # bytes of a name before its suffix and ".md": well inside the usual 255
_SEPARATORS = re.compile(r"[/\\|]")  # read as separators: a dash
# Refused by Windows, macOS or Obsidian in a name, or read by a wiki link as its syntax.
_UNSAFE = re.compile(r'[\x00-\x1f\x7f:*?"<>#^\[\]]')
_RESERVED = re.compile(r"(?i)(con|prn|aux|nul|com[0-9]|lpt[0-9])(\..*)?")  # Windows' devices
_BREAK = "  "  # a hard line break (CommonMark §6.7): invisible, and harmless at a block's end
_FENCE = re.compile(r" {0,3}(```|~~~)")


class Names:
    """The file names (without ``.md``) of an export's notes, and the title each shows.

    Every SR the export holds is ``want``-ed first; ``settle`` then names them in the order
    they were created (``created_time``, then ``sr_id``), so a correction, an adjustment or a
    later SR does not take a note's name from it."""

    def __init__(self) -> None:
        self._taken: set[str] = set()
        self._given: dict[str, tuple[str, str]] = {}  # sr_id → (name, label)
        self._wanted: list[tuple[int, str, str, str]] = []  # (created, sr_id, stem, label)

    def want(self, sr: dict[str, Any]) -> None:
        stem, label = file_stem(sr["title"], sr["text"]), _label(sr["title"])
        self._wanted.append((parse_time(sr["created_time"]), sr["sr_id"], stem, label))

    def settle(self) -> None:
        for _, sr_id, stem, label in sorted(self._wanted):
            self._name(sr_id, stem, label)
        self._wanted = []

    def give(self, sr: dict[str, Any]) -> str:
        """The name of ``sr``'s note: the one it was given, else one free in the folder (an
        SR written while the export ran)."""
        self._name(sr["sr_id"], file_stem(sr["title"], sr["text"]), _label(sr["title"]))
        return self._given[sr["sr_id"]][0]

    def link(self, sr_id: str) -> str:
        """A wiki link to the note of ``sr_id``, its title as its label (Obsidian's alias); to
        an SR not named in this export (written while it ran), by its ``sr_id``."""
        self._name(sr_id, sr_id, sr_id)
        name, label = self._given[sr_id]
        return f"[[{name}|{label}]]"

    def _name(self, sr_id: str, stem: str, label: str) -> None:
        if sr_id in self._given:
            return
        name = next(n for n in _candidates(stem, sr_id) if _key(n) not in self._taken)
        self._taken.add(_key(name))
        self._given[sr_id] = (name, label or name)


def file_stem(title: str, text: str) -> str:
    """A name from ``title`` (else the text's first line, else ``untitled``) that every file
    system takes: one line, no character a system or a wiki link refuses, at most
    ``MAX_NAME`` bytes, not hidden, not a Windows device."""
    for source in (title, text.strip().split("\n", 1)[0]):
        stem = _safe(source)
        if stem:
            return f"{stem}_" if _RESERVED.fullmatch(stem) else stem
    return "untitled"


def _safe(text: str) -> str:
    text = unicodedata.normalize("NFC", text[: MAX_NAME * 4])
    text = " ".join(_UNSAFE.sub(" ", _SEPARATORS.sub("-", text)).split())[:MAX_NAME]
    while len(text.encode()) > MAX_NAME:
        text = text[:-1]
    return text.strip(". ")


def _candidates(stem: str, sr_id: str) -> Iterator[str]:
    yield stem
    yield f"{stem} ({sr_id.replace('-', '')[-8:]})"
    yield f"{stem} ({sr_id})"
    n = 2
    while True:
        yield f"{stem} ({sr_id}) {n}"
        n += 1


def _key(name: str) -> str:
    return unicodedata.normalize("NFC", name).casefold()


def _label(title: str) -> str:
    return " ".join(re.sub(r"[\[\]|]", " ", title).split())


def note(sr: dict[str, Any], names: Names) -> Iterator[str]:
    """An SR as a Markdown note: YAML front matter (each value in JSON's spelling, which YAML
    reads as the same value), the title as its heading, the text with its line breaks kept,
    its links as wiki links to the linked notes."""
    yield "---\n"
    for key in FRONT_MATTER:
        yield f"{key}: {json.dumps(sr[key], ensure_ascii=False)}\n"
    yield "---\n"
    if sr["title"]:
        yield f"\n# {' '.join(sr['title'].split())}\n"
    if sr["text"]:
        yield f"\n{hard_breaks(sr['text'])}\n"
    if sr["links"]:
        yield "\n## Links\n\n"
        yield from (f"- {names.link(dst)}\n" for dst in sr["links"])


def _soft(lines: list[str]) -> Iterator[int]:
    """The lines that end in a break Markdown would join (a non-blank line followed by
    another, outside fenced code)."""
    fenced = False
    for i, (line, after) in enumerate(zip(lines, [*lines[1:], ""], strict=True)):
        if _FENCE.match(line):
            fenced = not fenced
        elif not fenced and _prose(line) and _prose(after):
            yield i


def _prose(line: str) -> bool:
    return bool(line.strip()) and not _FENCE.match(line)


def hard_breaks(text: str) -> str:
    """``text`` with each line break Markdown would join written as a hard break."""
    lines = text.split("\n")
    for i in _soft(lines):
        lines[i] += _BREAK
    return "\n".join(lines)


def soft_breaks(text: str) -> str:
    """The text ``hard_breaks`` was given, from what it made."""
    lines = text.split("\n")
    for i in _soft(lines):
        lines[i] = lines[i].removesuffix(_BREAK)
    return "\n".join(lines)
