"""What other rooms read of the SR view (node/views/srs.py), as named statements: a traverse's
anchor and the SRs linked to it (e_timeline), which SRs a caller reads are private (the web
view's badge), who may read an SR by its newest version (the
audit feed), how many SRs are shown (``memlane search status``), and what the vector index
embeds (node/search): the docs of the shown SRs, and the SR shown at a doc with its text.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from node.access.callers import Caller
from node.store import Reader
from node.store.writer import Txn
from node.views.read_rule import readable_srs
from node.views.timeline import Page, Query, select_page

__all__ = [
    "LIVE_DOCS",
    "SHOWN_COLUMNS",
    "count_live",
    "has_readable",
    "select_embedded",
    "select_linked",
    "select_readable",
    "select_sr_readers",
    "shown_at",
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
# The docs of the SRs shown at this moment; and, joined on a doc column (``shown_at``), the SR
# shown there as ``SHOWN_COLUMNS`` (its id, title, text and tags; all None when none is).
LIVE_DOCS = "SELECT doc FROM srs WHERE live = 1"
SHOWN_COLUMNS = "s.sr_id, s.title, s.text, s.tags_text"


def shown_at(doc: str) -> str:
    """The join that brings ``SHOWN_COLUMNS`` to the rows whose doc column is ``doc``."""
    return f"LEFT JOIN srs s ON s.doc = {doc} AND s.live = 1"


async def has_readable(reader: Reader, caller: Caller, sr_id: str) -> bool:
    """Whether ``caller`` may read the SR ``sr_id`` as shown at this moment."""
    rule, params = readable_srs(caller)
    found = await reader.scalar(
        f"SELECT count(*) FROM srs WHERE srs.sr_id = ? AND {rule}",  # noqa: S608
        (sr_id, *params),
    )
    return bool(found)


async def select_readable(
    reader: Reader, caller: Caller, sr_ids: Sequence[str], *, private: bool = False
) -> set[str]:
    """Those of ``sr_ids`` that ``caller`` may read as shown at this moment (``private``:
    and that are private)."""
    if not sr_ids:
        return set()
    rule, params = readable_srs(caller)
    marks = ",".join("?" * len(sr_ids))
    only = " AND srs.private = 1" if private else ""
    found = await reader.fetchall(
        f"SELECT sr_id FROM srs WHERE srs.sr_id IN ({marks}){only} AND {rule}",  # noqa: S608
        (*sr_ids, *params),
    )
    return {row[0] for row in found}


async def select_linked(reader: Reader, q: Query, anchor: str) -> Page:
    """One page of the SRs linked from ``anchor`` or linking to it (depth 1) that the caller
    can read."""
    return await select_page(
        reader,
        q,
        extra=["srs.sr_id != ?"],
        extra_args=[anchor],
        source=_LINKED,
        source_args=[anchor] * 2,
    )


async def select_sr_readers(reader: Reader, sr_ids: Sequence[str]) -> dict[str, tuple[Any, ...]]:
    """Of ``sr_ids`` (one statement's worth), each SR's workspace, owner and privacy by its
    newest version — also one whose time has not yet come — or, for an erased SR, as it was
    when erased (its ``sr_erased`` event is shown to those who could read it)."""
    rows = await reader.fetchall(_SR_READERS.format(",".join("?" * len(sr_ids))), list(sr_ids))
    found = {row[0]: tuple(row[1:]) for row in rows}
    if len(found) < len(sr_ids):
        found |= await reader.select_erased(sr_ids)
    return found


async def count_live(reader: Reader) -> int:
    """How many SRs are shown at this moment (deleted here or not)."""
    return int(await reader.scalar("SELECT count(*) FROM srs WHERE live = 1"))


async def select_embedded(txn: Txn, doc: int, sr_id: str | None) -> Any | None:
    """The title, text and tags of the SR ``sr_id`` shown at ``doc``, or None."""
    return await txn.fetchone(
        "SELECT title, text, tags_text FROM srs WHERE doc = ? AND sr_id IS ? AND live = 1",
        (doc, sr_id),
    )
