"""Episode write tools: work_record, work_result, work_forget (docs/tools/episodes.md).

``prev_id`` is read from the store inside the writer's transaction, so concurrent records of
one caller chain in order and the link survives restarts.  An episode the caller may not touch
answers exactly like an unknown one: ``unknown episode id: <id>``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from node.access.callers import Caller
from node.errors import Refusal
from node.identity import uuid7
from node.store import AuditEvent, Txn
from node.store.audit import EntryEvent
from node.tools.args import check_names, encode, optional_time, present
from node.tools.context import ToolContext
from node.views.episodes import select_manager, select_newest_id
from protocol.timefmt import format_instant

__all__ = ["record_episode", "work_forget", "work_record", "work_result"]

_LATER = frozenset({"task_result", "verdict_at", "status", "eligibility", "trust"})
_RECORD = _LATER | {
    "session_id",
    "channel",
    "episode_type",
    "tool",
    "error_code",
    "duration_ms",
    "result_size",
    "summary",
    "tags",
    "expires_at",
}
_DEFAULTS: dict[str, Any] = {
    "channel": "api",
    "episode_type": "task",
    "status": "recorded",
    "eligibility": "eligible",
    "tags": [],
}
_TIMES = ("verdict_at", "expires_at")


def _fields(args: Mapping[str, Any], names: frozenset[str]) -> dict[str, Any]:
    fields = present(args, names)
    for name in _TIMES:
        if name in fields:
            fields[name] = optional_time(args, name)
    return fields


def _unknown(episode_id: object) -> Refusal:
    return Refusal(f"unknown episode id: {episode_id}")


async def _manageable(txn: Txn, caller: Caller, episode_id: object) -> None:
    if not isinstance(episode_id, str):
        raise _unknown(episode_id)
    found = await select_manager(txn, caller.workspace, episode_id)
    if found is None or not caller.may_manage(found[1], found[0]):
        raise _unknown(episode_id)


async def work_record(ctx: ToolContext, caller: Caller, args: Mapping[str, Any]) -> dict[str, Any]:
    """Record an episode; ``prev_id`` links it to the caller's newest one."""
    return await record_episode(ctx, caller, uuid7(ctx.author.store.wall()), args)


async def record_episode(
    ctx: ToolContext,
    caller: Caller,
    episode_id: str,
    args: Mapping[str, Any],
    *,
    dry_run: bool = False,
) -> dict[str, Any]:
    """work_record with the episode's id given — for an import, whose ids are made from the
    records it reads (docs/export.md §Importing); with ``dry_run`` only refused, or not."""
    check_names("work_record", args, _RECORD)
    caller.require("write:workspace")
    base = {"id": episode_id, "vault": caller.workspace, "caller": caller.principal}
    base |= _DEFAULTS | _fields(args, _RECORD)
    encode("episode.record", base | {"prev_id": None})  # refuse bad input before queueing
    if dry_run:
        return {"id": episode_id}
    payload: dict[str, Any] = dict(base)

    async def build(txn: Txn) -> tuple[bytes, dict[str, Any]]:
        payload["prev_id"] = await select_newest_id(txn, caller.workspace, caller.principal)
        return encode("episode.record", payload), payload

    authored = await ctx.author.write("episode.record", build)
    wall = authored.entry.header.hlc.wall
    return {
        "id": episode_id,
        "prev_id": payload["prev_id"],
        "ts": wall,
        "ingest_time": format_instant(wall),
    }


async def work_result(ctx: ToolContext, caller: Caller, args: Mapping[str, Any]) -> dict[str, Any]:
    """Record an episode's later-known outcome (owner or admin)."""
    check_names("work_result", args, _LATER | {"id"})
    caller.require("write:workspace")
    episode_id, fields = args.get("id"), _fields(args, _LATER)
    if not fields:
        raise Refusal("work_result needs at least one of " + ", ".join(sorted(_LATER)))
    payload = {"id": episode_id, "vault": caller.workspace, "caller": caller.principal} | fields

    async def build(txn: Txn) -> tuple[bytes, dict[str, Any]]:
        await _manageable(txn, caller, episode_id)
        return encode("episode.amend", payload), payload

    if not isinstance(episode_id, str):
        raise _unknown(episode_id)
    authored = await ctx.author.write("episode.amend", build)
    return {"id": episode_id, "entry_id": authored.entry.id.hex(), "amended": sorted(fields)}


async def work_forget(ctx: ToolContext, caller: Caller, args: Mapping[str, Any]) -> dict[str, Any]:
    """Tombstone an episode on every node (owner or admin)."""
    check_names("work_forget", args, frozenset({"id"}))
    caller.require("write:workspace")
    episode_id = args.get("id")
    if not isinstance(episode_id, str):
        raise _unknown(episode_id)
    payload = {"id": episode_id, "vault": caller.workspace, "caller": caller.principal}

    async def build(txn: Txn) -> tuple[bytes, dict[str, Any]]:
        await _manageable(txn, caller, episode_id)
        return encode("episode.forget", payload), payload

    event = EntryEvent(AuditEvent.EPISODE_FORGOTTEN, caller.workspace, episode_id, caller.principal)
    await ctx.author.write("episode.forget", build, event)
    return {"id": episode_id, "forgotten": True}
