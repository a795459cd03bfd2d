"""``memlane bundle``: export, frontier and import of bundle files; ``memlane archive``:
create and restore a node's backup (docs/bundles.md, docs/operations.md §Backups)."""

from __future__ import annotations

import argparse
from collections.abc import Callable
from dataclasses import asdict
from pathlib import Path
from typing import Any

from node.cli.commands import LINE_LIMIT, Result, open_node, read_prefix
from node.cli.progress import BYTES, ENTRIES, bars
from node.cli.table import count

__all__ = ["add_parsers"]

_EXPORT_HELP = "write a bundle file of this node's entries, for a node that cannot sync"
_FRONTIER_HELP = "write this node's frontier, for an exporter to cut an incremental bundle"
_IMPORT_HELP = (
    "verify a bundle file whole, then apply it a chunk at a time (run again, it finishes an "
    "interrupted import)"
)
_CREATE_HELP = "back the whole node up (it may be running), its secrets under a passphrase"
_RESTORE_HELP = (
    "restore an archive into a new --data directory: a new epoch, a new audit feed id, the "
    "tokens it brings back revoked unless --keep-tokens"
)


def add_parsers(sub: Any) -> None:
    """Register ``bundle export|frontier|import`` and ``archive create|restore``."""
    bundle = sub.add_parser("bundle", help="bundle files: entries between nodes that never meet")
    bsub = bundle.add_subparsers(dest="action", required=True)
    export = _command(bsub, "export", _EXPORT_HELP, bundle_export)
    export.add_argument("out", type=Path, metavar="OUT", help="the bundle file to write")
    export.add_argument(
        "--since-frontier",
        type=Path,
        metavar="FILE",
        dest="since",
        help="only what the node that wrote this frontier file lacks",
    )
    export.add_argument(
        "--workspace", metavar="W", help="every header, but only this workspace's payloads"
    )
    frontier = _command(bsub, "frontier", _FRONTIER_HELP, bundle_frontier)
    frontier.add_argument("out", type=Path, metavar="OUT", help="the frontier file to write")
    imported = _command(bsub, "import", _IMPORT_HELP, bundle_import)
    imported.add_argument("file", type=Path, metavar="FILE", help="the bundle file")
    archive = sub.add_parser("archive", help="back a node up and restore it")
    asub = archive.add_subparsers(dest="action", required=True)
    create = _command(asub, "create", _CREATE_HELP, archive_create)
    create.add_argument("out", type=Path, metavar="OUT", help="the archive file to write")
    restore = _command(asub, "restore", _RESTORE_HELP, archive_restore)
    restore.add_argument("archive", type=Path, metavar="IN", help="the archive file")
    restore.add_argument(
        "--keep-tokens",
        action="store_true",
        help="keep the restored tokens valid (default: revoke them)",
    )
    for p in (create, restore):
        p.add_argument(
            "--passphrase-file",
            type=Path,
            metavar="F",
            required=True,
            help="a file holding the passphrase (one line)",
        )


def _command(
    sub: Any, name: str, text: str, handler: Callable[..., Any]
) -> argparse.ArgumentParser:
    parser: argparse.ArgumentParser = sub.add_parser(name, help=text, description=text)
    parser.set_defaults(handler=handler)
    return parser


async def bundle_export(args: argparse.Namespace) -> Result:
    async with open_node(args) as node:
        report = await node.export_bundle(
            args.out, since=args.since, workspace=args.workspace, progress=bars({"export": ENTRIES})
        )
    data = asdict(report) | {"path": str(report.path)}
    text = (
        f"wrote {report.path}: bundle {report.bundle_id}, "
        f"{count(report.entries, 'entry', 'entries')} ({count(report.payloads, 'payload')}), "
        f"{count(report.bytes, 'byte')}"
    )
    return Result(data, text)


async def bundle_frontier(args: argparse.Namespace) -> Result:
    async with open_node(args) as node:
        frontier = await node.write_frontier(args.out)
    logs, entries = len(frontier.tips), sum(t.seq for t in frontier.tips)
    data = {"path": str(args.out), "logs": logs, "entries": entries}
    shown = f"{count(logs, 'log')}, {count(entries, 'entry', 'entries')}"
    return Result(data, f"wrote {args.out}: {shown}")


async def bundle_import(args: argparse.Namespace) -> Result:
    async with open_node(args) as node:
        report = await node.import_bundle(
            args.file, progress=bars({"verify": BYTES, "import": BYTES})
        )
    text = (
        f"imported bundle {report.bundle_id} from {report.exporter}: {report.new:,} new, "
        f"{report.already_present:,} already present, "
        f"{count(report.payloads_filled, 'payload')} filled, {report.pending:,} pending, "
        f"{report.rejected:,} rejected"
    )
    return Result(report.detail(), text)


def _passphrase(path: Path) -> bytes:
    """The passphrase in ``path``, as ``node.transfer.archive.read_passphrase`` reads it (its
    bytes, the trailing newline dropped), but of a bounded size: a passphrase file of /dev/zero
    or /dev/urandom is refused, not read until memory runs out."""
    from node.transfer.archive import ArchiveError

    head = read_prefix(path, "the passphrase file")
    if len(head) > LINE_LIMIT:
        raise ArchiveError(f"the passphrase file {path} is longer than {LINE_LIMIT:,} bytes")
    passphrase = head.rstrip(b"\r\n")
    if not passphrase:
        raise ArchiveError(f"the passphrase file {path} is empty")
    return passphrase


async def archive_create(args: argparse.Namespace) -> Result:
    passphrase = _passphrase(args.passphrase_file)
    async with open_node(args) as node:
        report = await node.create_archive(
            args.out, passphrase, progress=bars({"snapshot": "store", "write": BYTES})
        )
    data = asdict(report) | {"path": str(report.path)}
    return Result(
        data, f"wrote {report.path}: node {report.node_id}, {count(report.bytes, 'byte')}"
    )


async def archive_restore(args: argparse.Namespace) -> Result:
    from node.node import Node

    passphrase = _passphrase(args.passphrase_file)
    report = await Node.restore_archive(
        args.archive,
        args.data,
        passphrase,
        keep_tokens=args.keep_tokens,
        progress=bars({"unpack": BYTES}),
    )
    data = asdict(report) | {"path": str(report.path)}
    text = (
        f"restored node {report.node_id} into {report.path}: new epoch {report.epoch}, "
        f"new audit feed {report.feed_id}, {count(report.tokens, 'token')} "
        f"({report.tokens_revoked:,} revoked)"
    )
    return Result(data, text)
