"""The tools the documentation names against those the MCP server serves.

README.md and docs/mcp.md state how many tools an agent sees (as a word or in digits) and
name them; docs/mcp.md tabulates each one's title and annotations; docs/cli.md names the tool
behind each command.  The catalog is read from a server over a real node, through the SDK's
client, so a tool added to (or dropped from) what agents are served without the documents
fails here.
"""

from __future__ import annotations

import asyncio
import re
from pathlib import Path

import pytest
from mcp import Client
from mcp.types import Tool

from node.mcp.server import build_server
from node.node import Node

ROOT = Path(__file__).resolve().parents[2]
_WORDS = (
    "zero",
    "one",
    "two",
    "three",
    "four",
    "five",
    "six",
    "seven",
    "eight",
    "nine",
    "ten",
    "eleven",
    "twelve",
    "thirteen",
    "fourteen",
    "fifteen",
    "sixteen",
    "seventeen",
    "eighteen",
    "nineteen",
    "twenty",
)
NUMBERS = {word: n for n, word in enumerate(_WORDS)}
_COUNT = "|".join([*NUMBERS, r"\d+"])
_TOOL_NAME = re.compile(r"`([a-z]+_[a-z_]+)`")  # every tool's name has an underscore
_TABLE_ROW = re.compile(r"^\| `([a-z_]+)` \| ([^|]+?) \|" + r" (yes|no) \|" * 4 + "$", re.M)


def _text(name: str) -> str:
    return (ROOT / name).read_text(encoding="utf-8")


def _number(word: str) -> int:
    return int(word) if word.isdigit() else NUMBERS[word.lower()]


def _counts(text: str, noun: str) -> list[int]:
    """Every "<number> <noun>" the text states."""
    found = re.findall(rf"\b({_COUNT}) {noun}\b", text, flags=re.I)
    return [_number(word) for word in found]


def _paragraph(text: str, opening: str) -> str:
    start = text.index(opening)
    end = text.find("\n\n", start)
    return text[start : end if end >= 0 else None]


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> list[Tool]:
    """The tools list of the MCP server over a fresh node."""
    data = tmp_path_factory.mktemp("docs_catalog") / "node"

    async def listing() -> list[Tool]:
        await Node.init(data)
        async with Node.open(data) as node:
            issued = await node.create_token("alice", "team", ("read:workspace",))
            async with Client(build_server(node, token=issued.token)) as client:
                return list((await client.list_tools()).tools)

    return asyncio.run(listing())


def test_the_readme_counts_and_names_the_tools_served(served: list[Tool]) -> None:
    readme = _text("README.md")
    assert _counts(readme, "tools") == [len(served)]
    named = _TOOL_NAME.findall(_paragraph(readme, "The agent sees"))
    assert sorted(named) == sorted(t.name for t in served)


def test_docs_mcp_counts_and_tabulates_the_tools_served(served: list[Tool]) -> None:
    doc = _text("docs/mcp.md")
    assert _counts(doc, "tools") == [len(served)]
    readers = [t for t in served if t.annotations and t.annotations.read_only_hint]
    assert _counts(doc, "readers") == [len(readers)]
    rows = _TABLE_ROW.findall(doc.split("## The tools", 1)[1])
    yes = {True: "yes", False: "no"}
    expected = []
    for tool in served:
        hints = tool.annotations
        assert hints is not None
        expected.append(
            (
                tool.name,
                tool.title,
                yes[bool(hints.read_only_hint)],
                yes[bool(hints.destructive_hint)],
                yes[bool(hints.idempotent_hint)],
                yes[bool(hints.open_world_hint)],
            )
        )
    assert rows == expected


def test_docs_cli_names_a_command_for_every_tool_served(served: list[Tool]) -> None:
    # The command tables: | `memlane …` | `<tool>` … | … |
    tools = re.findall(r"^\| `memlane [^`]+` \| `([a-z]+_[a-z_]+)`", _text("docs/cli.md"), re.M)
    assert set(tools) == {t.name for t in served}
