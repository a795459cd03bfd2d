"""``memlane pending``: what waits in the pending area, per source, and clearing it (docs/entries.md
§The pending area).  Both act on the data directory, as ``log verify`` does: no token."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING, Any

from node.cli.commands import Result, open_node
from node.cli.table import count, table
from node.windows.spans import parse_duration, spell_duration
from protocol.timefmt import fixed_millis, format_instant

if TYPE_CHECKING:
    from node.store.pending import SourceRow

__all__ = ["add_parsers"]

_LIST_HELP = "what waits in the pending area, per source: entries, bytes, oldest arrival, logs"
_CLEAR_HELP = "delete waiting entries (every source's, or one's; of any age, or older ones)"
_KEYS = ("source", "entries", "bytes", "oldest", "logs")
_HEADER = tuple(k.upper() for k in _KEYS)


def add_parsers(sub: Any) -> None:
    """Register ``pending list`` and ``pending clear``."""
    pending = sub.add_parser("pending", help="the pending area: entries waiting to attach")
    psub = pending.add_subparsers(dest="action", required=True)
    listing = psub.add_parser("list", help=_LIST_HELP, description=_LIST_HELP)
    listing.set_defaults(handler=pending_list)
    clear = psub.add_parser(
        "clear",
        help=_CLEAR_HELP,
        description=_CLEAR_HELP
        + (". A cleared entry is sent again by its peers while its gap is open."),
    )
    clear.add_argument(
        "--source", metavar="SOURCE", help="only this source's (as `pending list` names it)"
    )
    clear.add_argument(
        "--older-than",
        type=_duration,
        metavar="DURATION",
        help="only those that arrived longer ago (30m, 12h, 7d, 2w)",
    )
    clear.set_defaults(handler=pending_clear)


def _duration(text: str) -> int:
    ms = parse_duration(text)
    if ms is None:
        raise argparse.ArgumentTypeError(f"{text!r} is not a duration (30m, 12h, 7d, 2w)")
    return ms


async def pending_list(args: argparse.Namespace) -> Result:
    async with open_node(args) as node:
        rows, options = await node.pending()
    sources = [_row(r) for r in rows]
    entries, size = sum(r.entries for r in rows), sum(r.bytes for r in rows)
    limits = {
        "pending_limit": options.pending_limit,
        "pending_per_source": options.pending_per_source,
        "pending_bytes": options.pending_bytes,
        "pending_expiry_ms": options.pending_expiry_ms,
    }
    data = {"entries": entries, "bytes": size, "limits": limits, "sources": sources}
    bounds = (
        f"at most {options.pending_limit:,} entries, {options.pending_per_source:,} of "
        f"one source; {options.pending_bytes:,} bytes; each for "
        f"{_spelled(options.pending_expiry_ms)}"
    )
    if not rows:
        return Result(data, f"nothing waits in the pending area ({bounds})")
    lines = table(_HEADER, [[_source_cell(s, k) for k in _KEYS] for s in sources])
    total = f"{count(entries, 'entry', 'entries')}, {count(size, 'byte')} waiting ({bounds})"
    return Result(data, "\n".join([*lines, total]))


def _source_cell(source: dict[str, Any], key: str) -> Any:
    """A source's cell: the oldest entry's instant with three digits of millisecond."""
    return fixed_millis(source[key]) if key == "oldest" else source[key]


def _row(row: SourceRow) -> dict[str, Any]:
    return {
        "source": row.source,
        "entries": row.entries,
        "bytes": row.bytes,
        "oldest": format_instant(row.oldest),
        "logs": row.logs,
    }


def _spelled(ms: int) -> str:
    return spell_duration(ms, "smhdw") or f"{ms} ms"


async def pending_clear(args: argparse.Namespace) -> Result:
    async with open_node(args) as node:
        before = None if args.older_than is None else node.wall() - args.older_than
        cleared = await node.clear_pending(source=args.source, before=before)
    data = {"cleared": cleared, "source": args.source, "older_than_ms": args.older_than}
    return Result(data, f"cleared {count(cleared, 'entry', 'entries')} from the pending area")
