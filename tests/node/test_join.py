"""Joining a mesh over the network (docs/mesh.md §Joining), with real ``memlane`` processes on
loopback: the authority serves sync and joins; ``memlane init --join … --authority …`` makes a
member node that then syncs with it.  Refusals — a used invite, an expired one, one of another
authority, an unreachable authority, a data directory in use — exit 1 with the reason and
leave nothing behind."""

from __future__ import annotations

import asyncio
import json
import time
from pathlib import Path

from node.members import invites
from node.mesh.service import CA_FILE, NODE_CERT_FILE
from node.node import Node
from tests.node.servekit import memlane, poll, serve, stop


def _join(data: Path, invite: str, authority: str) -> tuple[int, str, str]:
    done = memlane(
        "init",
        "--data",
        str(data),
        "--join",
        invite,
        "--authority",
        authority,
        "--json",
        check=False,
    )
    return done.returncode, done.stdout, done.stderr


def _expired_invite(data: Path) -> str:
    async def run() -> str:
        async with Node.open(data) as node:
            return node.membership.create_invite(lifetime_ms=1)

    text = asyncio.run(run())
    time.sleep(0.01)
    return text


def _left(root: Path) -> set[str]:
    return {p.name for p in root.iterdir()}


def test_a_node_joins_online_and_syncs(tmp_path):
    one, two = tmp_path / "one", tmp_path / "two"
    memlane("init", "--data", str(one))
    other = tmp_path / "other"  # the authority of another mesh
    memlane("init", "--data", str(other))
    first, shown = serve(one, "--sync-listen", "127.0.0.1:0", "--join-listen", "127.0.0.1:0")
    running = [first]
    try:
        join_at = shown["join"]
        assert join_at.startswith("127.0.0.1:")
        assert join_at != shown["sync"]
        invite = memlane("mesh", "invite", "--data", str(one), "--label", "laptop").stdout.strip()

        code, out, err = _join(two, invite, join_at)
        assert code == 0, err
        joined = json.loads(out)
        assert {CA_FILE, NODE_CERT_FILE, "node.key", "memlane.db"} <= _left(two)
        assert not (two / "authority.key").exists()
        assert (two / CA_FILE).read_bytes() == (one / CA_FILE).read_bytes()
        members = json.loads(memlane("mesh", "members", "--data", str(one), "--json").stdout)
        row = next(m for m in members if m["node_id"] == joined["node_id"])
        assert row["label"] == "laptop"
        assert not row["revoked"]
        theirs = json.loads(memlane("mesh", "members", "--data", str(two), "--json").stdout)
        assert {m["node_id"] for m in theirs} == {m["node_id"] for m in members}
        before = _left(tmp_path)

        # Refusals: exit 1, the reason, nothing left behind.
        code, _, err = _join(tmp_path / "again", invite, join_at)
        assert code == 1
        assert "the authority refused the join: the invite was already used" in err
        code, _, err = _join(tmp_path / "late", _expired_invite(one), join_at)
        assert code == 1
        assert "the authority refused the join: the invite has expired" in err
        foreign = memlane("mesh", "invite", "--data", str(other)).stdout.strip()
        code, _, err = _join(tmp_path / "stray", foreign, join_at)
        assert code == 1
        assert f"{join_at} is not the authority of this invite's mesh" in err
        fresh = memlane("mesh", "invite", "--data", str(one)).stdout.strip()
        code, _, err = _join(tmp_path / "nowhere", fresh, "127.0.0.1:9")
        assert code == 1
        assert "cannot reach the authority at 127.0.0.1:9" in err
        code, _, err = _join(two, fresh, join_at)
        assert code == 1
        assert "is not empty" in err
        assert _left(tmp_path) == before
        assert invites.read(fresh)  # still unused: another node may join with it
        code, _, err = _join(tmp_path / "three", fresh, join_at)
        assert code == 0, err

        # The new member syncs with the authority.
        second, _ = serve(two, "--peer", shown["sync"])
        running.append(second)
        scopes = ["--scope", "read:workspace", "--scope", "write:workspace"]
        writer = memlane(
            "token",
            "create",
            "--data",
            str(one),
            "--principal",
            "alice",
            "--workspace",
            "team",
            *scopes,
        ).stdout.strip()
        reader = memlane(
            "token",
            "create",
            "--data",
            str(two),
            "--principal",
            "bob",
            "--workspace",
            "team",
            *scopes[:2],
        ).stdout.strip()
        written = json.loads(
            memlane(
                "write", "--data", str(one), "--token", writer, "--title", "joined", "--json"
            ).stdout
        )

        def arrived() -> bool:
            listed = memlane(
                "timeline", "list", "--data", str(two), "--token", reader, "--json"
            ).stdout
            return written["sr_id"] in {r["sr_id"] for r in json.loads(listed)["results"]}

        poll("the SR on the joined node", arrived)
    finally:
        codes = [stop(proc) for proc in reversed(running)]
    for code, err in codes:
        assert code == 0, err


def test_join_listen_needs_the_authority_key(tmp_path):
    one = tmp_path / "one"
    memlane("init", "--data", str(one))
    (one / "authority.key").unlink()
    done = memlane(
        "serve",
        "--data",
        str(one),
        "--mcp-http",
        "127.0.0.1:0",
        "--join-listen",
        "127.0.0.1:0",
        check=False,
    )
    assert done.returncode == 1
    assert "does not hold the mesh authority key" in done.stderr


def test_join_and_authority_go_together(tmp_path):
    done = memlane("init", "--data", str(tmp_path / "n"), "--join", "mli1.x", check=False)
    assert done.returncode == 1
    assert "--join INVITE and --authority HOST:PORT go together" in done.stderr
    done = memlane(
        "init",
        "--data",
        str(tmp_path / "n"),
        "--join",
        "mli1.x",
        "--authority",
        "127.0.0.1:9",
        check=False,
    )
    assert done.returncode == 1
    assert "not a memlane invite" in done.stderr
    assert not (tmp_path / "n").exists()
