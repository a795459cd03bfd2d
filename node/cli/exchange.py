"""``memlane export`` and ``memlane import``: what one token can read, in plain files, out and
in (docs/export.md)."""

from __future__ import annotations

import argparse
from dataclasses import asdict
from pathlib import Path
from typing import Any

from node.cli.commands import Result, open_node, token_from_args
from node.cli.progress import bars
from node.cli.table import count
from node.cli.times import moment
from node.exchange.sources import SOURCES
from protocol.timefmt import parse_time

__all__ = ["add_parsers"]

_EXPORT_HELP = (
    "write what the token can read — its workspace, by the read rule — as JSON lines (SRs and "
    "episodes) or a folder of Markdown notes (SRs)"
)
_IMPORT_HELP = (
    "write a file's records as the token's principal, through the write path; a record already "
    "imported is not written again, a bad one is told with its line and skipped"
)
_SHOWN = 20  # records a dry run would write, and problems, told in text (--json: all kept)


def add_parsers(sub: Any) -> None:
    """Register ``export`` and ``import``."""
    export = sub.add_parser("export", help=_EXPORT_HELP, description=_EXPORT_HELP)
    export.set_defaults(handler=export_command)
    export.add_argument(
        "out", type=Path, metavar="OUT", help="the file (jsonl) or folder (markdown) to write"
    )
    export.add_argument(
        "--format", choices=("jsonl", "markdown"), default="jsonl", help="default: jsonl"
    )
    export.add_argument(
        "--since",
        type=moment,
        metavar="WHEN",
        help="only the SRs and episodes written at or after WHEN (an instant "
        "or a date): an incremental export",
    )
    imported = sub.add_parser("import", help=_IMPORT_HELP, description=_IMPORT_HELP)
    imported.set_defaults(handler=import_command)
    imported.add_argument(
        "file", type=Path, metavar="FILE", help="the file, or a folder of Markdown notes"
    )
    imported.add_argument(
        "--from",
        dest="source",
        choices=tuple(SOURCES),
        help="what wrote it (default: told by the file — a folder is Markdown notes, a file's "
        "first line names the rest)",
    )
    imported.add_argument(
        "--dry-run", action="store_true", help="check every record, tell what would be written"
    )


async def export_command(args: argparse.Namespace) -> Result:
    since = None if args.since is None else parse_time(args.since)
    async with open_node(args) as node:
        caller = await node.authenticate(token_from_args(args))
        report = await node.export(
            caller, args.out, args.format, since=since, progress=bars({"export": "SRs"})
        )
    data = {"path": str(report.path), "srs": report.srs, "episodes": report.episodes}
    text = f"wrote {report.path}: {count(report.srs, 'SR')}, {count(report.episodes, 'episode')}"
    return Result(data, text)


async def import_command(args: argparse.Namespace) -> Result:
    async with open_node(args) as node:
        caller = await node.authenticate(token_from_args(args))
        report = await node.import_file(caller, args.file, args.source, dry_run=args.dry_run)
    problems = [{"line": p.line, "where": p.where, "problem": p.message} for p in report.problems]
    data = {
        "source": report.source,
        "dry_run": report.dry_run,
        "read": report.read,
        "written": report.written,
        "present": report.present,
        "skipped": report.skipped,
        "problems": problems,
    }
    if report.dry_run:
        data["would_write"] = [asdict(p) for p in report.planned]
    verb = "would write" if report.dry_run else "wrote"
    lines = [f"{p.at}: would write {p.what} {p.id} {p.name!r}" for p in report.planned[:_SHOWN]]
    if report.dry_run and report.written > len(lines):
        lines.append(f"… and {report.written - len(lines):,} more to write (--json lists them)")
    told = [p.message for p in report.problems[:_SHOWN]]
    lines += told
    if report.skipped > len(told):
        lines.append(f"… and {report.skipped - len(told):,} more problems (--json lists them)")
    lines.append(
        f"read {count(report.read, 'record')} of {args.file} ({report.source}): {verb} "
        f"{report.written:,}, {report.present:,} already present, "
        f"{report.skipped:,} skipped"
    )
    return Result(data, "\n".join(lines), 1 if report.skipped else 0)
