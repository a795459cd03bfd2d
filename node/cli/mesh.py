"""``memlane mesh``: invites, members and revocation, on the authority node; ``memlane
peers``: the peer table ``memlane serve`` keeps (docs/mesh.md)."""

from __future__ import annotations

import argparse
import time
from typing import TYPE_CHECKING, Any

from node.cli.commands import Result, open_node
from node.cli.table import table
from node.cli.times import expiry
from node.errors import ConfigError
from protocol.timefmt import fixed_millis, format_instant

if TYPE_CHECKING:  # the mesh's code loads when a command reads it, not to parse a command line
    from node.members.membership import Member

__all__ = ["add_parsers"]

_INVITE_HELP = "print a signed invite to this mesh, valid once and for a while"
_MEMBERS_HELP = "list the nodes the authority's log has admitted or revoked"
_PEERS_HELP = "list the sync peers of this node's `memlane serve`: state, lag, last error"
_GRANT_HELP = (
    "change how many logs a member may hold, or the workspaces whose payloads it holds (its "
    "grant is otherwise kept)"
)
_HOLDS_HELP = (
    "the workspaces whose payloads the node holds, comma-separated (default: *, all); it "
    "holds every header whatever this says (docs/partial.md)"
)
_REVOKE_HELP = (
    "revoke a member: entries it writes after the last one this node has accepted from it "
    "are refused everywhere the revocation reaches"
)


def add_parsers(sub: Any) -> None:
    """Register ``mesh invite``, ``mesh members``, ``mesh grant``, ``mesh revoke``, ``peers``."""
    mesh = sub.add_parser("mesh", help="the mesh: invites, members, revocation")
    msub = mesh.add_subparsers(dest="action", required=True)
    invite = msub.add_parser(
        "invite",
        help=_INVITE_HELP,
        description=_INVITE_HELP
        + (
            ". The joiner redeems it with the authority node, which admits its key and "
            "issues its certificate."
        ),
    )
    invite.add_argument(
        "--workspaces",
        nargs="+",
        metavar="W",
        default=["*"],  # all of them
        help="the workspaces the joiner may write (default: *, all)",
    )
    invite.add_argument(
        "--expires",
        type=expiry,
        default="24h",
        metavar="WHEN",
        help="how long it stays valid: a duration (30m, 24h, 7d, 2w; default "
        "24h), or until an instant or YYYY-MM-DD (midnight UTC)",
    )
    invite.add_argument("--label", help="a name for the joiner, kept with its membership")
    invite.add_argument("--holds", type=_names, metavar="W1,W2", help=_HOLDS_HELP)
    invite.set_defaults(handler=mesh_invite)
    members = msub.add_parser("members", help=_MEMBERS_HELP, description=_MEMBERS_HELP)
    members.set_defaults(handler=mesh_members)
    grant = msub.add_parser(
        "grant",
        help=_GRANT_HELP,
        description=_GRANT_HELP + (". Every node applies it to the logs it receives from then on."),
    )
    grant.add_argument("node", metavar="NODE_ID", help="the member's node id (or key in hex)")
    grant.add_argument(
        "--max-logs",
        type=int,
        metavar="N",
        help="how many logs (epochs) it may hold: 1 to 100000 (default 64)",
    )
    grant.add_argument(
        "--holds",
        type=_names,
        metavar="W1,W2",
        help=_HOLDS_HELP + ("; a node whose set shrinks erases the payloads it no longer holds"),
    )
    grant.set_defaults(handler=mesh_grant)
    revoke = msub.add_parser("revoke", help=_REVOKE_HELP, description=_REVOKE_HELP)
    revoke.add_argument("node", metavar="NODE_ID", help="the member's node id (or key in hex)")
    revoke.set_defaults(handler=mesh_revoke)
    peers = sub.add_parser(
        "peers",
        help=_PEERS_HELP,
        description=_PEERS_HELP
        + (". Read from the snapshot the serving node saves every few seconds and when it stops."),
    )
    peers.set_defaults(handler=peers_list)


def _names(text: str) -> list[str]:
    names = [name.strip() for name in text.split(",")]
    if not all(names):
        raise argparse.ArgumentTypeError("a comma-separated list of workspace names, or *")
    return names


async def mesh_invite(args: argparse.Namespace) -> Result:
    async with open_node(args) as node:
        text = node.membership.create_invite(
            workspaces=args.workspaces,
            label=args.label,
            expires=args.expires.at(node.wall()),
            holds=args.holds,
        )
    from node.members import invites

    invite = invites.read(text)
    data = {
        "invite": text,
        "invite_id": invite.invite_id.hex(),
        "mesh": invite.mesh.hex(),
        "workspaces": list(invite.workspaces),
        "expires": format_instant(invite.expires),
        "label": invite.label,
        "holds": list(invite.holds or ("*",)),
    }
    return Result(data, text)


async def mesh_members(args: argparse.Namespace) -> Result:
    from node.replica import peer_features

    async with open_node(args) as node:
        members, own = node.membership.members(), node.info.public_key
        offered = {m.key: await peer_features(node.store, m.key) for m in members}
    rows = [
        _row(m, m.key == own) | {"erases": _erases(m.key == own, offered[m.key])} for m in members
    ]
    return Result(rows, "\n".join(table(_MEMBERS, [_cells(r) for r in rows])) or "no members")


def _erases(own: bool, offered: tuple[str, ...] | None) -> bool | None:
    """Whether the node applies ``sr.erase`` (docs/erasure.md): this node does; another, as its
    last hello to this node said; None when it never connected here."""
    from node.store.erasure import ERASE

    if own:
        return True
    return None if offered is None else ERASE in offered


async def mesh_grant(args: argparse.Namespace) -> Result:
    if args.max_logs is None and args.holds is None:
        raise ConfigError("say what changes: --max-logs N, --holds W1,W2, or both")
    async with open_node(args) as node:
        member = await node.membership.regrant(args.node, max_logs=args.max_logs, holds=args.holds)
    holds = ",".join(member.holds)
    text = f"{member.node_id} may hold {member.max_logs} logs and the payloads of {holds}"
    return Result(_row(member, False), text)


async def mesh_revoke(args: argparse.Namespace) -> Result:
    async with open_node(args) as node:
        member = await node.membership.revoke_member(args.node)
    row = _row(member, False)
    cut = row["revoked"]
    text = f"revoked {member.node_id} after {_cutoff(cut)}"
    return Result(row, text)


def _row(member: Member, own: bool) -> dict[str, Any]:
    cut = member.revoked
    revoked = (
        None
        if cut is None
        else {
            "at": format_instant(cut.at),
            "epoch": cut.epoch.hex() if cut.epoch else None,
            "seq": cut.seq,
        }
    )
    return {
        "node_id": member.node_id,
        "key": member.key.hex(),
        "label": member.label,
        "workspaces": list(member.workspaces),
        "holds": list(member.holds),
        "max_logs": member.max_logs,
        "this_node": own,
        "cert_expires": format_instant(member.cert_expires) if member.added_at else None,
        "revoked": revoked,
    }


def _cutoff(cut: dict[str, Any]) -> str:
    if cut["epoch"] is None:
        return "nothing (no entry of it was accepted)"
    return f"seq {cut['seq']} of epoch {cut['epoch']}"


_MEMBERS = (
    "NODE ID",
    "WORKSPACES",
    "HOLDS",
    "MAX LOGS",
    "CERT EXPIRES",
    "LABEL",
    "THIS NODE",
    "ERASES",
    "REVOKED",
)


def _cells(row: dict[str, Any]) -> list[Any]:
    cut = row["revoked"]
    revoked = None if cut is None else f"at {fixed_millis(cut['at'])} after {_cutoff(cut)}"
    return [
        row["node_id"],
        row["workspaces"],
        row["holds"],
        row["max_logs"],
        None if row["cert_expires"] is None else fixed_millis(row["cert_expires"]),
        row["label"],
        "yes" if row["this_node"] else "no",
        {True: "yes", False: "no", None: "unknown"}[row["erases"]],
        revoked,
    ]


_PEER_KEYS = ("node_id", "address", "direction", "state", "lag_in", "lag_out", "last_error")
_PEERS = tuple(k.replace("_", " ").upper() for k in _PEER_KEYS)


async def peers_list(args: argparse.Namespace) -> Result:
    from node.mesh.service import read_peers

    async with open_node(args) as node:
        snapshot = await read_peers(node)
    if snapshot["at"] is None:
        return Result(snapshot, "no peers: sync has not run on this node")
    now = time.time()
    rows = [[*(p[k] for k in _PEER_KEYS[:-1]), _error_cell(p, now)] for p in snapshot["peers"]]
    at = format_instant(snapshot["at"])
    snapshot = {**snapshot, "at": at, "peers": [_spelled(p) for p in snapshot["peers"]]}
    running = "serving" if snapshot["serving"] else "stopped"
    where = f", listening at {snapshot['listen']}" if snapshot["listen"] else ""
    lines = [f"sync {running}{where} (as of {at})"]
    if not rows:
        return Result(snapshot, "\n".join([*lines, "no peers"]))
    lines += table(_PEERS, rows)
    return Result(snapshot, "\n".join(lines))


def _spelled(row: dict[str, Any]) -> dict[str, Any]:
    """A snapshot row with its instants (milliseconds) spelled as ISO-8601."""
    return {**row, **{k: _instant(row.get(k)) for k in ("connected_at", "last_error_at")}}


def _instant(ms: int | None) -> str | None:
    return None if ms is None else format_instant(ms)


def _error_cell(row: dict[str, Any], now: float) -> str | None:
    """The link's current error and how long ago it happened (``12 s ago``)."""
    error: str | None = row["last_error"]
    at = row.get("last_error_at")
    if error is None or at is None:  # a snapshot from before errors carried their time
        return error
    return f"{error} ({_ago(now - at / 1000)})"


def _ago(seconds: float) -> str:
    whole = max(0, int(seconds))
    for unit, size in (("d", 86_400), ("h", 3_600), ("min", 60)):
        if whole >= 2 * size:
            return f"{whole // size} {unit} ago"
    return f"{whole} s ago"
