"""Helpers for the LangGraph store's tests (docs/langgraph.md): a node in a temporary
directory as ``MemlaneStore`` opens it (the system's clock), its tokens, and items as plain
tuples (timestamps left out: every store stamps its own)."""

from __future__ import annotations

import asyncio
from collections.abc import Coroutine, Iterable, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, TypeVar

from node.node import Node

__all__ = ["READ_WRITE", "Plain", "issue", "make_node", "plain", "plain_one", "stored"]

T = TypeVar("T")
READ_WRITE = ("read:workspace", "write:workspace")


def _run(work: Coroutine[Any, Any, T]) -> T:
    """``work`` on a loop of its own, in a thread: callable from a test's loop too."""
    with ThreadPoolExecutor(1) as pool:
        return pool.submit(asyncio.run, work).result()


Plain = tuple[tuple[str, ...], str, dict[str, Any]]


def make_node(path: Path, *, durable: bool = True) -> Path:
    """A node initialised in ``path``; ``durable`` False: SQLite's ``synchronous = OFF``
    (for tests of answers that write many small batches, not of what survives a crash)."""
    _run(Node.init(path))
    if not durable:
        (path / "config.toml").write_text('synchronous = "OFF"\n')
    return path


def issue(
    data: Path,
    workspaces: Sequence[str],
    principal: str = "alice",
    scopes: Sequence[str] = READ_WRITE,
) -> list[str]:
    """A token of ``principal`` for each of ``workspaces``."""

    async def issued() -> list[str]:
        async with Node.open(data) as node:
            return [(await node.create_token(principal, w, scopes)).token for w in workspaces]

    return _run(issued())


def plain_one(item: Any) -> Plain | None:
    return None if item is None else (tuple(item.namespace), item.key, item.value)


def plain(items: Iterable[Any]) -> list[Plain]:
    return [(tuple(i.namespace), i.key, i.value) for i in items]


def stored(data: Path) -> tuple[int, int, int]:
    """What the node holds that a write would change: entries, SR rows, item rows."""

    async def counted() -> tuple[int, int, int]:
        async with Node.open(data) as node:
            reader = node.reader()
            return (
                await reader.count("headers"),
                await reader.count("srs"),
                await reader.count("store_items"),
            )

    return _run(counted())
