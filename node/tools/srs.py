"""SR write tools: e_write, e_correct, e_adjust, e_erase (replicated entries) and e_delete /
e_undelete (local rows) — docs/authority.md, docs/erasure.md.

An SR the caller may not write answers exactly like an unknown one: ``unknown sr_id: <id>``.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any, TypeGuard

from node.access.callers import Caller
from node.errors import Refusal
from node.identity import uuid7
from node.store import AuditEvent, Content, Txn
from node.store.audit import EntryEvent, audit
from node.tools.args import check_names, encode, optional_time, present
from node.tools.author import Author
from node.tools.context import ToolContext
from node.views.read_rule import may_read_sr
from node.views.srs import entry_ids, mark_deleted, select_live
from protocol.entry import Entry
from protocol.kinds import UUID
from protocol.timefmt import format_instant

__all__ = ["create_sr", "e_adjust", "e_correct", "e_delete", "e_erase", "e_undelete", "e_write"]

_UUID = re.compile(UUID)
CONTENT = frozenset({"title", "text", "links", "conversational", "private_fields"})
META = frozenset({"tags", "content_time", "lane", "lane_uuid", "visibility"})
_WRITE_ARGS = CONTENT | META | {"sr_id"}
# Set at creation, changed later only by sr.adjust, by the owner or an admin (docs/entries.md
# §Kinds, docs/authority.md §Scopes).
_ADJUST_ONLY = META - {"tags"}
_CREATE_DEFAULTS: dict[str, Any] = {"visibility": "workspace", "lane": "default", "tags": []}


def _fields(args: Mapping[str, Any], names: frozenset[str]) -> dict[str, Any]:
    fields = present(args, names)
    if "content_time" in fields:
        fields["content_time"] = optional_time(args, "content_time")
    return fields


def _is_id(sr_id: object) -> TypeGuard[str]:
    return isinstance(sr_id, str) and _UUID.fullmatch(sr_id) is not None


def _unknown(sr_id: object) -> Refusal:
    return Refusal(f"unknown sr_id: {sr_id}")


async def _sr_row(
    txn: Txn, caller: Caller, sr_id: object, *, deleted_ok: bool = False
) -> tuple[str, str, bool]:
    """(workspace, owner, deleted here) of an SR the caller can read, else the unknown-id
    refusal: an SR the caller cannot read does not exist for it (docs/authority.md).  A
    deleted SR is hidden on this node, so only undelete may address it."""
    if not _is_id(sr_id):
        raise _unknown(sr_id)
    sr = await select_live(txn, sr_id)
    if sr is None or not may_read_sr(caller, sr.workspace, sr.owner, sr.private):
        raise _unknown(sr_id)
    if sr.deleted and not deleted_ok:
        raise _unknown(sr_id)
    return sr.workspace, sr.owner, sr.deleted


async def _writable(txn: Txn, caller: Caller, sr_id: object, *, deleted_ok: bool = False) -> bool:
    """Whether the SR is deleted here, once the caller may manage it (owner or admin)."""
    workspace, owner, deleted = await _sr_row(txn, caller, sr_id, deleted_ok=deleted_ok)
    if not caller.may_manage(owner, workspace):
        raise _unknown(sr_id)
    return deleted


def _result(sr_id: str, entry: Entry, created: bool) -> dict[str, Any]:
    return {
        "sr_id": sr_id,
        "entry_id": entry.id.hex(),
        "ingest_time": format_instant(entry.header.hlc.wall),
        "created": created,
    }


def _audit_written(caller: Caller, sr_id: str) -> EntryEvent:
    return EntryEvent(AuditEvent.SR_WRITTEN, caller.workspace, sr_id, caller.principal)


def _payload(caller: Caller, sr_id: str, body: dict[str, Any]) -> dict[str, Any]:
    """An SR entry's payload: whose SR, in which workspace, by whom, and ``body``."""
    return {"sr_id": sr_id, "workspace": caller.workspace, "principal": caller.principal} | body


async def _put(
    author: Author, caller: Caller, kind: str, sr_id: str, body: dict[str, Any], *, create: bool
) -> dict[str, Any]:
    payload = _payload(caller, sr_id, body)
    data = encode(kind, payload)

    async def build(txn: Txn) -> tuple[bytes, dict[str, Any]]:
        check = _writable if kind == "sr.adjust" else _sr_row
        await check(txn, caller, sr_id)
        return data, payload

    content: Content = (data, payload) if create else build
    authored = await author.write(kind, content, _audit_written(caller, sr_id))
    return _result(sr_id, authored.entry, create)


async def e_write(ctx: ToolContext, caller: Caller, args: Mapping[str, Any]) -> dict[str, Any]:
    """Create an SR (no ``sr_id``) or update the fields given of one the caller can write."""
    author = ctx.author
    check_names("e_write", args, _WRITE_ARGS)
    caller.require("write:workspace")
    fields = _fields(args, CONTENT | META)
    sr_id = args.get("sr_id")
    if sr_id is None:
        return await _create(ctx, caller, uuid7(author.store.wall()), fields)
    if not _is_id(sr_id):
        raise _unknown(sr_id)
    if not fields:
        raise Refusal("e_write with an sr_id needs at least one field to change")
    if adjust_only := sorted(_ADJUST_ONLY & fields.keys()):
        names = ", ".join(adjust_only)
        raise Refusal(f"e_write cannot change {names} of an existing SR (use e_adjust)")
    body = {"create": False, **fields}
    return ctx.written(await _put(author, caller, "sr.put", sr_id, body, create=False))


async def create_sr(
    ctx: ToolContext, caller: Caller, sr_id: str, args: Mapping[str, Any], *, dry_run: bool = False
) -> dict[str, Any]:
    """Create the SR ``sr_id`` from e_write's fields, refused as e_write's create is — for an
    import, whose ids are made from the records it reads (docs/export.md §Importing); with
    ``dry_run`` only refused, or not, and nothing written."""
    check_names("e_write", args, CONTENT | META)
    caller.require("write:workspace")
    return await _create(ctx, caller, sr_id, _fields(args, CONTENT | META), dry_run=dry_run)


async def _create(
    ctx: ToolContext, caller: Caller, sr_id: str, fields: dict[str, Any], *, dry_run: bool = False
) -> dict[str, Any]:
    if not fields.get("title") and not fields.get("text"):
        raise Refusal("e_write needs a title or a text to create an SR")
    body = {"create": True, **_CREATE_DEFAULTS, **fields}
    if dry_run:
        encode("sr.put", _payload(caller, sr_id, body))
        return {"sr_id": sr_id, "created": False}
    return ctx.written(await _put(ctx.author, caller, "sr.put", sr_id, body, create=True))


async def e_correct(ctx: ToolContext, caller: Caller, args: Mapping[str, Any]) -> dict[str, Any]:
    """Correct content fields of an SR, with a reason; sets ``has_correction``."""
    check_names("e_correct", args, CONTENT | {"sr_id", "reason"})
    caller.require("write:workspace")
    sr_id, fields = args.get("sr_id"), _fields(args, CONTENT)
    if not _is_id(sr_id):
        raise _unknown(sr_id)
    if not fields:
        raise Refusal("e_correct needs at least one content field to correct")
    body = {"reason": args.get("reason"), **fields}
    return ctx.written(await _put(ctx.author, caller, "sr.correct", sr_id, body, create=False))


async def e_adjust(ctx: ToolContext, caller: Caller, args: Mapping[str, Any]) -> dict[str, Any]:
    """Change metadata fields of an SR (owner or admin); sets ``has_adjustment``."""
    check_names("e_adjust", args, META | {"sr_id"})
    caller.require("write:workspace")
    sr_id, fields = args.get("sr_id"), _fields(args, META)
    if not _is_id(sr_id):
        raise _unknown(sr_id)
    if not fields:
        raise Refusal("e_adjust needs at least one metadata field to change")
    return ctx.written(await _put(ctx.author, caller, "sr.adjust", sr_id, fields, create=False))


async def _set_deleted(
    author: Author, caller: Caller, args: Mapping[str, Any], tool: str, deleted: bool
) -> dict[str, Any]:
    check_names(tool, args, frozenset({"sr_id"}))
    caller.require("write:workspace")
    sr_id = args.get("sr_id")
    store = author.store

    async def op(txn: Txn) -> bool:
        if await _writable(txn, caller, sr_id, deleted_ok=True) == deleted:
            return False
        hlc = store.now()
        mark_deleted(txn, str(sr_id), deleted, hlc, caller.principal)
        event = AuditEvent.SR_DELETED if deleted else AuditEvent.SR_UNDELETED
        audit(
            txn,
            event,
            hlc.wall,
            workspace=caller.workspace,
            subject=str(sr_id),
            principal=caller.principal,
        )
        return True

    changed: bool = await store.run(op)
    return {"sr_id": sr_id, "deleted": deleted, "changed": changed}


async def e_delete(ctx: ToolContext, caller: Caller, args: Mapping[str, Any]) -> dict[str, Any]:
    """Hide an SR on this node only (local; its entries stay in the log)."""
    return await _set_deleted(ctx.author, caller, args, "e_delete", True)


async def e_undelete(ctx: ToolContext, caller: Caller, args: Mapping[str, Any]) -> dict[str, Any]:
    """Restore an SR this node deleted."""
    return await _set_deleted(ctx.author, caller, args, "e_undelete", False)


async def e_erase(ctx: ToolContext, caller: Caller, args: Mapping[str, Any]) -> dict[str, Any]:
    """Erase an SR on every node (owner or admin): the payloads of its entries and every row
    derived from them go; the signed headers stay (docs/erasure.md)."""
    check_names("e_erase", args, frozenset({"sr_id", "reason"}))
    caller.require("write:workspace")
    sr_id, reason = args.get("sr_id"), args.get("reason")
    if not _is_id(sr_id):
        raise _unknown(sr_id)
    if not isinstance(reason, str) or not reason.strip():
        raise Refusal("e_erase needs a reason")
    named: list[str] = []

    async def build(txn: Txn) -> tuple[bytes, dict[str, Any]]:
        await _writable(txn, caller, sr_id, deleted_ok=True)
        named[:] = await entry_ids(txn, sr_id)
        payload = _payload(caller, sr_id, {"entries": named, "reason": reason})
        return encode("sr.erase", payload), payload

    authored = await ctx.author.write("sr.erase", build)
    entry = authored.entry
    return {
        "sr_id": sr_id,
        "erased": True,
        "entries": len(named),
        "entry_id": entry.id.hex(),
        "ingest_time": format_instant(entry.header.hlc.wall),
    }
