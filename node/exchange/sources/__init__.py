"""The files ``memlane import`` reads, one module each (docs/export.md §Importing): ``memlane``
(memlane's own JSON lines export), ``mcp_memory`` (the MCP reference memory server's
``memory.jsonl``), ``markdown`` (a folder of notes with YAML front matter and wiki links),
``mem0`` (mem0's memories as its list call returns them).  Each turns a file into records
and problems; none writes.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

from node.exchange.records import Read
from node.exchange.sources import markdown, mcp_memory, mem0, memlane

__all__ = ["SOURCES"]

SOURCES: dict[str, Callable[[Path], Iterator[Read]]] = {
    "memlane": memlane.read,
    "mcp-memory": mcp_memory.read,
    "markdown": markdown.read,
    "mem0": mem0.read,
}
