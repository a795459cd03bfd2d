"""The files ``memlane import`` reads, one module each (docs/export.md §Importing): ``memlane``
(memlane's own JSON lines export), ``mcp_memory`` (the MCP reference memory server's
``memory.jsonl``), ``markdown`` (a folder of notes with YAML front matter and wiki links),
``mem0`` (mem0's memories as its list call returns them).  Each turns a file into records and
problems; none writes.

``source_of`` tells which one a path is, from what it is (a folder: notes) and how it starts (a
memlane export's header, an entity or relation of the memory server, mem0's JSON array or
``results``): the importer's ``--from`` only overrides it.  A path none of them reads is refused
whole, in one line that says what was expected.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from node.exchange.export import FORMAT
from node.exchange.records import FileError, Read, open_lines
from node.exchange.sources import markdown, mcp_memory, mem0, memlane

__all__ = ["SOURCES", "source_of"]

SOURCES: dict[str, Callable[[Path], Iterator[Read]]] = {
    "memlane": memlane.read,
    "mcp-memory": mcp_memory.read,
    "markdown": markdown.read,
    "mem0": mem0.read,
}
EXPECTED = (
    "a memlane export (memlane export's JSON lines), the MCP memory server's memory.jsonl, "
    "mem0's memories (JSON) or a folder of Markdown notes; --from SOURCE names what wrote it"
)


_HEAD = 4096  # bytes that tell a JSON document from JSON lines
_MEM0 = re.compile(rb'\A(\[|\{\s*"results"\s*:)')  # an array, or {"results": …}, of memories


def source_of(path: Path, named: str | None) -> str:
    """The source that reads ``path``: ``named`` (a file's source, for a file), else the one
    its kind and first line tell."""
    if not path.exists():
        raise FileError(f"{path}: no such file or folder")
    if named is None:
        return "markdown" if path.is_dir() else _detected(path)
    if path.is_dir() and named != "markdown":
        raise FileError(
            f"{path} is a folder: --from {named} reads a file (a folder is Markdown notes)"
        )
    return named


def _detected(path: Path) -> str:
    with path.open("rb") as f:
        head = f.read(_HEAD).lstrip()
    if _MEM0.match(head):  # JSON of mem0's, its first line past what a line may be, maybe
        return "mem0"
    found = _told(_first_line(path))
    if found is None:
        raise FileError(f"{path} is not a file memlane can import: expected {EXPECTED}")
    return found


def _first_line(path: Path) -> str | None:
    for _, text in open_lines(path):
        return text
    return None


def _told(line: str | None) -> str | None:
    """The source a file's first line names, if any."""
    if line == "{":  # a JSON document written across lines: mem0's
        return "mem0"
    try:
        record: Any = json.loads(line or "")
    except json.JSONDecodeError:
        return None
    if not isinstance(record, dict):
        return None
    if "results" in record:
        return "mem0"
    kind = record.get("type")
    if kind == "header" and record.get("format") == FORMAT:
        return "memlane"
    return "mcp-memory" if kind in ("entity", "relation") else None
