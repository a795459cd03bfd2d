"""memlane's own export, out and in again (docs/export.md): a jsonl export imported on a fresh
node gives the same answers apart from the ids (mapped), ingest times and writer — content
times, flags, tags, links and each caller's episode-chain order kept — and a second import
adds nothing.  Real stores on real files, through the tools."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from node.access.callers import Caller
from node.exchange.records import derived_id
from node.node import Node
from protocol.timefmt import format_instant
from tests.node.bundlekit import caller
from tests.node.clikit import MEMLANE, drawn, fails, ok, on_terminal, run
from tests.node.helpers import Wall

pytestmark = pytest.mark.asyncio

_NODE_SET = ("sr_id", "ingest_time", "created_time", "node_id", "caller")


async def _fill(node: Node, wall: Wall, admin: Caller, bob: Caller) -> list[str]:
    made = []
    for i, title in enumerate(["alpha", "beta", "gamma", "delta"]):
        wall.now += 1000
        answer = await node.e_write(
            admin,
            title=title,
            text=f"{title} text",
            tags=[f"t{i}"],
            content_time=f"202{i}-03-04T05:06:07Z",
            links=made[-1:],
            conversational=i % 2 == 1,
        )
        made.append(answer["sr_id"])
    await node.e_correct(admin, sr_id=made[1], reason="typo", text="beta text, corrected")
    await node.e_adjust(admin, sr_id=made[2], tags=["t2", "moved"])
    await node.e_write(bob, title="bob's own", text="private to bob", visibility="private")
    for who, summary in [(admin, "a1"), (bob, "b1"), (admin, "a2"), (bob, "b2"), (admin, "a3")]:
        wall.now += 1000
        await node.work_record(who, summary=summary, tool="t", tags=["x"])
    return made


def _shown(page: dict[str, Any], ids: dict[str, str]) -> list[dict[str, Any]]:
    """A list's results with the fields a node sets itself left out, ids as ``ids`` maps
    them."""
    out = []
    for r in page["results"]:
        kept = {k: v for k, v in r.items() if k not in _NODE_SET}
        out.append(kept | {"sr_id": ids.get(r["sr_id"], r["sr_id"])})
    return sorted(out, key=lambda r: r["sr_id"])


def _srs(path: Path, ids: dict[str, str]) -> list[dict[str, Any]]:
    """An export's SR lines, links included, as ``_shown`` keeps them."""
    lines = [json.loads(x) for x in path.read_text().splitlines()]
    srs = [x | {"links": [ids.get(d, d) for d in x["links"]]} for x in lines if x["type"] == "sr"]
    return _shown({"results": srs}, ids)


async def _chain(node: Node, who: Caller) -> list[str]:
    newest = (await node.work_episodes(who, page_size=50))["episodes"][0]["id"]
    chain = await node.work_episode_chain(who, id=newest, k=50, verbosity="full")
    return [e["summary"] for e in chain["chain"]]


async def test_an_export_imported_on_a_fresh_node_answers_the_same(
    tmp_path: Path, wall: Wall
) -> None:
    await Node.init(tmp_path / "a", wall=wall)
    await Node.init(tmp_path / "b", wall=wall)
    async with Node.open(tmp_path / "a", wall=wall) as a, Node.open(tmp_path / "b", wall=wall) as b:
        on_a = await caller(a)
        made = await _fill(a, wall, on_a, await caller(a, principal="bob"))
        report = await a.export(on_a, tmp_path / "out.jsonl", "jsonl")
        assert (report.srs, report.episodes) == (5, 5)
        lines = [json.loads(x) for x in (tmp_path / "out.jsonl").read_text().splitlines()]
        assert [x["type"] for x in lines] == ["header"] + ["sr"] * 5 + ["episode"] * 5 + ["end"]

        on_b = await caller(b)
        first = await b.import_file(on_b, tmp_path / "out.jsonl", "memlane")
        assert (first.read, first.written, first.present, first.skipped) == (10, 10, 0, 0)
        exported = [x["sr_id"] for x in lines if x["type"] == "sr"]
        assert set(made) < set(exported)
        ids = {derived_id(on_b, f"memlane:{sr_id}"): sr_id for sr_id in exported}
        page_a = await a.e_timeline(on_a, action="list", page_size=100)
        page_b = await b.e_timeline(on_b, action="list", page_size=100)
        assert _shown(page_b, ids) == _shown(page_a, {})
        for query in ("beta", "private bob", "corrected"):  # (a tie goes by sr_id: none here)
            found_a = await a.e_timeline(on_a, action="find", query=query)
            found_b = await b.e_timeline(on_b, action="find", query=query)
            assert found_a["results"], query
            assert _shown(found_b, ids) == _shown(found_a, {}), query
        # one caller on B: alice's chain, then bob's, each in its order
        assert await _chain(b, on_b) == ["b2", "b1", "a3", "a2", "a1"]
        assert await _chain(a, on_a) == ["a3", "a2", "a1"]
        await b.export(on_b, tmp_path / "back.jsonl", "jsonl")
        assert _srs(tmp_path / "back.jsonl", ids) == _srs(tmp_path / "out.jsonl", {})

        again = await b.import_file(on_b, tmp_path / "out.jsonl", "memlane")
        assert (again.read, again.written, again.present) == (10, 0, 10)
        assert await b.e_timeline(on_b, action="list", page_size=100) == page_b


async def test_export_and_import_from_the_command_line(tmp_path: Path, wall: Wall) -> None:
    await Node.init(tmp_path / "a", wall=wall)
    async with Node.open(tmp_path / "a", wall=wall) as a:
        who = await caller(a)
        await a.e_write(who, title="kept", text="an SR")
    token = ok(
        run(
            "token",
            "create",
            "--data",
            tmp_path / "a",
            "--principal",
            "alice",
            "--workspace",
            "team",
            "--scope",
            "read:workspace",
            "--scope",
            "write:workspace",
        )
    ).strip()
    on = ("--data", tmp_path / "a", "--token", token)
    exported = run("export", tmp_path / "a.jsonl", *on, "--json")
    assert exported.stderr == ""
    out = json.loads(ok(exported))
    assert (out["srs"], out["episodes"]) == (1, 0)
    assert "already exists" in fails(run("export", tmp_path / "a.jsonl", *on))
    ok(run("export", tmp_path / "notes", "--format", "markdown", *on))
    code, shown = on_terminal([str(MEMLANE), "export", str(tmp_path / "b.jsonl"), *map(str, on)])
    assert code == 0
    assert drawn(shown, "export"), shown  # a bar on a terminal (and none on a pipe: above)
    assert len(list((tmp_path / "notes").glob("*.md"))) == 1
    bad = tmp_path / "bad.jsonl"
    bad.write_text((tmp_path / "a.jsonl").read_text() + "{not json\n")
    dry = run("import", bad, *on, "--dry-run")
    assert dry.returncode == 1
    assert dry.stdout.splitlines()[0].startswith("line 4: not JSON")
    fresh = json.loads(
        run(
            "import",
            tmp_path / "a.jsonl",
            "--data",
            tmp_path / "a",
            "--token",
            token,
            "--from",
            "memlane",
            "--dry-run",
            "--json",
        ).stdout
    )
    assert (fresh["written"], fresh["would_write"]) == (0, [])  # nothing new: it is all here
    assert "would write 0, 1 already present, 1 skipped" in dry.stdout
    first = ok(run("import", tmp_path / "notes", "--from", "markdown", *on))
    assert "wrote 0, 1 already present, 0 skipped" in first  # the notes name the same SR


async def test_an_incremental_export_holds_what_was_written_since(
    tmp_path: Path, wall: Wall
) -> None:
    await Node.init(tmp_path / "a", wall=wall)
    async with Node.open(tmp_path / "a", wall=wall) as a:
        who = await caller(a)
        await a.e_write(who, title="old", text="before")
        await a.work_record(who, summary="old episode")
        wall.now += 60_000
        since = wall.now
        await a.e_write(who, title="new", text="after")
        await a.work_record(who, summary="new episode")
        report = await a.export(who, tmp_path / "since.jsonl", "jsonl", since=since)
        lines = [json.loads(x) for x in (tmp_path / "since.jsonl").read_text().splitlines()]
        assert (report.srs, report.episodes) == (1, 1)
        assert [x.get("title", x.get("summary")) for x in lines[1:-1]] == ["new", "new episode"]
        assert lines[0]["since"] == format_instant(since)
        assert lines[-1] == {"type": "end", "srs": 1, "episodes": 1}
