"""What ``memlane export`` and ``memlane import`` read of the views (docs/export.md): every SR
and every episode a caller may read at one moment, a page at a time, in an order that does not
move while the pages are read — keyset paging, so an export of a million SRs reads each row
once; and which of an import's records this node holds already.

SRs pass the read rule exactly as e_timeline applies it (``readable_srs``) and go in ingest
time order, then ``sr_id``; each is shown as e_timeline shows it, with its visibility and the
SRs it links to that the caller may read too (a link to one it may not is not shown, as a
traverse does not show it).  Episodes pass as work_episodes lists them (the caller's own; with
``admin:workspace`` every caller's of the workspace) and go by caller, then as each caller's
chain runs (``ts``, then the fold's order); a ``prev_id`` is kept only when the episode it
names passes too.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from node.access.callers import Caller
from node.store import Reader
from node.views.episode_reads import COLUMNS, Scope, columns_of, shown_episode
from node.views.read_rule import readable_srs
from node.views.shown import shown_from_blob

__all__ = ["EpisodeKey", "SrKey", "count_srs", "select_episodes", "select_present", "select_srs"]

SrKey = tuple[int, str]  # (ingest_time, sr_id) of the last SR of a page
EpisodeKey = tuple[str, int, bytes]  # (caller, ts, ord) of the last episode of a page


def _srs(rule: str, since: bool) -> str:
    after = " AND srs.ingest_time >= ?" if since else ""
    return (
        "SELECT srs.ingest_time, srs.sr_id, srs.private, srs.shown FROM srs "  # noqa: S608
        f"WHERE {rule} AND (srs.ingest_time, srs.sr_id) > (?, ?){after} "
        "ORDER BY srs.ingest_time, srs.sr_id LIMIT ?"
    )


async def count_srs(reader: Reader, caller: Caller, *, since: int | None) -> int:
    """How many SRs ``select_srs`` pages through (what a progress counts to)."""
    rule, params = readable_srs(caller)
    after = "" if since is None else " AND srs.ingest_time >= ?"
    args = (*params, *(() if since is None else (since,)))
    return int(await reader.scalar(f"SELECT count(*) FROM srs WHERE {rule}{after}", args))  # noqa: S608


def _links(rule: str, count: int) -> str:
    return (
        "SELECT l.src, l.dst FROM sr_links l CROSS JOIN srs ON srs.sr_id = l.dst "  # noqa: S608
        f"WHERE l.src IN ({','.join('?' * count)}) AND {rule} ORDER BY l.src, l.dst"
    )


async def select_srs(
    reader: Reader, caller: Caller, *, after: SrKey | None, since: int | None, limit: int
) -> tuple[list[dict[str, Any]], SrKey | None]:
    """The next ``limit`` SRs ``caller`` may read after ``after`` (ingested at ``since`` or
    later, when given), each as exported; and the key of the last (None: no more)."""
    rule, params = readable_srs(caller)
    start = after or (-1, "")
    args = (*params, *start, *(() if since is None else (since,)), limit)
    rows = await reader.fetchall(_srs(rule, since is not None), args)
    if not rows:
        return [], None
    links = await _linked(reader, rule, params, [r[1] for r in rows])
    out = [
        shown_from_blob(shown)
        | {"visibility": "private" if private else "workspace", "links": links.get(sr_id, [])}
        for _, sr_id, private, shown in rows
    ]
    return out, (rows[-1][0], rows[-1][1])


async def _linked(
    reader: Reader, rule: str, params: tuple[str, ...], sr_ids: Sequence[str]
) -> dict[str, list[str]]:
    """The readable SRs each of ``sr_ids`` links to, in ``sr_id`` order."""
    links: dict[str, list[str]] = {}
    for start in range(0, len(sr_ids), 500):
        chunk = sr_ids[start : start + 500]
        for src, dst in await reader.fetchall(_links(rule, len(chunk)), (*chunk, *params)):
            links.setdefault(src, []).append(dst)
    return links


def _episodes(scope: Scope, since: bool) -> str:
    after = " AND e.ts >= :since" if since else ""
    return (
        f"SELECT {columns_of('e')}, {scope.passes('p')}, e.ord FROM episodes e "  # noqa: S608
        "LEFT JOIN episodes p ON p.vault = e.vault AND p.id = e.prev_id "
        f"WHERE {scope.passes('e')} AND (e.caller, e.ts, e.ord) > (:caller, :ts, :ord){after} "
        "ORDER BY e.caller, e.ts, e.ord LIMIT :limit"
    )


async def select_episodes(
    reader: Reader, scope: Scope, *, after: EpisodeKey | None, since: int | None, limit: int
) -> tuple[list[dict[str, Any]], EpisodeKey | None]:
    """The next ``limit`` episodes that pass ``scope`` after ``after`` (recorded at ``since``
    or later, when given), each with the fields of a detailed chain; and the key of the last
    (None: no more)."""
    caller, ts, ord_ = after or ("", -1, b"")
    args = scope.args() | {"caller": caller, "ts": ts, "ord": ord_, "limit": limit, "since": since}
    rows = await reader.fetchall(_episodes(scope, since is not None), args)
    if not rows:
        return [], None
    width = len(COLUMNS)
    out = [shown_episode(r[:width], bool(r[width])) for r in rows]
    last = rows[-1]
    return out, (last[COLUMNS.index("caller")], last[COLUMNS.index("ts")], bytes(last[-1]))


_PRESENT = {
    "sr": "SELECT sr_id FROM srs WHERE workspace = ? AND sr_id IN ({})",
    "episode": "SELECT id FROM episodes WHERE vault = ? AND id IN ({})",
}


async def select_present(reader: Reader, workspace: str, what: str, ids: Sequence[str]) -> set[str]:
    """Which of ``ids`` name an SR (``what`` "sr") or an episode ("episode") of ``workspace``
    that this node holds — shown, due later, deleted here or forgotten alike: an import's
    records already written."""
    found: set[str] = set()
    for start in range(0, len(ids), 500):
        chunk = list(ids[start : start + 500])
        sql = _PRESENT[what].format(",".join("?" * len(chunk)))
        found.update(row[0] for row in await reader.fetchall(sql, (workspace, *chunk)))
    return found
