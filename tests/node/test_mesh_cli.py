"""``memlane mesh invite | members | revoke`` end to end, in-process through the command
line's entry point (tests/node/clikit.py) over a real data directory (docs/mesh.md,
docs/cli.md)."""

from __future__ import annotations

import asyncio
import json
import re
from pathlib import Path

from node.identity import AUTHORITY_KEY_FILE, node_id
from node.members import invites
from node.members.errors import InviteError
from node.node import Node, system_wall
from protocol.signing import SigningKey
from protocol.timefmt import fixed_millis
from tests.node.clikit import count, fails, ok, run, run_all
from tests.node.helpers import ForeignWriter, admit

HOUR = 3_600_000
JOINER = SigningKey(b"\x0f" * 32).public


def init(tmp_path: Path) -> Path:
    data = tmp_path / "node"
    ok(run("init", "--data", data))
    return data


def test_an_invite_is_printed_once_and_redeems_once(tmp_path: Path) -> None:
    data = init(tmp_path)
    text = ok(
        run(
            "mesh",
            "invite",
            "--data",
            data,
            "--workspaces",
            "team",
            "ops",
            "--expires",
            "2h",
            "--label",
            "laptop",
        )
    ).strip()
    invite = invites.read(text)
    assert (invite.workspaces, invite.label) == (("team", "ops"), "laptop")
    assert abs(invite.expires - (system_wall() + 2 * HOUR)) < 60_000
    shown = json.loads(ok(run("mesh", "invite", "--data", data, "--json")))
    assert invites.read(shown["invite"]).workspaces == ("*",)
    assert shown["workspaces"] == ["*"]
    assert shown["invite_id"] == invites.read(shown["invite"]).invite_id.hex()

    async def redeem_twice() -> str:
        async with Node.open(data) as node:
            done = await node.membership.redeem_invite(text, JOINER)
            try:
                await node.membership.redeem_invite(text, JOINER)
            except InviteError as exc:
                return f"{done.payload['workspaces']} then {exc}"
        return "redeemed twice"

    assert asyncio.run(redeem_twice()) == "['team', 'ops'] then the invite was already used"


def test_an_invite_carries_what_the_joiner_holds(tmp_path: Path) -> None:
    """``--holds`` (docs/partial.md): the invite says which workspaces' payloads the joiner
    holds, and the grant it is redeemed for says the same; without it, all, as before."""
    data = init(tmp_path)
    shown = json.loads(ok(run("mesh", "invite", "--data", data, "--holds", "team,ops", "--json")))
    assert shown["holds"] == ["ops", "team"]
    assert invites.read(shown["invite"]).holds == ("ops", "team")
    plain = json.loads(ok(run("mesh", "invite", "--data", data, "--json")))
    assert (plain["holds"], invites.read(plain["invite"]).holds) == (["*"], None)

    async def redeem() -> list[str]:
        async with Node.open(data) as node:
            done = await node.membership.redeem_invite(shown["invite"], JOINER)
            (joined,) = [m for m in node.membership.members() if m.key == JOINER]
            return list(joined.holds) + done.payload["holds"]

    assert asyncio.run(redeem()) == ["ops", "team", "ops", "team"]


def test_members_shows_grants_this_node_and_revocations(tmp_path: Path) -> None:
    data = init(tmp_path)

    async def admit_and_receive() -> ForeignWriter:
        async with Node.open(data) as node:
            writer = ForeignWriter(node.info.mesh, seed=b"\x33" * 32)
            await admit(node, writer, workspaces=["team"])
            await node.receive(writer.run(2), source="peer")
        return writer

    peer = asyncio.run(admit_and_receive())
    listed = [
        re.split(r" {2,}", line) for line in ok(run("mesh", "members", "--data", data)).splitlines()
    ]
    peer_id = node_id(peer.key.public)
    assert listed[0] == [
        "NODE ID",
        "WORKSPACES",
        "HOLDS",
        "MAX LOGS",
        "CERT EXPIRES",
        "LABEL",
        "THIS NODE",
        "ERASES",
        "REVOKED",
    ]
    (mine,) = [row for row in listed if row[6] == "yes"]
    assert mine[1:5] == ["*", "*", "64", "9999-12-31T23:59:59.999Z"]
    assert mine[7] == "yes"  # this node applies erasures; the peer never connected here
    assert [row[7] for row in listed if row[0] == peer_id] == ["unknown"]
    assert [row[1] for row in listed if row[0] == peer_id] == ["team"]

    revoked = ok(run("mesh", "revoke", "--data", data, peer_id)).strip()
    assert revoked == f"revoked {peer_id} after seq 2 of epoch {peer.epoch.hex()}"
    rows = {
        r["node_id"]: r for r in json.loads(ok(run("mesh", "members", "--data", data, "--json")))
    }
    assert rows[peer_id]["revoked"] | {"at": None} == {
        "at": None,
        "epoch": peer.epoch.hex(),
        "seq": 2,
    }
    assert rows[peer_id]["workspaces"] == ["team"]
    assert [r["this_node"] for r in rows.values()].count(True) == 1
    (shown,) = [
        line
        for line in ok(run("mesh", "members", "--data", data)).splitlines()
        if line.startswith(peer_id)
    ]
    at = fixed_millis(rows[peer_id]["revoked"]["at"])  # a table's instants: three digits
    assert shown.endswith(f"  at {at} after seq 2 of epoch {peer.epoch.hex()}")


def test_grant_changes_how_many_logs_a_member_may_hold(tmp_path: Path) -> None:
    data = init(tmp_path)

    async def admit_one() -> str:
        async with Node.open(data) as node:
            writer = ForeignWriter(node.info.mesh, seed=b"\x34" * 32)
            await admit(node, writer, workspaces=["team"])
            return node_id(writer.key.public)

    peer_id = asyncio.run(admit_one())
    assert ok(run("mesh", "grant", "--data", data, peer_id, "--max-logs", "3")).strip() == (
        f"{peer_id} may hold 3 logs and the payloads of *"
    )
    rows = {
        r["node_id"]: r for r in json.loads(ok(run("mesh", "members", "--data", data, "--json")))
    }
    assert (rows[peer_id]["max_logs"], rows[peer_id]["workspaces"]) == (3, ["team"])
    assert "max_logs" in fails(run("mesh", "grant", "--data", data, peer_id, "--max-logs", "0"))
    # What it holds (docs/partial.md), the rest of the grant kept.
    assert ok(run("mesh", "grant", "--data", data, peer_id, "--holds", "team,lab")).strip() == (
        f"{peer_id} may hold 3 logs and the payloads of lab,team"
    )
    rows = {
        r["node_id"]: r for r in json.loads(ok(run("mesh", "members", "--data", data, "--json")))
    }
    assert (rows[peer_id]["max_logs"], rows[peer_id]["holds"]) == (3, ["lab", "team"])
    assert "--max-logs N, --holds W1,W2" in fails(run("mesh", "grant", "--data", data, peer_id))
    assert "holds" in fails(run("mesh", "grant", "--data", data, peer_id, "--holds", "no way"))


def test_refusals_exit_1_and_store_nothing(tmp_path: Path) -> None:
    data = init(tmp_path)
    own = json.loads(ok(run("mesh", "members", "--data", data, "--json")))[0]["node_id"]
    before = count(data, "headers")
    refusals = [
        (["mesh", "revoke", "--data", str(data), "aaaa-bbbb-cccc-dddd"], "no member of this mesh"),
        (["mesh", "revoke", "--data", str(data), own], "a node cannot revoke its own key"),
        (["mesh", "invite", "--data", str(data), "--workspaces", "not one"], "workspaces"),
    ]
    results = [run(*argv) for argv, _ in refusals]
    for (_, text), result in zip(refusals, results, strict=True):
        assert text in fails(result)
    assert count(data, "headers") == before

    (data / AUTHORITY_KEY_FILE).unlink()
    err = fails(run("mesh", "invite", "--data", data))
    assert "this node does not hold the mesh authority key" in err
    assert json.loads(fails(run("mesh", "invite", "--data", data, "--json")))["error"] == (
        "this node does not hold the mesh authority key"
    )


def test_usage_errors_exit_2(tmp_path: Path) -> None:
    d = str(tmp_path / "node")
    argvs = [
        ["mesh"],
        ["mesh", "invite", "--data", d, "--expires", "3x"],
        ["mesh", "invite", "--data", d, "--expires", "0h"],
        ["mesh", "invite", "--data", d, "--workspaces"],
        ["mesh", "invite", "--data", d, "--holds", "team,,ops"],
        ["mesh", "revoke", "--data", d],
        ["mesh", "frobnicate"],
    ]
    for result in run_all(argvs, tmp_path):
        err = fails(result, code=2)
        assert err.startswith("usage: memlane"), (result.args, err)
    assert not (tmp_path / "node").exists()
