"""What other rooms read of the SR view (node/views/srs.py), as named statements: a traverse's
anchor and the SRs linked to it (e_timeline), who may read an SR by its newest version (the
audit feed), how many SRs are shown (``memlane search status``), and what the vector index
embeds (node/search/index.py) — the docs ``sr_embed_queue`` lists, which triggers on ``srs``
keep (node/search/schema.py), with their SRs' text.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from node.access.callers import Caller
from node.store import Reader
from node.store.txn import Txn
from node.views.read_rule import readable_srs
from node.views.timeline import Page, Query, select_page

__all__ = [
    "count_live",
    "has_readable",
    "queue_live",
    "select_embedded",
    "select_linked",
    "select_queued",
    "select_sr_readers",
]

# The anchor's neighbours lead the plan (CROSS JOIN fixes the order): looked up by sr_id, then
# sorted — rather than walking the time index over every readable SR to find a few of them.
_LINKED = (
    "(SELECT dst AS sr_id FROM sr_links WHERE src = ? "
    "UNION SELECT src FROM sr_links WHERE dst = ?) AS linked "
    "CROSS JOIN srs ON srs.sr_id = linked.sr_id"
)
_SR_READERS = (
    "SELECT v.sr_id, v.workspace, v.owner, v.private FROM sr_versions v "
    "WHERE v.sr_id IN ({}) AND v.present = 1 "
    "AND v.ord = (SELECT max(ord) FROM sr_versions w WHERE w.sr_id = v.sr_id)"
)
_QUEUED = (
    "SELECT q.doc, s.sr_id, s.title, s.text, s.tags_text FROM sr_embed_queue q "
    "LEFT JOIN srs s ON s.doc = q.doc AND s.live = 1 ORDER BY q.doc DESC LIMIT ?"
)


async def has_readable(reader: Reader, caller: Caller, sr_id: str) -> bool:
    """Whether ``caller`` may read the SR ``sr_id`` as shown at this moment."""
    rule, params = readable_srs(caller)
    found = await reader.scalar(
        f"SELECT count(*) FROM srs WHERE srs.sr_id = ? AND {rule}",  # noqa: S608
        (sr_id, *params),
    )
    return bool(found)


async def select_linked(reader: Reader, q: Query, anchor: str) -> Page:
    """One page of the SRs linked from ``anchor`` or linking to it (depth 1) that the caller
    can read."""
    return await select_page(reader, q, extra=["srs.sr_id != ?"], extra_args=[anchor],
                             source=_LINKED, source_args=[anchor] * 2)  # fmt: skip


async def select_sr_readers(reader: Reader, sr_ids: Sequence[str]) -> dict[str, tuple[Any, ...]]:
    """Of ``sr_ids`` (one statement's worth), each SR's workspace, owner and privacy by its
    newest version — also one whose time has not yet come."""
    rows = await reader.fetchall(_SR_READERS.format(",".join("?" * len(sr_ids))), list(sr_ids))
    return {row[0]: tuple(row[1:]) for row in rows}


async def count_live(reader: Reader) -> int:
    """How many SRs are shown at this moment (deleted here or not)."""
    return int(await reader.scalar("SELECT count(*) FROM srs WHERE live = 1"))


async def select_queued(reader: Reader, *, limit: int) -> list[Any]:
    """The newest ``limit`` docs waiting to be embedded, each as (doc, sr_id, title, text,
    tags_text) — the SR's fields None when no SR is shown at that doc any more."""
    return await reader.fetchall(_QUEUED, (limit,))


def queue_live(txn: Txn) -> None:
    """Queue every shown SR's doc to be embedded."""
    txn.add("INSERT INTO sr_embed_queue (doc) SELECT doc FROM srs WHERE live = 1", ())


async def select_embedded(txn: Txn, doc: int, sr_id: str | None) -> Any | None:
    """The title, text and tags of the SR ``sr_id`` shown at ``doc``, or None."""
    return await txn.fetchone(
        "SELECT title, text, tags_text FROM srs WHERE doc = ? AND sr_id IS ? AND live = 1",
        (doc, sr_id),
    )
