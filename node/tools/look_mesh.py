"""The look ``mesh`` (docs/web.md §Pages): the node as its workspace's admins see it — its id
and mesh, its logs and their heads (writer, epoch, last seq, head entry), the mesh's members
as the authority's log has them, the peers of the snapshot ``memlane serve`` keeps in the
store (``node.mesh.service``: state, lag, last error, as of the snapshot's moment; none when
sync never ran here), and the latest ``AUDIT_EVENTS`` events of the audit feed that e_audit
shows the caller, newest first.  Needs ``admin:workspace``, refused as every tool refuses it.

The logs, members and peers are the node's, not a workspace's: what sync and ``memlane mesh
members`` / ``memlane peers`` show an operator.  The audit events are e_audit's own answer.
"""

from __future__ import annotations

import json
from collections import deque
from collections.abc import Mapping
from typing import Any

from node.access.callers import Caller
from node.identity import node_id
from node.members.membership import Member, Membership
from node.members.mesh import PEERS_STATE
from node.store import LogRow
from node.tools.args import check_names
from node.tools.audit import MAX_LIMIT, e_audit
from node.tools.context import ToolContext
from protocol.timefmt import format_instant

__all__ = ["AUDIT_EVENTS", "look_mesh"]

AUDIT_EVENTS = 50


async def look_mesh(ctx: ToolContext, caller: Caller, args: Mapping[str, Any]) -> dict[str, Any]:
    check_names("mesh", args, frozenset())
    caller.require("admin:workspace")
    own = ctx.author.key.public
    membership = ctx.store.membership
    members = membership.members() if isinstance(membership, Membership) else []
    authority = membership.authority if membership is not None else None
    logs = await ctx.reader().select_logs()
    return {
        "node_id": node_id(own),
        "mesh": ctx.author.mesh.hex(),
        "logs": [_log(row, own, authority) for row in logs],
        "members": [_member(m, own) for m in members],
        **await _peers(ctx),
        "audit": await _latest_audit(ctx, caller, AUDIT_EVENTS),
    }


def _log(row: LogRow, own: bytes, authority: bytes | None) -> dict[str, Any]:
    role = "this node" if row.writer == own else "authority" if row.writer == authority else None
    return {
        "writer": node_id(row.writer),
        "role": role,
        "epoch": row.epoch.hex(),
        "head_seq": row.head_seq,
        "head_id": row.head_id.hex() if row.head_id else None,
        "forked_at": row.forked_at,
    }


def _member(member: Member, own: bytes) -> dict[str, Any]:
    cut = member.revoked
    return {
        "node_id": member.node_id,
        "label": member.label,
        "workspaces": list(member.workspaces),
        "max_logs": member.max_logs,
        "this_node": member.key == own,
        "cert_expires": format_instant(member.cert_expires) if member.added_at else None,
        "revoked": None if cut is None else format_instant(cut.at),
    }


async def _peers(ctx: ToolContext) -> dict[str, Any]:
    """The saved peer snapshot: whether sync serves, where it listens, as of when, its peers."""
    raw = await ctx.reader().state(PEERS_STATE)
    saved: dict[str, Any] = json.loads(raw) if raw is not None else {}
    at = saved.get("at")
    peers = [
        {
            **p,
            "connected_at": None
            if p.get("connected_at") is None
            else format_instant(p["connected_at"]),
        }
        for p in saved.get("peers", [])
    ]
    return {
        "sync": {
            "serving": saved.get("serving", False),
            "listen": saved.get("listen"),
            "at": None if at is None else format_instant(at),
        },
        "peers": peers,
    }


async def _latest_audit(ctx: ToolContext, caller: Caller, n: int) -> list[dict[str, Any]]:
    """The newest ``n`` events e_audit shows ``caller``, newest first: the feed read forward
    from ever earlier seqs until ``n`` are shown or it is read whole — which events are shown
    depends on the shown events alone, only the work on the others."""
    top, span = await ctx.reader().max_audit_seq(), n
    while True:
        since = max(0, top - span)
        events = await _events_after(ctx, caller, since, n)
        if len(events) == n or since == 0:
            return events[::-1]
        span *= 4


async def _events_after(
    ctx: ToolContext, caller: Caller, since: int, n: int
) -> list[dict[str, Any]]:
    """The last ``n`` events e_audit shows ``caller`` after seq ``since``, oldest first."""
    kept: deque[dict[str, Any]] = deque(maxlen=n)
    while True:
        answer = await e_audit(ctx, caller, {"since_seq": since, "limit": MAX_LIMIT})
        kept.extend(answer["events"])
        if len(answer["events"]) < MAX_LIMIT:
            return list(kept)
        since = answer["covered_seq"]
