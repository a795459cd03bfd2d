"""The MCP reference memory server's ``memory.jsonl`` (``@modelcontextprotocol/server-memory``):
entity lines (``name``, ``entityType``, ``observations``) and relation lines (``from``, ``to``,
``relationType``).  An entity becomes an SR — its name the title, its observations the text, a
line each, its type a tag — and each relation from it a link to the relation's target, with the
relation kept as a last line of the text (``relationType → to``).  A relation naming an entity
the file does not hold is a problem of its line; the entity is still imported.  A file none of
whose lines is an entity or a relation is not the server's, and is refused whole.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from node.exchange.records import (
    FileError,
    Problem,
    Read,
    SrRecord,
    open_lines,
    too_long_or_not_text,
)

__all__ = ["read"]


@dataclass
class _Entity:
    line: int
    kind: str
    observations: list[str]
    relations: list[tuple[str, str]] = field(default_factory=list)  # (type, to)


def read(path: Path) -> Iterator[Read]:
    entities: dict[str, _Entity] = {}
    relations: list[tuple[int, str, str, str]] = []
    problems: list[Problem] = []
    for number, text in open_lines(path):
        problem = _take(number, text, entities, relations)
        if problem is not None:
            problems.append(problem)
    if not entities and not relations and problems:
        raise FileError(
            f"{path} is not the MCP memory server's memory.jsonl: no line of it is an entity "
            "or a relation"
        )
    yield from problems
    for number, source, to, kind in relations:
        if source not in entities or to not in entities:
            missing = source if source not in entities else to
            yield Problem(
                number, f"line {number}: a relation to an entity not in the file: {missing}"
            )
        else:
            entities[source].relations.append((kind, to))
    for name, e in entities.items():
        lines = [*e.observations, *(f"{kind} → {to}" for kind, to in e.relations)]
        fields: dict[str, Any] = {"title": name, "text": "\n".join(lines), "tags": [e.kind]}
        links = tuple(dict.fromkeys(f"mcp-memory:{to}" for _, to in e.relations))
        yield SrRecord(e.line, f"mcp-memory:{name}", fields, links)


def _take(
    number: int,
    text: str | None,
    entities: dict[str, _Entity],
    relations: list[tuple[int, str, str, str]],
) -> Problem | None:
    if text is None:
        return too_long_or_not_text(number)
    try:
        record = json.loads(text)
    except json.JSONDecodeError as exc:
        return Problem(number, f"line {number}: not JSON ({exc.msg})")
    kind = record.get("type") if isinstance(record, dict) else None
    if kind == "entity":
        return _entity(number, record, entities)
    if kind == "relation":
        names = [record.get(k) for k in ("from", "to", "relationType")]
        if not all(isinstance(n, str) and n for n in names):
            return Problem(
                number, f"line {number}: a relation needs from, to and relationType as text"
            )
        relations.append((number, names[0], names[1], names[2]))
        return None
    return Problem(number, f"line {number}: neither an entity nor a relation")


def _entity(number: int, record: dict[str, Any], entities: dict[str, _Entity]) -> Problem | None:
    name, kind, observations = (record.get(k) for k in ("name", "entityType", "observations"))
    if not isinstance(name, str) or not name or not isinstance(kind, str):
        return Problem(number, f"line {number}: an entity needs a name and an entityType as text")
    if not isinstance(observations, list) or not all(isinstance(o, str) for o in observations):
        return Problem(number, f"line {number}: an entity's observations must be a list of text")
    if name in entities:
        return Problem(number, f"line {number}: a second entity named {name}")
    entities[name] = _Entity(number, kind, observations)
    return None
