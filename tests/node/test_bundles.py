"""Bundles between nodes that never meet (docs/bundles.md): a full bundle, an
incremental one cut from the importer's frontier, a workspace bundle whose other payloads a
later bundle fills, importing twice, and the one ``bundle_imported`` event each import writes.
Every node is a real store; the nodes of a mesh are made by ``synckit.make_mesh`` and never
connect."""

from __future__ import annotations

from pathlib import Path

import pytest

from node.node import Node
from tests.node.bundlekit import answers, caller, write
from tests.node.helpers import ForeignWriter, Wall, events
from tests.node.synckit import held, make_mesh

pytestmark = pytest.mark.asyncio


async def test_a_bundle_carries_a_node_to_another_that_never_met_it(
    tmp_path: Path, wall: Wall
) -> None:
    writer = ForeignWriter(b"")
    dirs = await make_mesh(tmp_path, ["A", "B"], wall, [writer])
    async with Node.open(dirs["A"], wall=wall) as a, Node.open(dirs["B"], wall=wall) as b:
        on_a = await caller(a)
        await write(a, on_a, "alpha", "beta", "gamma")
        await a.receive(writer.run(12), source="test")
        exported = await a.export_bundle(tmp_path / "a.bundle")
        report = await b.import_bundle(tmp_path / "a.bundle")

        assert await held(a) == await held(b)
        assert await answers(a, on_a) == await answers(b, await caller(b))
        # B holds the authority's log already (three member.add): the rest is new
        assert (report.new, report.already_present) == (exported.entries - 3, 3)
        assert exported.entries == len(await held(a))
        assert (report.payloads_filled, report.rejected, report.pending) == (0, 0, 0)
        assert report.bundle_id == exported.bundle_id
        (event,) = await events(b, "bundle_imported")
        assert event.detail == report.detail() | {"subjects": event.detail["subjects"]}
        assert report.exporter == a.info.node_id
        assert await events(b, "sr_synced") == []
        assert (await b.verify()).ok
        feed = await b.e_audit(await caller(b), action="list", since_seq=0)
        shown = [e for e in feed["events"] if e["event"] == "bundle_imported"]
        # what the caller reads of it: three SRs of its own, the writer's twelve of team
        assert [e["detail"] for e in shown] == [{"entries": 15, "srs": 15, "episodes": 0}]


async def test_an_incremental_bundle_carries_only_what_the_importer_lacks(
    tmp_path: Path, wall: Wall
) -> None:
    dirs = await make_mesh(tmp_path, ["A", "B"], wall)
    async with Node.open(dirs["A"], wall=wall) as a, Node.open(dirs["B"], wall=wall) as b:
        on_a, on_b = await caller(a), await caller(b)
        await write(a, on_a, "one", "two")
        await a.export_bundle(tmp_path / "first.bundle")
        await b.import_bundle(tmp_path / "first.bundle")
        await write(b, on_b, "written on B")
        await write(a, on_a, "three", "four", "five")
        await b.write_frontier(tmp_path / "b.frontier")

        exported = await a.export_bundle(tmp_path / "more.bundle", since=tmp_path / "b.frontier")
        report = await b.import_bundle(tmp_path / "more.bundle")

        assert exported.entries == report.new == 3
        assert report.already_present == 0
        assert await answers(b, on_b) != await answers(a, on_a)  # B holds its own SR besides
        assert {e.id for e in await a.entries()} <= {e.id for e in await b.entries()}


async def test_a_workspace_bundle_carries_every_header_but_only_its_payloads(
    tmp_path: Path, wall: Wall
) -> None:
    dirs = await make_mesh(tmp_path, ["A", "B"], wall)
    async with Node.open(dirs["A"], wall=wall) as a, Node.open(dirs["B"], wall=wall) as b:
        team_a, other_a = await caller(a, "team"), await caller(a, "other")
        await write(a, team_a, "team one", "team two")
        await write(a, other_a, "other one", "other two", "other three")
        team_b, other_b = await caller(b, "team"), await caller(b, "other")

        await a.export_bundle(tmp_path / "team.bundle", workspace="team")
        first = await b.import_bundle(tmp_path / "team.bundle")
        assert first.new + first.already_present == len(await a.entries())  # every header
        assert await answers(b, team_b) == await answers(a, team_a)
        assert await answers(b, other_b) != await answers(a, other_a)
        assert "other" not in str(await answers(b, other_b))  # nothing readable of its SRs
        absent = [e for e in await b.entries() if e.payload is None]
        assert len(absent) == 3
        assert (await b.verify()).ok

        await a.export_bundle(tmp_path / "all.bundle")
        full = await b.import_bundle(tmp_path / "all.bundle")
        assert (full.new, full.payloads_filled) == (0, 3)
        assert full.already_present == first.new + first.already_present
        assert await answers(b, other_b) == await answers(a, other_a)
        assert await held(a) == await held(b)


async def test_importing_twice_adds_nothing_and_still_reports(tmp_path: Path, wall: Wall) -> None:
    dirs = await make_mesh(tmp_path, ["A", "B"], wall)
    async with Node.open(dirs["A"], wall=wall) as a, Node.open(dirs["B"], wall=wall) as b:
        await write(a, await caller(a), "one", "two", "three")
        exported = await a.export_bundle(tmp_path / "a.bundle")
        first = await b.import_bundle(tmp_path / "a.bundle")
        rows = await held(b)
        second = await b.import_bundle(tmp_path / "a.bundle")

        assert first.new + first.already_present == exported.entries
        assert (second.new, second.already_present) == (0, exported.entries)
        assert await held(b) == rows
        imported = await events(b, "bundle_imported")
        assert [e.detail["new"] for e in imported] == [first.new, 0]
        feed = await b.e_audit(await caller(b), action="list", since_seq=0)
        shown = [e["detail"] for e in feed["events"] if e["event"] == "bundle_imported"]
        assert shown == [{"entries": 3, "srs": 3, "episodes": 0}]  # the second brought nothing
        assert [e.detail["bundle"] for e in imported] == [exported.bundle_id] * 2
        assert await events(b, "sr_synced") == []


async def test_entries_that_cannot_attach_wait_and_a_later_bundle_releases_them(
    tmp_path: Path, wall: Wall
) -> None:
    writer = ForeignWriter(b"")
    dirs = await make_mesh(tmp_path, ["A", "B"], wall, [writer])
    async with Node.open(dirs["A"], wall=wall) as a, Node.open(dirs["B"], wall=wall) as b:
        await a.receive(writer.run(5), source="test")
        await a.write_frontier(tmp_path / "a5.frontier")
        await a.receive(writer.run(5), source="test")
        await a.export_bundle(tmp_path / "later.bundle", since=tmp_path / "a5.frontier")
        await a.export_bundle(tmp_path / "all.bundle")

        later = await b.import_bundle(tmp_path / "later.bundle")
        assert (later.new, later.pending) == (0, 5)
        everything = await b.import_bundle(tmp_path / "all.bundle")
        assert everything.new == 10  # the writer's ten: five new, five released
        assert await held(a) == await held(b)


async def test_forget_wins_over_the_episode_an_older_bundle_brings(
    tmp_path: Path, wall: Wall
) -> None:
    dirs = await make_mesh(tmp_path, ["A", "B"], wall)
    async with Node.open(dirs["A"], wall=wall) as a, Node.open(dirs["B"], wall=wall) as b:
        on_a = await caller(a)
        await a.write_frontier(tmp_path / "start.frontier")
        gone = (await a.work_record(on_a, summary="to be forgotten"))["id"]
        await a.export_bundle(tmp_path / "recorded.bundle", since=tmp_path / "start.frontier")
        await a.work_forget(on_a, id=gone)
        await a.export_bundle(tmp_path / "forgotten.bundle", since=tmp_path / "start.frontier")

        on_b = await caller(b)
        await b.import_bundle(tmp_path / "recorded.bundle")
        assert gone in str(await b.work_episodes(on_b, page_size=100))
        await b.import_bundle(tmp_path / "forgotten.bundle")
        again = await b.import_bundle(tmp_path / "recorded.bundle")
        assert (again.new, again.already_present) == (0, 1)
        listed = await b.work_episodes(on_b, page_size=100)
        assert gone not in str(listed)
        assert listed == await a.work_episodes(on_a, page_size=100)


async def test_a_payload_arriving_for_an_entry_still_waiting_is_kept(
    tmp_path: Path, wall: Wall
) -> None:
    dirs = await make_mesh(tmp_path, ["A", "B"], wall)
    async with Node.open(dirs["A"], wall=wall) as a, Node.open(dirs["B"], wall=wall) as b:
        on_a = await caller(a, "other")
        await write(a, on_a, "first")
        await a.export_bundle(tmp_path / "first.bundle")
        await a.write_frontier(tmp_path / "first.frontier")
        await write(a, on_a, "second")
        since = tmp_path / "first.frontier"
        await a.export_bundle(tmp_path / "headers.bundle", since=since, workspace="team")
        await a.export_bundle(tmp_path / "whole.bundle", since=since)

        assert (await b.import_bundle(tmp_path / "headers.bundle")).pending == 1
        assert (await b.import_bundle(tmp_path / "whole.bundle")).pending == 0  # waits already
        assert (await b.import_bundle(tmp_path / "first.bundle")).new == 2
        assert await held(a) == await held(b)  # the second SR with its payload
