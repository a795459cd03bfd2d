"""memlane import of other tools' files (docs/export.md §Sources): the MCP memory server's own
file, a folder of notes, mem0's memories — and hand-broken files, whose bad lines are told with
their numbers and skipped while nothing is half-written.  Real stores on real files."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest

from node.access.callers import Caller
from node.exchange.records import FileError, derived_id
from node.node import Node
from tests.node.bundlekit import caller
from tests.node.helpers import counts

pytestmark = pytest.mark.asyncio

FIXTURES = Path(__file__).parent / "fixtures" / "exchange"


async def _srs(node: Node, who: Caller) -> dict[str, dict[str, Any]]:
    """Every SR the caller reads, by title, with the ids it links to."""
    page = await node.e_timeline(who, action="list", page_size=100)
    out = {}
    for r in page["results"]:
        linked = await node.e_timeline(who, action="traverse", sr_id=r["sr_id"], page_size=100)
        out[r["title"] or r["text"]] = r | {"linked": {x["title"] for x in linked["results"]}}
    return out


async def test_the_memory_servers_own_file_becomes_srs_and_links(node: Node) -> None:
    who = await caller(node)
    report = await node.import_file(who, FIXTURES / "mcp_memory.jsonl", "mcp-memory")
    assert (report.read, report.written, report.skipped) == (4, 4, 0)
    srs = await _srs(node, who)
    ada = srs["Ada Lovelace"]
    assert ada["tags"] == ["person"]
    assert ada["text"].split("\n") == [
        "Wrote the first published algorithm",
        "Worked with Charles Babbage",
        "worked_with → Charles Babbage",
        "wrote_notes_on → Analytical Engine",
    ]
    assert ada["linked"] == {"Charles Babbage", "Analytical Engine"}
    assert srs["London"]["linked"] == {"Charles Babbage"}  # a traverse goes both ways
    assert ada["sr_id"] == derived_id(who, "mcp-memory:Ada Lovelace")
    again = await node.import_file(who, FIXTURES / "mcp_memory.jsonl", "mcp-memory")
    assert (again.written, again.present) == (0, 4)


async def test_a_folder_of_notes_keeps_titles_tags_times_and_wiki_links(node: Node) -> None:
    who = await caller(node)
    report = await node.import_file(who, FIXTURES / "notes", "markdown")
    assert (report.read, report.written, report.skipped) == (3, 3, 0)
    srs = await _srs(node, who)
    assert set(srs) == {"Kitchen renovation", "Contractor", "Timeline"}
    kitchen, contractor = srs["Kitchen renovation"], srs["Contractor"]
    assert kitchen["tags"] == ["home", "project"]
    assert kitchen["content_time"] == "2025-02-03T00:00:00Z"
    assert kitchen["text"].startswith("Budget agreed with [[Contractor|the contractor]]")
    assert kitchen["linked"] == {"Contractor", "Timeline"}
    assert contractor["tags"] == ["people", "home"]
    assert contractor["text"] == "Call before 10am. Works with [[Kitchen renovation]]."
    assert srs["Timeline"]["text"].startswith("## May")


async def test_mem0s_memories_keep_their_time_and_whose_they_are(node: Node) -> None:
    who = await caller(node)
    report = await node.import_file(who, FIXTURES / "mem0_get_all.json", "mem0")
    assert (report.read, report.written, report.skipped) == (2, 2, 0)
    srs = await _srs(node, who)
    trip = srs["User is planning a trip to Japan next spring"]
    assert trip["content_time"] == "2024-07-20T08:23:45.123Z"
    assert trip["tags"] == ["user:alex", "travel"]
    assert srs["Prefers vegetarian food"]["tags"] == ["user:alex", "agent:travel-assistant"]


def _write_lines(path: Path, lines: list[Any]) -> Path:
    text = "".join((x if isinstance(x, str) else json.dumps(x)) + "\n" for x in lines)
    path.write_text(text)
    return path


def _entity(name: str, *observations: str) -> dict[str, Any]:
    return {
        "type": "entity",
        "name": name,
        "entityType": "thing",
        "observations": list(observations),
    }


async def test_broken_lines_are_told_and_skipped_and_nothing_is_half_written(
    node: Node, tmp_path: Path
) -> None:
    who = await caller(node)
    path = _write_lines(
        tmp_path / "broken.jsonl",
        [
            _entity("good", "kept"),
            '{"type": "entity", "name": "cut',  # a truncated line
            {"type": "entity", "name": 7, "entityType": "thing", "observations": []},  # wrong type
            {"type": "relation", "from": "good", "to": "nobody", "relationType": "knows"},
            _entity("huge", "x" * (10 << 20)),  # a 10 MB observation
            _entity("long", "y" * 200_000),  # fits a line, past an SR's text
            {"type": "mystery"},
            _entity("also good", "kept too"),
        ],
    )
    before = await counts(node)
    report = await node.import_file(who, path, "mcp-memory")
    told = {p.line: p.message for p in report.problems}
    assert sorted(told) == [2, 3, 4, 5, 6, 7]
    assert "not JSON" in told[2]
    assert "name and an entityType" in told[3]
    assert told[4] == "line 4: a relation to an entity not in the file: nobody"
    assert "longer than 1048576 bytes" in told[5]
    assert told[6].startswith("line 6: ")
    assert "text" in told[6]
    assert (report.read, report.written, report.skipped) == (3, 2, 5 + 1)
    assert set(await _srs(node, who)) == {"good", "also good"}
    after = await counts(node)
    assert after["headers"] - before["headers"] == 2  # one entry a record written, no more


async def test_a_memlane_export_with_bad_lines(node: Node, tmp_path: Path) -> None:
    who = await caller(node)
    header = {"type": "header", "format": "memlane-export", "version": 1}
    sr = {
        "type": "sr",
        "sr_id": "0190f1c2-0000-7000-8000-000000000001",
        "title": "fine",
        "text": "",
        "tags": [],
        "links": [],
    }
    path = _write_lines(
        tmp_path / "export.jsonl",
        [
            header,
            sr,
            sr | {"sr_id": "0190f1c2-0000-7000-8000-000000000002", "colour": "red"},
            sr | {"sr_id": "0190f1c2-0000-7000-8000-000000000003", "title": 12},
            sr | {"sr_id": "0190f1c2-0000-7000-8000-000000000004", "links": "nope"},
            {"type": "sr", "title": "no id"},
        ],
    )
    dry = await node.import_file(who, path, "memlane", dry_run=True)
    assert [(p.at, p.what, p.name) for p in dry.planned] == [("line 2", "sr", "fine")]
    assert (dry.written, dry.skipped) == (1, 4)
    assert await _srs(node, who) == {}
    report = await node.import_file(who, path, "memlane")
    told = {p.line: p.message for p in report.problems}
    assert told[3] == "line 3: unknown fields: colour"
    assert told[4].startswith("line 4: ")
    assert "title" in told[4]
    assert told[5] == "line 5: links must be a list of sr_ids"
    assert told[6] == "line 6: no sr_id"
    assert (report.written, report.skipped) == (1, 4)
    newer = _write_lines(tmp_path / "newer.jsonl", [header | {"version": 2}, sr])
    with pytest.raises(FileError, match="version 2"):
        await node.import_file(who, newer, "memlane")


async def test_a_markdown_export_imports_as_its_jsonl_does(tmp_path: Path, node: Node) -> None:
    who = await caller(node)
    first = await node.e_write(who, title="one", text="the first", tags=["a"])
    await node.e_write(who, title="two", text="links to one", links=[first["sr_id"]])
    await node.export(who, tmp_path / "notes", "markdown")
    await node.export(who, tmp_path / "all.jsonl", "jsonl")
    await Node.init(tmp_path / "b")
    async with Node.open(tmp_path / "b") as b:
        on_b = await caller(b)
        shutil.copytree(tmp_path / "notes", tmp_path / "copy")
        by_notes = await b.import_file(on_b, tmp_path / "copy", "markdown")
        by_lines = await b.import_file(on_b, tmp_path / "all.jsonl", "memlane")
        assert (by_notes.written, by_lines.written, by_lines.present) == (2, 0, 2)
        srs = await _srs(b, on_b)
        assert srs["two"]["linked"] == {"one"}
        assert srs["one"]["text"] == "the first"
        assert srs["one"]["sr_id"] == derived_id(on_b, f"memlane:{first['sr_id']}")
