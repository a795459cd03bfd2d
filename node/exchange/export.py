"""``memlane export``: what one token can read, in files a person or another tool can read
(docs/export.md).  ``jsonl`` writes one record a line — a header, each SR, each episode, an
end that counts them; ``markdown`` a folder of one note per SR, named from its title, its
metadata as YAML front matter and its links as wiki links (``notes``).  Either is written
beside its destination and renamed into place once whole, so a destination is never half an
export.
"""

from __future__ import annotations

import json
import os
import shutil
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TextIO

from node.access.callers import Caller
from node.errors import NodeError
from node.exchange.notes import Names, note
from node.progress import Progress
from node.store import Reader
from node.views.episode_reads import Scope
from node.views.export import count_srs, select_episodes, select_srs
from node.views.shown import instant

__all__ = ["FORMAT", "VERSION", "ExportError", "ExportReport", "Source", "export"]

FORMAT, VERSION = "memlane-export", 1
PAGE = 1000  # SRs or episodes read at a time


class ExportError(NodeError):
    """An export that cannot be written (its destination exists, or is not writable)."""


@dataclass(frozen=True, slots=True)
class ExportReport:
    path: Path
    srs: int
    episodes: int


@dataclass(frozen=True, slots=True)
class Source:
    """What an export reads: the store's reads, as whom, at which moment, since when."""

    reader: Reader
    caller: Caller
    moment: int
    since: int | None = None


async def export(
    source: Source, out: Path, fmt: str, *, progress: Progress | None = None
) -> ExportReport:
    """Write what ``source.caller`` may read to ``out`` in ``fmt`` (``jsonl``, ``markdown``);
    a caller without read scope is refused as every read tool refuses it."""
    source.caller.require("read:workspace")
    part = _begin(out)
    try:
        total = await count_srs(source.reader, source.caller, since=source.since)
        told = _Told(progress, total)
        if fmt == "jsonl":
            srs, episodes = await _jsonl(source, part, told)
        else:
            srs, episodes = await _markdown(source, part, told), 0
        os.replace(part, out)
    except BaseException:
        _remove(part)
        raise
    return ExportReport(out, srs, episodes)


class _Told:
    def __init__(self, progress: Progress | None, total: int) -> None:
        self.progress, self.total, self.done = progress, total, 0

    def add(self, n: int) -> None:
        self.done += n
        if self.progress is not None:
            self.progress("export", min(self.done, self.total), self.total)


def _begin(out: Path) -> Path:
    """Where the export is written until whole: ``out`` + ``.part`` (left by an export that
    stopped, it goes), once ``out`` is free."""
    if out.exists() or out.is_symlink():
        raise ExportError(f"{out} already exists")
    part = out.with_name(out.name + ".part")
    _remove(part)
    return part


def _remove(path: Path) -> None:
    if path.is_dir() and not path.is_symlink():
        shutil.rmtree(path)
    elif path.exists() or path.is_symlink():
        path.unlink()


async def _pages_of_srs(source: Source, told: _Told) -> AsyncIterator[list[dict[str, Any]]]:
    after = None
    while True:
        srs, after = await select_srs(
            source.reader, source.caller, after=after, since=source.since, limit=PAGE
        )
        if not srs:
            return
        told.add(len(srs))
        yield srs


async def _jsonl(source: Source, part: Path, told: _Told) -> tuple[int, int]:
    srs = episodes = 0
    with part.open("x", encoding="utf-8", newline="\n") as f:
        _line(f, header(source))
        async for page in _pages_of_srs(source, told):
            for sr in page:
                _line(f, {"type": "sr", **sr})
            srs += len(page)
        scope = Scope(source.caller, source.caller.is_admin, source.moment)
        after = None
        while True:
            page, after = await select_episodes(
                source.reader, scope, after=after, since=source.since, limit=PAGE
            )
            for episode in page:
                _line(f, {"type": "episode", **episode})
            episodes += len(page)
            if after is None:
                break
        _line(f, {"type": "end", "srs": srs, "episodes": episodes})
    return srs, episodes


def header(source: Source) -> dict[str, Any]:
    """The first line: the format, and what was exported for whom and when."""
    return {
        "type": "header",
        "format": FORMAT,
        "version": VERSION,
        "workspace": source.caller.workspace,
        "principal": source.caller.principal,
        "exported_at": instant(source.moment),
        "since": instant(source.since),
    }


def _line(f: TextIO, record: dict[str, Any]) -> None:
    f.write(json.dumps(record, ensure_ascii=False, separators=(",", ":")))
    f.write("\n")


async def _markdown(source: Source, part: Path, told: _Told) -> int:
    """Name every note first (a note links to those after it by their names), then write
    each: the SRs are read twice, and the names and titles kept meanwhile."""
    os.mkdir(part, mode=0o700)
    names = Names()
    async for page in _pages_of_srs(source, _Told(None, 0)):
        for sr in page:
            names.want(sr)
    names.settle()
    count = 0
    async for page in _pages_of_srs(source, told):
        for sr in page:
            text = "".join(note(sr, names))
            (part / f"{names.give(sr)}.md").write_text(text, encoding="utf-8")
        count += len(page)
    return count
