"""e_audit (DESIGN §4.5, seeds/000): the local catch-up feed.

``e_audit(action="list", since_seq=N, limit=L)`` answers the events with ``seq > N`` in seq
order, at most ``L`` of them, each with its ``seq``.  Events about an SR or an episode the
caller cannot read are left out; events about the node itself (rejections, forks, clock skew,
peers, bundle imports) are shown to the workspace's admins only.  The answer carries the feed's
``feed_id`` (it changes when the node is restored from an archive: start again from 0) and
``covered_seq``, the highest seq the answer accounts for — pass it back as ``since_seq``.
Seq values are node-wide positions, so gaps show that other events exist, never which.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from node.authority import Caller
from node.errors import Refusal
from node.store import AuditRow, Reader
from node.tools.args import check_names, integer
from protocol.timefmt import format_instant

__all__ = ["DEFAULT_LIMIT", "MAX_LIMIT", "e_audit"]

DEFAULT_LIMIT = 100
MAX_LIMIT = 1000
_CHUNK = 500
_SR_READERS = (
    "SELECT v.sr_id, v.workspace, v.owner, v.private FROM sr_versions v "
    "WHERE v.sr_id IN ({}) AND v.present = 1 "
    "AND v.ord = (SELECT max(ord) FROM sr_versions w WHERE w.sr_id = v.sr_id)"
)
_EPISODE_READERS = "SELECT id, vault, caller, 0 FROM episodes WHERE vault = ? AND id IN ({})"


async def e_audit(
    reader: Reader, feed_id: str, caller: Caller, args: Mapping[str, Any]
) -> dict[str, Any]:
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
        for row in await _visible(reader, caller, rows):
            events.append(_render(row, caller))
            if len(events) == limit:
                break
        cursor = rows[-1].seq
    covered = events[-1]["seq"] if len(events) == limit else max(top, since)
    return {"feed_id": feed_id, "events": events, "covered_seq": covered}


async def _visible(reader: Reader, caller: Caller, rows: list[AuditRow]) -> list[AuditRow]:
    subjects = sorted({r.subject for r in rows if r.subject})
    # An SR's readers by its newest version — also one whose time has not yet come — so an
    # event is judged the same however long it waits, and a consumer never passes it by.
    srs = await _lookup(reader, _SR_READERS, subjects)
    episodes = await _lookup(reader, _EPISODE_READERS, subjects, caller.workspace)

    def shown(row: AuditRow) -> bool:
        if row.workspace is not None and row.workspace != caller.workspace:
            return False
        if not row.subject:
            return caller.is_admin
        if row.subject in srs:
            workspace, owner, private = srs[row.subject]
            return caller.may_read_sr(workspace, owner, bool(private))
        if row.subject in episodes:
            vault, who, _ = episodes[row.subject]
            return vault == caller.workspace and (who == caller.principal or caller.is_admin)
        return False

    return [r for r in rows if shown(r)]


async def _lookup(
    reader: Reader, sql: str, ids: list[str], *first: str
) -> dict[str, tuple[Any, ...]]:
    found: dict[str, tuple[Any, ...]] = {}
    for start in range(0, len(ids), _CHUNK):
        chunk = ids[start : start + _CHUNK]
        sent = [*first, *chunk]
        for row in await reader.fetchall(sql.format(",".join("?" * len(chunk))), sent):
            found[row[0]] = tuple(row[1:])
    return found


def _render(row: AuditRow, caller: Caller) -> dict[str, Any]:
    event: dict[str, Any] = {
        "seq": row.seq,
        "event": row.event,
        "at": format_instant(row.at),
        "subject": row.subject,
        "entry_id": row.entry.hex() if row.entry else None,
    }
    if caller.is_admin and row.detail:
        event["detail"] = {k: (v.hex() if isinstance(v, bytes) else v)
                           for k, v in row.detail.items()}  # fmt: skip
    return event
