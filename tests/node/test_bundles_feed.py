"""A bundle import in the catch-up feed (docs/tools/e_audit.md §A bundle import): one
``bundle_imported`` event, shown to every caller who may read something it brought, with counts
of only that — the entries with content it stored or filled in, and their SRs and episodes.
Every node is a real store; the nodes of a mesh are made by ``synckit.make_mesh`` and never
connect."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from node.access.callers import Caller
from node.node import Node
from tests.node.bundlekit import write
from tests.node.helpers import ForeignWriter, Wall
from tests.node.synckit import make_mesh

pytestmark = pytest.mark.asyncio

READ = ("read:workspace",)
WRITE = ("read:workspace", "write:workspace")
ADMIN = ("read:workspace", "admin:workspace")


async def who(node: Node, principal: str, workspace: str, scopes: tuple[str, ...]) -> Caller:
    issued = await node.create_token(principal, workspace, scopes)
    return await node.authenticate(issued.token)


async def imports(node: Node, caller: Caller) -> list[dict[str, Any]]:
    """The bundle imports of the caller's feed, from the start."""
    feed = await node.e_audit(caller, action="list", since_seq=0, limit=1000)
    return [e for e in feed["events"] if e["event"] == "bundle_imported"]


def seen(*parts: tuple[int, int, int]) -> list[dict[str, int]]:
    return [{"entries": e, "srs": s, "episodes": p} for e, s, p in parts]


async def test_a_reader_learns_of_a_bundle_import_from_the_feed(tmp_path: Path, wall: Wall) -> None:
    dirs = await make_mesh(tmp_path, ["A", "B"], wall)
    async with Node.open(dirs["A"], wall=wall) as a, Node.open(dirs["B"], wall=wall) as b:
        await write(a, await who(a, "alice", "team", WRITE), "one", "two", "three")
        await a.export_bundle(tmp_path / "a.bundle")
        await b.import_bundle(tmp_path / "a.bundle")

        bob = await who(b, "bob", "team", READ)
        listed = await b.e_timeline(bob, action="list")
        assert len(listed["results"]) == 3
        feed = await b.e_audit(bob, action="list", since_seq=0)
        (event,) = feed["events"]
        assert event["event"] == "bundle_imported"
        assert (event["subject"], event["entry_id"]) == (None, None)
        assert event["detail"] == {"entries": 3, "srs": 3, "episodes": 0}
        assert feed["covered_seq"] >= event["seq"]
        again = await b.e_audit(bob, action="list", since_seq=feed["covered_seq"])
        assert again["events"] == []


async def test_each_caller_sees_only_its_part_of_one_import(tmp_path: Path, wall: Wall) -> None:
    dirs = await make_mesh(tmp_path, ["A", "B"], wall)
    async with Node.open(dirs["A"], wall=wall) as a, Node.open(dirs["B"], wall=wall) as b:
        alice, carol = await who(a, "alice", "team", WRITE), await who(a, "carol", "team", WRITE)
        await write(a, alice, "open one", "open two")
        await a.e_write(alice, title="alice's own", text="mine", visibility="private")
        await a.e_write(carol, title="carol's own", text="hers", visibility="private")
        await write(a, await who(a, "olga", "other", WRITE), "other one", "other two")
        await a.work_record(alice, summary="alice's step")
        await a.work_record(carol, summary="carol's step")
        await a.export_bundle(tmp_path / "a.bundle")
        report = await b.import_bundle(tmp_path / "a.bundle")
        assert report.new >= 8

        expected = {
            ("bob", "team", READ): seen((2, 2, 0)),  # the two open SRs
            ("alice", "team", READ): seen((4, 3, 1)),  # and her private SR and her episode
            ("root", "team", ADMIN): seen((6, 4, 2)),  # every SR and episode of team
            ("olga", "other", READ): seen((2, 2, 0)),
            ("dave", "empty", ADMIN): [],  # it brought nothing of this workspace
        }
        for (principal, workspace, scopes), shown in expected.items():
            caller = await who(b, principal, workspace, scopes)
            assert [e["detail"] for e in await imports(b, caller)] == shown, principal


async def test_an_import_that_fills_in_payloads_shows_what_it_filled(
    tmp_path: Path, wall: Wall
) -> None:
    """A workspace bundle carries every header but only its workspace's payloads; the full
    bundle after it fills the rest in — that is when team's SRs arrive for team's readers."""
    dirs = await make_mesh(tmp_path, ["A", "B"], wall)
    async with Node.open(dirs["A"], wall=wall) as a, Node.open(dirs["B"], wall=wall) as b:
        await write(a, await who(a, "alice", "team", WRITE), "team one", "team two", "team three")
        await write(a, await who(a, "olga", "other", WRITE), "other one")
        await a.export_bundle(tmp_path / "other.bundle", workspace="other")
        await b.import_bundle(tmp_path / "other.bundle")
        bob, olga = await who(b, "bob", "team", READ), await who(b, "olga", "other", READ)
        assert await imports(b, bob) == []  # team's entries came without their content
        assert [e["detail"] for e in await imports(b, olga)] == seen((1, 1, 0))

        await a.export_bundle(tmp_path / "all.bundle")
        full = await b.import_bundle(tmp_path / "all.bundle")
        assert (full.new, full.payloads_filled) == (0, 3)
        assert [e["detail"] for e in await imports(b, bob)] == seen((3, 3, 0))
        assert len(await imports(b, olga)) == 1  # the second brought her nothing


async def test_an_sr_made_private_later_takes_its_import_out_of_a_readers_feed(
    tmp_path: Path, wall: Wall
) -> None:
    """An import is judged, like every event, by what its SRs are now: the same rule as an
    ``sr_synced`` event's, so a feed read twice never shows what the caller may no longer
    read."""
    dirs = await make_mesh(tmp_path, ["A", "B"], wall)
    async with Node.open(dirs["A"], wall=wall) as a, Node.open(dirs["B"], wall=wall) as b:
        alice = await who(a, "alice", "team", WRITE)
        written = await a.e_write(alice, title="soon private", text="for now open")
        await a.export_bundle(tmp_path / "first.bundle")
        await b.import_bundle(tmp_path / "first.bundle")
        bob = await who(b, "bob", "team", READ)
        assert [e["detail"] for e in await imports(b, bob)] == seen((1, 1, 0))

        await b.e_adjust(
            await who(b, "alice", "team", WRITE), sr_id=written["sr_id"], visibility="private"
        )
        assert await imports(b, bob) == []
        assert [e["detail"] for e in await imports(b, await who(b, "alice", "team", READ))] == (
            seen((1, 1, 0))
        )


async def test_an_import_of_many_srs_is_counted_whole(tmp_path: Path, wall: Wall) -> None:
    """The feed reads what an import brought a chunk of subjects at a time: every chunk counts."""
    writer = ForeignWriter(b"")
    dirs = await make_mesh(tmp_path, ["A", "B"], wall, [writer])
    async with Node.open(dirs["A"], wall=wall) as a, Node.open(dirs["B"], wall=wall) as b:
        await a.receive(writer.run(1234), source="test")
        await a.export_bundle(tmp_path / "a.bundle")
        await b.import_bundle(tmp_path / "a.bundle")
        bob = await who(b, "bob", "team", READ)
        assert [e["detail"] for e in await imports(b, bob)] == seen((1234, 1234, 0))
