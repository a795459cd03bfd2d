"""e_audit (docs/tools/e_audit.md): the local catch-up feed.

``e_audit(action="list", since_seq=N, limit=L)`` answers the events with ``seq > N`` in seq
order, at most ``L`` of them, each with its ``seq``.  Events about an SR or an episode the
caller cannot read are left out; events about the node itself (rejections, forks, clock skew,
peers) are shown to the workspace's admins only.  A bundle import is one event, shown to each
caller who may read something it brought, with counts of only that (``_brought``).  The
answer carries the feed's
``feed_id`` (it changes when the node is restored from an archive: start again from 0) and
``covered_seq``, the highest seq the answer accounts for — pass it back as ``since_seq``.
Seq values are node-wide positions, so gaps show that other events exist, never which.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from typing import Any

from node.access.callers import Caller
from node.errors import Refusal
from node.store import AuditEvent, AuditRow, Reader
from node.tools.args import check_names, integer
from node.tools.context import ToolContext
from node.views.episode_reads import select_episode_readers
from node.views.read_rule import may_read_sr
from node.views.sr_queries import select_sr_readers
from protocol.timefmt import format_instant

__all__ = ["DEFAULT_LIMIT", "MAX_LIMIT", "e_audit"]

DEFAULT_LIMIT = 100
MAX_LIMIT = 1000
_CHUNK = 500
# Who may read a chunk of subjects: each id found, with the columns the read rule judges.
_Select = Callable[[list[str]], Awaitable[dict[str, tuple[Any, ...]]]]


async def e_audit(ctx: ToolContext, caller: Caller, args: Mapping[str, Any]) -> dict[str, Any]:
    reader = ctx.reader()
    check_names("e_audit", args, frozenset({"action", "since_seq", "limit"}))
    if args.get("action", "list") != "list":
        raise Refusal(f"invalid action: e_audit knows only list, not {args.get('action')!r}")
    since = integer(args, "since_seq", 0, 1 << 62, 0)
    limit = integer(args, "limit", 1, MAX_LIMIT, DEFAULT_LIMIT)
    caller.require("read:workspace")
    top = await reader.max_audit_seq()
    events: list[dict[str, Any]] = []
    cursor = since
    while cursor < top and len(events) < limit:
        rows = [r for r in await reader.select_audit(gt=cursor, limit=_CHUNK) if r.seq <= top]
        if not rows:
            break
        for row, detail in await _visible(reader, caller, rows):
            events.append(_render(row, detail))
            if len(events) == limit:
                break
        cursor = rows[-1].seq
    covered = events[-1]["seq"] if len(events) == limit else max(top, since)
    return {"feed_id": ctx.feed_id, "events": events, "covered_seq": covered}


async def _visible(
    reader: Reader, caller: Caller, rows: list[AuditRow]
) -> list[tuple[AuditRow, dict[str, Any] | None]]:
    """The rows shown to ``caller``, each with the detail it is shown."""
    srs, episodes = await _readable(reader, caller, {r.subject for r in rows if r.subject})
    shown: list[tuple[AuditRow, dict[str, Any] | None]] = []
    for row in rows:
        if row.event == AuditEvent.BUNDLE_IMPORTED:
            part = await _brought(reader, caller, row)
            if part is not None:
                shown.append((row, part))
        elif _shown(row, caller, srs | episodes):
            shown.append((row, _detail(row, caller)))
    return shown


def _shown(row: AuditRow, caller: Caller, readable: set[str]) -> bool:
    if row.workspace is not None and row.workspace != caller.workspace:
        return False
    return row.subject in readable if row.subject else caller.is_admin


async def _readable(
    reader: Reader, caller: Caller, subjects: set[str]
) -> tuple[set[str], set[str]]:
    """Of ``subjects``, the SRs and the episodes ``caller`` may read.  An SR's readers are
    judged by its newest version — also one whose time has not yet come — so an event is judged
    the same however long it waits, and a consumer never passes it by."""
    ids = sorted(subjects)
    srs = await _lookup(lambda chunk: select_sr_readers(reader, chunk), ids)
    episodes = await _lookup(
        lambda chunk: select_episode_readers(reader, caller.workspace, chunk),
        [i for i in ids if i not in srs],
    )
    return (
        {
            i
            for i, (workspace, owner, private) in srs.items()
            if may_read_sr(caller, workspace, owner, bool(private))
        },
        {
            i
            for i, (vault, who, _) in episodes.items()
            if vault == caller.workspace and (who == caller.principal or caller.is_admin)
        },
    )


async def _brought(reader: Reader, caller: Caller, row: AuditRow) -> dict[str, int] | None:
    """A bundle import as ``caller`` sees it: the entries with content it brought that the
    caller may read, and their SRs and episodes; None when it brought the caller nothing.
    Read a chunk of subjects at a time, so an import of millions holds no more."""
    key, after = row.detail.get("subjects"), ""
    counts = {"entries": 0, "srs": 0, "episodes": 0}
    while isinstance(key, bytes):
        brought = await reader.select_bundle_subjects(key, after=after, limit=_CHUNK)
        if not brought:
            break
        srs, episodes = await _readable(reader, caller, set(brought))
        counts["entries"] += sum(brought[s] for s in srs | episodes)
        counts["srs"] += len(srs)
        counts["episodes"] += len(episodes)
        after = max(brought)
    return counts if counts["entries"] else None


def _detail(row: AuditRow, caller: Caller) -> dict[str, Any] | None:
    """An event's own detail, for admins (bytes as hex)."""
    if not caller.is_admin or not row.detail:
        return None
    return {k: (v.hex() if isinstance(v, bytes) else v) for k, v in row.detail.items()}


async def _lookup(select: _Select, ids: list[str]) -> dict[str, tuple[Any, ...]]:
    found: dict[str, tuple[Any, ...]] = {}
    for start in range(0, len(ids), _CHUNK):
        found.update(await select(ids[start : start + _CHUNK]))
    return found


def _render(row: AuditRow, detail: dict[str, Any] | None) -> dict[str, Any]:
    event: dict[str, Any] = {
        "seq": row.seq,
        "event": row.event,
        "at": format_instant(row.at),
        "subject": row.subject,
        "entry_id": row.entry.hex() if row.entry else None,
    }
    if detail:
        event["detail"] = detail
    return event
