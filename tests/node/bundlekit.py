"""Helpers for the bundle and archive tests: callers per workspace, what a node answers, what
a refused import must leave as it was, and archives read and rewritten member by member."""

from __future__ import annotations

import io
import json
import tarfile
from pathlib import Path
from typing import Any

from node.access.callers import Caller
from node.node import Node
from tests.node.helpers import counts, digest

__all__ = ["answers", "caller", "snapshot", "write"]


async def caller(node: Node, workspace: str = "team", principal: str = "alice") -> Caller:
    scopes = ("read:workspace", "write:workspace", "admin:workspace")
    issued = await node.create_token(principal, workspace, scopes)
    return await node.authenticate(issued.token)


async def write(node: Node, who: Caller, *titles: str) -> None:
    for title in titles:
        await node.e_write(who, title=title, text=f"{title}, written on {node.info.node_id}")


async def answers(node: Node, who: Caller) -> list[dict[str, Any]]:
    """What the tools say about the caller's workspace: the timeline and its changes."""
    return [
        await node.e_timeline(who, action="list", page_size=100),
        await node.e_timeline(who, action="changes", since="2020-01-01", page_size=100),
    ]


async def snapshot(node: Node) -> tuple[dict[str, int], str, int]:
    """Everything a refused import must leave as it was: row counts, the log's digest and the
    audit feed's length."""
    reader = node.reader()
    return await counts(node), await digest(node), await reader.max_audit_seq()


def rewritten(archive: Path, out: Path, change: dict[str, bytes]) -> Path:
    """The archive with some members' contents replaced (sizes follow)."""
    with tarfile.open(archive) as src, tarfile.open(out, "w:gz") as dst:
        for member in src.getmembers():
            data = change.get(member.name)
            if data is None:
                f = src.extractfile(member)
                assert f is not None
                data = f.read()
            member.size = len(data)
            dst.addfile(member, io.BytesIO(data))
    return out


def manifest_of(archive: Path) -> dict[str, Any]:
    with tarfile.open(archive) as tar:
        f = tar.extractfile("manifest.json")
        assert f is not None
        manifest: dict[str, Any] = json.load(f)
        return manifest


def nested(depth: int) -> str:
    return "[" * depth + "]" * depth


def deeper(manifest: dict[str, Any], depth: int) -> str:
    """The manifest's JSON with a member nested ``depth`` deep (too deep for ``json.loads``)."""
    return json.dumps(manifest)[:-1] + f', "x": {nested(depth)}}}'
