"""``memlane search``: the vector index of find's semantic leg — how far it is filled, and
filling it again in the foreground (docs/search.md §The vector index and fusion).

Both open the node without the background worker: ``status`` reports what is stored, and
``rebuild`` embeds the whole queue itself.  Neither needs a token: they act on the data
directory, as ``log verify`` does.
"""

from __future__ import annotations

import argparse
import time
from typing import TYPE_CHECKING, Any

from node.cli.commands import Result, open_node
from node.cli.progress import bars
from node.cli.table import count
from node.errors import ConfigError, EmbedderError, EmbedderUnavailable
from node.progress import Progress
from node.views.sr_queries import count_live

if TYPE_CHECKING:  # numpy and the embedders load only where an embedder is configured
    from node.node import Node
    from node.search.index import VectorIndex

__all__ = ["add_parsers"]

_STATUS_HELP = "what the vector index holds: embedder and model, vectors, what waits"
_REBUILD_HELP = "drop the vector index and embed every SR again now, in the foreground"
_NO_EMBEDDER = (
    'no embedder is configured (find ranks by BM25 alone): set [search] embedder = "wordllama" '
    '(or "endpoint", with url and model) in config.toml; docs/search.md'
)
_PROBE = "memlane search rebuild"  # embedded once before anything is dropped


def add_parsers(sub: Any) -> None:
    """Register ``search status`` and ``search rebuild``."""
    search = sub.add_parser("search", help="the vector index of find's semantic leg")
    ssub = search.add_subparsers(dest="action", required=True)
    for name, text, handler in (
        ("status", _STATUS_HELP, search_status),
        ("rebuild", _REBUILD_HELP, search_rebuild),
    ):
        parser = ssub.add_parser(name, help=text, description=text)
        parser.set_defaults(handler=handler)


async def search_status(args: argparse.Namespace) -> Result:
    async with open_node(args, embed=False) as node:
        srs = await _live_srs(node)
        if node.vectors is None:
            data = {
                "embedder": "none",
                "model": None,
                "stored": None,
                "vectors": 0,
                "queued": 0,
                "srs": srs,
                "last_error": None,
            }
            return Result(data, f"embedder: none: find ranks by BM25 alone\nSRs: {srs:,}")
        status = await node.vectors.status()
    data = {
        "embedder": node.config.search.embedder,
        "model": status.model,
        "stored": status.stored,
        "vectors": status.vectors,
        "queued": status.queued,
        "srs": srs,
        "last_error": status.last_error,
    }
    lines = [
        f"embedder: {data['embedder']} ({status.model})",
        f"vectors: {status.vectors:,} of {count(srs, 'SR')}",
        f"queued: {status.queued:,} waiting to be embedded",
    ]
    if status.stored != status.model:
        lines.append(
            f"stored: an index of {status.stored or 'no model'}, made anew by "
            "memlane serve or memlane search rebuild"
        )
    if status.last_error:
        lines.append(f"last error: {status.last_error}")
    return Result(data, "\n".join(lines))


async def search_rebuild(args: argparse.Namespace) -> Result:
    async with open_node(args, embed=False) as node:
        index = node.vectors
        if index is None:
            raise ConfigError(_NO_EMBEDDER)
        started = time.monotonic()
        await _probe(index)
        await index.rebuild()
        total = (await index.status()).queued
        embedded = await _embed_all(index, total, bars({"embed": "SRs"}))
        seconds = round(time.monotonic() - started, 2)
        status = await index.status()
    data = {
        "model": status.model,
        "embedded": embedded,
        "vectors": status.vectors,
        "queued": status.queued,
        "seconds": seconds,
    }
    text = (
        f"embedded {count(embedded, 'SR')} in {seconds:.1f} s: "
        f"{count(status.vectors, 'vector')} ({status.model})"
    )
    return Result(data, text)


async def _live_srs(node: Node) -> int:
    return await count_live(node.reader())


async def _probe(index: VectorIndex) -> None:
    """Refuse before the index is dropped if the embedder cannot embed at all."""
    try:
        await index.query(_PROBE)
    except EmbedderError as exc:
        raise EmbedderUnavailable(
            f"cannot embed with {index.embedder.model}: {exc}; the index is unchanged"
        ) from exc


async def _embed_all(index: VectorIndex, total: int, show: Progress | None) -> int:
    """Step the queue until it is empty; how many queued docs were taken."""
    done = 0
    try:
        while taken := await index.step():
            done += taken
            if show is not None:
                show("embed", done, max(total, done))  # others may write meanwhile: it grows
    except EmbedderError as exc:
        raise EmbedderUnavailable(
            f"embedding stopped after {done:,} of {total:,} SRs: {exc}; the rest wait in the "
            "queue and find ranks them by BM25 until they are embedded (run this again, or "
            "let `memlane serve` embed them)"
        ) from exc
    if show is not None:
        show("embed", done, done)
    return done
