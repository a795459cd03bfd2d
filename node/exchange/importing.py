"""``memlane import``: a file's records written through the ordinary write path — signed
entries of this node, as the token's principal in the token's workspace (docs/export.md
§Importing).

Each record's id is made from the caller and the record's key (``derived_id``) — an SR of a
memlane export that this node holds under its own id keeps it — so a record this node already
holds (written by an earlier import of it, or deleted here since) is counted
as present and not written again; links are written as the ids their targets get, wherever in
the file those are.  A record the write path refuses is a problem of its line, and skipped —
each record is one entry (an SR shown with a correction or an adjustment where it came from
is one more each, written after it), so nothing is half-written.  Records go a chunk at a
time: SRs of a chunk all at once (one group commit), episodes one after another in the file's
order, so each chain keeps its order.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from node.access.callers import Caller
from node.errors import Refusal
from node.exchange.records import EpisodeRecord, Problem, Read, SrRecord, derived_id
from node.exchange.sources import SOURCES, source_of
from node.progress import Progress
from node.tools import srs
from node.tools.context import ToolContext
from node.tools.episodes import record_episode
from node.views.export import select_present

__all__ = ["CHUNK", "ImportReport", "Planned", "import_file"]

CHUNK = 500  # records read ahead and written together
MAX_PROBLEMS = 1000  # problems (and a dry run's records) kept to be told one by one
_REASON = "imported: corrected where it came from"


@dataclass(frozen=True, slots=True)
class Planned:
    """A record a dry run would write: where it is, what, under which id, named how."""

    at: str
    what: str  # "sr" or "episode"
    id: str
    name: str  # an SR's title (else the start of its text), an episode's summary


@dataclass
class ImportReport:
    source: str
    dry_run: bool
    read: int = 0  # records read (problems not counted)
    written: int = 0  # records written (with dry_run: that would be)
    present: int = 0  # records this node holds already
    skipped: int = 0  # lines, notes or records that are problems
    problems: list[Problem] = field(default_factory=list)
    planned: list[Planned] = field(default_factory=list)  # with dry_run: what would be written

    def problem(self, p: Problem) -> None:
        self.skipped += 1
        if len(self.problems) < MAX_PROBLEMS:
            self.problems.append(p)


async def import_file(
    ctx: ToolContext,
    caller: Caller,
    path: Path,
    source: str | None = None,
    *,
    dry_run: bool = False,
    progress: Progress | None = None,
) -> ImportReport:
    """Import ``path``, a file (or folder) of ``source``'s kind (``SOURCES``); without
    ``source``, of the kind it is seen to be (``source_of``)."""
    caller.require("write:workspace")
    source = source_of(path, source)
    report = ImportReport(source, dry_run)
    for chunk in _chunks(SOURCES[source](path), report):
        await _Chunk(ctx, caller, report).write(chunk)
        if progress is not None:
            progress("import", report.read, report.read)
    return report


def _chunks(
    reads: Iterator[Read], report: ImportReport
) -> Iterator[list[SrRecord | EpisodeRecord]]:
    chunk: list[SrRecord | EpisodeRecord] = []
    for item in reads:
        if isinstance(item, Problem):
            report.problem(item)
            continue
        report.read += 1
        chunk.append(item)
        if len(chunk) >= CHUNK:
            yield chunk
            chunk = []
    if chunk:
        yield chunk


class _Chunk:
    def __init__(self, ctx: ToolContext, caller: Caller, report: ImportReport) -> None:
        self.ctx, self.caller, self.report = ctx, caller, report
        self.kept: dict[str, str] = {}  # key → the id of an SR this node holds under it

    async def _keep(self, keys: list[str]) -> None:
        """An SR of a memlane export that this node holds under its own id (exported here,
        or synced here from where it was) is that SR: its key names it, not a new one."""
        own = {k.removeprefix("memlane:"): k for k in keys if k.startswith("memlane:")}
        held = await select_present(self.ctx.reader(), self.caller.workspace, "sr", list(own))
        self.kept = {own[sr_id]: sr_id for sr_id in held}

    def id(self, key: str) -> str:
        return self.kept.get(key) or derived_id(self.caller, key)

    async def write(self, chunk: list[SrRecord | EpisodeRecord]) -> None:
        records = [r for r in chunk if isinstance(r, SrRecord)]
        episodes = [r for r in chunk if isinstance(r, EpisodeRecord)]
        await self._keep([k for r in records for k in (r.key, *r.links)])
        await asyncio.gather(*(self._sr(r) for r in await self._new("sr", records)))
        for e in await self._new("episode", episodes):
            await self._told(
                e,
                record_episode(
                    self.ctx, self.caller, self.id(e.key), e.fields, dry_run=self.report.dry_run
                ),
            )

    async def _new(self, what: str, records: list[Any]) -> list[Any]:
        """The records not written yet (by their ids), each once."""
        ids = {self.id(r.key): r for r in records}
        held = await select_present(self.ctx.reader(), self.caller.workspace, what, list(ids))
        self.report.present += len(records) - len(ids) + len(held)
        return [r for i, r in ids.items() if i not in held]

    async def _sr(self, r: SrRecord) -> None:
        sr_id = self.id(r.key)
        args = r.fields | ({"links": [self.id(k) for k in r.links]} if r.links else {})
        created = srs.create_sr(self.ctx, self.caller, sr_id, args, dry_run=self.report.dry_run)
        if not await self._told(r, created) or self.report.dry_run:
            return
        if r.corrected:
            field = "title" if r.fields.get("title") else "text"
            fix = {"sr_id": sr_id, "reason": _REASON, field: r.fields[field]}
            await self._told(r, srs.e_correct(self.ctx, self.caller, fix), count=False)
        if r.adjusted:
            lane = {"sr_id": sr_id, "lane": r.fields.get("lane", "default")}
            await self._told(r, srs.e_adjust(self.ctx, self.caller, lane), count=False)

    async def _told(self, r: SrRecord | EpisodeRecord, write: Any, *, count: bool = True) -> bool:
        """Await ``write`` (``count``: the record's own entry); a refusal is the record's
        problem, and stops no other record."""
        try:
            await write
        except Refusal as exc:
            self.report.problem(Problem(r.line, f"{r.at or f'line {r.line}'}: {exc}", r.at))
            return False
        self.report.written += count
        if self.report.dry_run and len(self.report.planned) < MAX_PROBLEMS:
            self.report.planned.append(self._planned(r))
        return True

    def _planned(self, r: SrRecord | EpisodeRecord) -> Planned:
        what = "sr" if isinstance(r, SrRecord) else "episode"
        f = r.fields
        name = (f.get("title") or f.get("text") or "") if what == "sr" else f.get("summary")
        return Planned(r.at or f"line {r.line}", what, self.id(r.key), str(name or "")[:80])
