"""Helpers for the bundle and archive tests: callers per workspace, what a node answers, and
what a refused import must leave as it was."""

from __future__ import annotations

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
