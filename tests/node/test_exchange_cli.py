"""``memlane import`` and ``memlane export --format markdown`` from the command line
(docs/export.md): an import tells what wrote a file from the file itself (``--from`` only
overrides), and refuses a file it cannot read in one line; a Markdown export is a vault Obsidian
opens as a graph of titles — notes named from their titles, links labelled with them, line
breaks kept — that imports back as the SRs it was made of.  Real stores on real files."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest

from node.exchange.records import derived_id
from node.node import Node
from tests.node.bundlekit import caller
from tests.node.clikit import fails, make_token, ok, run
from tests.node.helpers import Wall

pytestmark = pytest.mark.asyncio

FIXTURES = Path(__file__).parent / "fixtures" / "exchange"
_NODE_SET = ("ingest_time", "created_time", "node_id")  # what an import writes anew


async def _node_with_token(data: Path, wall: Wall) -> tuple[str, ...]:
    """A fresh node at ``data``, and the flags of a command acting on it with a token that
    reads and writes its workspace."""
    await Node.init(data, wall=wall)
    token = make_token(data, "read:workspace", "write:workspace")
    return ("--data", str(data), "--token", token)


async def test_import_tells_what_wrote_a_file(tmp_path: Path, wall: Wall) -> None:
    on = await _node_with_token(tmp_path / "a", wall)
    memory = shutil.copy(FIXTURES / "mcp_memory.jsonl", tmp_path / "memory.jsonl")
    assert f"of {memory} (mcp-memory): wrote 4, 0 already present" in ok(run("import", memory, *on))
    notes = FIXTURES / "notes"
    assert f"of {notes} (markdown): wrote 3, 0 already" in ok(run("import", notes, *on))
    plain = tmp_path / "plain"  # plain .md files: titled by their heading, else their name
    plain.mkdir()
    (plain / "groceries.md").write_text("milk\neggs\n")
    (plain / "x.md").write_text("# Reading list\n\nDune\n")
    assert f"of {plain} (markdown): wrote 2, 0 already" in ok(run("import", plain, *on))
    found = json.loads(ok(run("timeline", "list", "--page-size", "100", *on, "--json")))
    titled = {r["title"]: r["text"] for r in found["results"]}
    assert (titled["groceries"], titled["Reading list"]) == ("milk\neggs", "Dune")
    mem0 = FIXTURES / "mem0_get_all.json"
    assert f"of {mem0} (mem0): wrote 2, 0 already" in ok(run("import", mem0, *on))
    compact = tmp_path / "compact.json"  # one line, longer than a line of JSON lines may be
    tea = {"id": "m-1", "memory": "likes tea", "metadata": {"note": "x" * (1 << 20)}}
    compact.write_text(json.dumps([tea]))
    assert f"of {compact} (mem0): wrote 1, 0 already" in ok(run("import", compact, *on))
    ok(run("export", tmp_path / "all.jsonl", *on))
    again = ok(run("import", tmp_path / "all.jsonl", *on))
    assert "(memlane): wrote 0, 12 already present, 0 skipped" in again
    forced = run("import", memory, "--from", "markdown", *on)
    assert fails(forced) == f"{memory} is not a folder of Markdown notes\n"


async def test_a_file_import_cannot_read_is_told_in_one_line(tmp_path: Path, wall: Wall) -> None:
    on = await _node_with_token(tmp_path / "a", wall)
    prose = tmp_path / "prose.txt"
    prose.write_text("a shopping list\n" * 9)
    empty = tmp_path / "empty.jsonl"
    empty.write_text("\n")
    for path in (prose, empty):
        told = fails(run("import", path, *on))
        assert told == (
            f"{path} is not a file memlane can import: expected a memlane export (memlane "
            "export's JSON lines), the MCP memory server's memory.jsonl, mem0's memories "
            "(JSON) or a folder of Markdown notes; --from SOURCE names what wrote it\n"
        )
    memory = FIXTURES / "mcp_memory.jsonl"
    told = fails(run("import", memory, "--from", "memlane", *on))
    assert told == f"{memory} is not a memlane export: it starts with no memlane-export header\n"
    ok(run("export", tmp_path / "all.jsonl", *on))
    told = fails(run("import", tmp_path / "all.jsonl", "--from", "mcp-memory", *on))
    assert told.count("\n") == 1
    assert "is not the MCP memory server's memory.jsonl: no line of it is an entity" in told
    notes = FIXTURES / "notes"
    told = fails(run("import", notes, "--from", "memlane", *on))
    assert (
        told == f"{notes} is a folder: --from memlane reads a file (a folder is Markdown notes)\n"
    )
    assert fails(run("import", tmp_path / "nothing", *on)) == (
        f"{tmp_path / 'nothing'}: no such file or folder\n"
    )
    listed = json.loads(ok(run("timeline", "list", *on, "--json")))
    assert listed["results"] == []  # nothing was written by any of them


async def _fill(node: Node, wall: Wall) -> dict[str, str]:
    """SRs whose titles clash, letter case aside, or hold what no file name may; one without a
    title; the MCP memory server's entities (observations a line each, relations as links):
    their sr_ids by what they are."""
    who = await caller(node)
    await node.import_file(who, FIXTURES / "mcp_memory.jsonl", "mcp-memory")
    made = {}
    for name, title, text in [
        ("first", "Deploy checklist", "step one\nstep two"),
        ("lower", "deploy checklist", "the same title, in lower case"),
        ("second", "Deploy checklist", "again\n```\ncode\nblock\n```\nend  \n.\n\nlast"),
        ("unsafe", " .a/b: what? <x> [y] #z |w. ", "a title no file system takes"),
        ("device", "CON", "a name Windows keeps for a device"),
        ("untitled", "", "# Plan\nno title: named from its first line"),
    ]:
        wall.now += 1000
        answer = await node.e_write(who, title=title, text=text, tags=[name])
        made[name] = answer["sr_id"]
    linked = await node.e_write(
        who, title="Links", text="to all", links=[made["first"], made["second"], made["untitled"]]
    )
    made["links"] = linked["sr_id"]
    wall.now += 1000  # the first, corrected, is now the last written: its name stays
    await node.e_correct(who, sr_id=made["first"], reason="typo", text="step one\nstep 2")
    return made


def _sr_lines(path: Path, ids: dict[str, str]) -> list[dict[str, Any]]:
    """An export's SR lines less what an import writes anew, ids as ``ids`` maps them."""
    lines = [json.loads(x) for x in path.read_text().splitlines()]
    srs = [x for x in lines if x["type"] == "sr"]
    out = [
        {k: v for k, v in x.items() if k not in _NODE_SET}
        | {
            "sr_id": ids.get(x["sr_id"], x["sr_id"]),
            "links": sorted(ids.get(d, d) for d in x["links"]),
        }
        for x in srs
    ]
    return sorted(out, key=lambda x: x["sr_id"])


def _suffix(sr_id: str) -> str:
    return sr_id.replace("-", "")[-8:]


async def test_a_markdown_export_is_a_vault_of_titles_that_imports_back(
    tmp_path: Path, wall: Wall
) -> None:
    on_a = await _node_with_token(tmp_path / "a", wall)
    async with Node.open(tmp_path / "a", wall=wall) as a:
        made = await _fill(a, wall)
    ok(run("export", tmp_path / "vault", "--format", "markdown", *on_a))
    names = sorted(p.name for p in (tmp_path / "vault").iterdir())
    assert names == sorted(
        [
            "Ada Lovelace.md",
            "Analytical Engine.md",
            "CON_.md",
            "Charles Babbage.md",
            "Deploy checklist.md",
            f"Deploy checklist ({_suffix(made['second'])}).md",
            f"deploy checklist ({_suffix(made['lower'])}).md",  # a clash on macOS and Windows
            "Links.md",
            "London.md",
            "Plan.md",
            "a-b what x y z -w.md",
        ]
    )
    ada = (tmp_path / "vault" / "Ada Lovelace.md").read_text()
    assert (
        "# Ada Lovelace\n\nWrote the first published algorithm  \nWorked with Charles Babbage  \n"
        "worked_with → Charles Babbage  \nwrote_notes_on → Analytical Engine\n"
    ) in ada
    assert "\n- [[Charles Babbage|Charles Babbage]]\n" in ada
    assert "\n- [[Analytical Engine|Analytical Engine]]\n" in ada
    links = (tmp_path / "vault" / "Links.md").read_text().split("## Links\n\n")[1]
    second = f"Deploy checklist ({_suffix(made['second'])})"
    assert sorted(links.splitlines()) == sorted(
        [
            "- [[Plan|Plan]]",  # an SR without a title: named and labelled from its text
            "- [[Deploy checklist|Deploy checklist]]",
            f"- [[{second}|Deploy checklist]]",
        ]
    )
    first = (tmp_path / "vault" / "Deploy checklist.md").read_text()
    assert "\n\nstep one  \nstep 2\n" in first  # its corrected text
    again = (tmp_path / "vault" / f"{second}.md").read_text()
    assert "\n\nagain\n```\ncode\nblock\n```\nend    \n.\n\nlast\n" in again  # code as it is

    ok(run("export", tmp_path / "again", "--format", "markdown", *on_a))
    for note in (tmp_path / "vault").iterdir():  # the same names, and the same notes
        assert (tmp_path / "again" / note.name).read_text() == note.read_text()

    on_b = await _node_with_token(tmp_path / "b", wall)
    imported = ok(run("import", tmp_path / "vault", *on_b))
    assert "read 11 records" in imported
    assert "(markdown): wrote 11, 0 already present, 0 skipped" in imported
    ok(run("export", tmp_path / "a.jsonl", *on_a))
    ok(run("export", tmp_path / "b.jsonl", *on_b))
    async with Node.open(tmp_path / "b", wall=wall) as b:
        who = await caller(b)
        exported = [x["sr_id"] for x in _sr_lines(tmp_path / "a.jsonl", {})]
        ids = {derived_id(who, f"memlane:{sr_id}"): sr_id for sr_id in exported}
    assert _sr_lines(tmp_path / "b.jsonl", ids) == _sr_lines(tmp_path / "a.jsonl", {})
