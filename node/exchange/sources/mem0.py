"""mem0's memories in the shape its list call (``get_all``) returns them: a JSON array, or an
object whose ``results`` is one, of memories with ``id``, ``memory``, ``metadata``, ``user_id``,
``agent_id``, ``created_at`` and ``updated_at``.  A memory becomes an SR: its text the memory,
its creation time the content time, its user and agent tags (``user:…``, ``agent:…``), and the
text values of its metadata's ``categories`` tags too.  Records are numbered from 1 in the
array's order: a problem names its record's number.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from node.exchange.records import MAX_LINE, FileError, Problem, Read, SrRecord, instant_of

__all__ = ["MAX_FILE", "read"]

MAX_FILE = 256 << 20  # a mem0 file is one JSON document, read whole: at most 256 MiB
_KEYS = frozenset(
    {
        "id",
        "memory",
        "hash",
        "metadata",
        "user_id",
        "agent_id",
        "run_id",
        "actor_id",
        "role",
        "categories",
        "created_at",
        "updated_at",
        "score",
    }
)


def read(path: Path) -> Iterator[Read]:
    if path.stat().st_size > MAX_FILE:
        raise FileError(f"{path} is larger than {MAX_FILE >> 20} MiB")
    try:
        document = json.loads(path.read_bytes())
    except ValueError as exc:
        raise FileError(f"{path} is not a JSON document of mem0's memories ({exc})") from exc
    memories = document.get("results") if isinstance(document, dict) else document
    if not isinstance(memories, list):
        raise FileError(f"{path} holds no list of memories (an array, or results: [...])")
    for number, memory in enumerate(memories, 1):
        yield _memory(number, memory)


def _memory(number: int, m: Any) -> Read:
    if not isinstance(m, dict) or not isinstance(m.get("id"), str) or not m["id"]:
        return Problem(number, f"record {number}: a memory needs an id")
    if not isinstance(m.get("memory"), str) or not m["memory"].strip():
        return Problem(number, f"record {number}: a memory needs its text (memory)")
    if len(m["memory"].encode()) > MAX_LINE:
        return Problem(number, f"record {number}: a memory longer than {MAX_LINE} bytes")
    unknown = sorted(set(m) - _KEYS)
    if unknown:
        return Problem(number, f"record {number}: unknown fields: {', '.join(unknown)}")
    fields: dict[str, Any] = {"text": m["memory"], "tags": _tags(m)}
    when = instant_of(m.get("created_at"))
    if when is not None:
        fields["content_time"] = when
    return SrRecord(number, f"mem0:{m['id']}", fields, at=f"record {number}")


def _tags(m: dict[str, Any]) -> list[str]:
    tags = [
        f"{k.removesuffix('_id')}:{m[k]}"
        for k in ("user_id", "agent_id")
        if isinstance(m.get(k), str) and m[k]
    ]
    metadata = m["metadata"] if isinstance(m.get("metadata"), dict) else {}
    categories = m.get("categories") or metadata.get("categories") or []
    if isinstance(categories, list):
        tags += [c for c in categories if isinstance(c, str) and c]
    return list(dict.fromkeys(tags))
