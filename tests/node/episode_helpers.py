"""Helpers for the episode read tests: payloads as another node authors them, and short
forms of the two read tools' answers."""

from __future__ import annotations

from typing import Any

from node.access.callers import Caller
from node.node import Node

NOW = 1_790_000_000_000  # the wall fixture's start: 2026-09-21T14:13:20Z
UNKNOWN = "00000000-0000-7000-8000-0000000000ee"


def eid(n: int) -> str:
    return f"00000000-0000-7000-8000-{n:012d}"


def record(
    episode_id: str,
    *,
    caller: str = "alice",
    vault: str = "team",
    prev: str | None = None,
    **fields: Any,
) -> dict[str, Any]:
    """An ``episode.record`` payload as another node authors it."""
    return {
        "id": episode_id,
        "vault": vault,
        "caller": caller,
        "channel": "api",
        "episode_type": "task",
        "tags": [],
        "prev_id": prev,
    } | fields


def about(
    episode_id: str, *, caller: str = "alice", vault: str = "team", **fields: Any
) -> dict[str, Any]:
    """An ``episode.amend`` or ``episode.forget`` payload."""
    return {"id": episode_id, "vault": vault, "caller": caller} | fields


def unavailable(episode_id: str) -> dict[str, Any]:
    """work_episode_chain's answer for a start the caller cannot see."""
    return {
        "available": False,
        "message": f"no episode {episode_id} is available to this caller",
        "chain": [],
        "truncated": False,
    }


async def receive(node: Node, entries: list[Any], source: str = "peer") -> None:
    report = await node.receive(entries, source=source)
    assert report.stored == len(entries), report


async def walk(node: Node, who: Caller, start: str, **args: Any) -> tuple[list[str], bool]:
    """The ids a chain shows and its ``truncated``; the chain must be available."""
    answer = await node.work_episode_chain(who, id=start, **args)
    assert answer["available"] is True, answer
    return [e["id"] for e in answer["chain"]], answer["truncated"]


async def listed(node: Node, who: Caller, **args: Any) -> list[str]:
    """The ids work_episodes lists on one page of 100."""
    answer = await node.work_episodes(who, page_size=100, **args)
    assert answer["has_more"] is False
    return [e["id"] for e in answer["episodes"]]


async def record_ids(node: Node, who: Caller, n: int, **args: Any) -> list[str]:
    return [(await node.work_record(who, summary=f"s{i}", **args))["id"] for i in range(n)]
