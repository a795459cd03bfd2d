"""What each tool answers, as the JSON Schema of its MCP ``outputSchema`` (docs/mcp.md
§outputSchema).

A tool's structured content is its answer or its refusal, so every schema is an object schema
(MCP requires ``"type": "object"`` at the top) whose ``anyOf`` admits the tool's answers and
the refusal ``{"error": <text>}`` — with ``call_window``, the CallWindowRow of a call refused
before dispatch (docs/time-windows.md §The row).  Clients check structured content against
it: the official TypeScript SDK does for every result, refusals included; the Python SDK for
answers.

The schemas describe; they are open.  No object forbids properties it does not name, so a
client of an older listing still accepts a newer node's answer; the tests hold every answer to
a closed copy (``tests/node/test_mcp_outputs.py``), so each property an answer carries is named
here.  A field that may be null admits it through ``anyOf`` with ``{"type": "null"}``: one type
per schema, never a list of types.  The CallWindowRow is read from the kind registry
(``protocol.kinds``), which checks every row filed, so the two cannot drift apart.
"""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType
from typing import Any

from node.store.audit import AuditEvent
from node.tools.episode_reads import FORMATS
from node.tools.timeline_spec import ACTIONS
from node.views.fold import COMPARED
from protocol.kinds import KINDS
from protocol.schema import Choice, Flag, Integer, Nested, NestedList, Number, Schema, Text

__all__ = ["OUTPUTS", "REFUSAL", "refusable"]

Json = dict[str, Any]

_STRING: Json = {"type": "string"}
_INTEGER: Json = {"type": "integer"}
_BOOLEAN: Json = {"type": "boolean"}
_NUMBER: Json = {"type": "number"}
_TRUE: Json = {"type": "boolean", "const": True}


def _nullable(schema: Json) -> Json:
    return {"anyOf": [schema, {"type": "null"}]}


def _array(items: Json) -> Json:
    return {"type": "array", "items": items}


def _object(properties: Mapping[str, Json], *required: str) -> Json:
    schema: Json = {"type": "object", "properties": dict(properties)}
    return schema | ({"required": list(required)} if required else {})


def _described(schema: Json, description: str) -> Json:
    return schema | {"description": description}


# -- the CallWindowRow, from the kind registry ----------------------------------------------------


def _of(t: object) -> Json:
    """The JSON Schema of a payload type of ``protocol.schema`` (the kinds a row uses)."""
    if isinstance(t, Text):
        return dict(_STRING)
    if isinstance(t, Choice):
        return {"type": "string", "enum": list(t.values)}
    if isinstance(t, Integer):
        return {"type": "integer", "minimum": t.lo, "maximum": t.hi}
    if isinstance(t, Number):
        return dict(_NUMBER)
    if isinstance(t, Flag):
        return dict(_BOOLEAN)
    if isinstance(t, Nested):
        return _record(t.schema)
    if isinstance(t, NestedList):
        return _array(_record(t.schema)) | {"minItems": t.min_items, "maxItems": t.max_items}
    raise TypeError(f"no JSON Schema for {type(t).__name__}")  # pragma: no cover


def _record(schema: Schema) -> Json:
    properties = {
        f.name: _nullable(_of(f.type)) if f.nullable else _of(f.type) for f in schema.fields
    }
    return _object(properties, *schema.required)


_ROW = KINDS["call.window"].schema.by_name["row"].type
assert isinstance(_ROW, Nested)
CALL_WINDOW = _described(_record(_ROW.schema), "the CallWindowRow filed for the call")

# -- the refusal ----------------------------------------------------------------------------------

REFUSAL: Mapping[str, Any] = MappingProxyType(
    _object(
        {
            "error": _described(_STRING, "why the call was refused: the tool's own text"),
            "call_window": _described(CALL_WINDOW, "a call refused before dispatch: its row"),
        },
        "error",
    )
)


def refusable(*answers: Json) -> Mapping[str, Any]:
    """The output schema of a tool answering one of ``answers``, or refusing."""
    return MappingProxyType({"type": "object", "anyOf": [*answers, dict(REFUSAL)]})


# -- e_timeline -----------------------------------------------------------------------------------

_INSTANT = "an instant in UTC (YYYY-MM-DDTHH:MM:SS[.fff]Z)"
_SR = _object(
    {
        "sr_id": _STRING,
        "title": _STRING,
        "text": _STRING,
        "lane": _STRING,
        "lane_uuid": _STRING,
        "content_time": _nullable(_described(_STRING, _INSTANT)),
        "ingest_time": _described(_STRING, f"the newest entry's writer clock: {_INSTANT}"),
        "created_time": _described(_STRING, f"the creating entry's writer clock: {_INSTANT}"),
        "tags": _array(_STRING),
        "conversational": _BOOLEAN,
        "has_correction": _BOOLEAN,
        "has_adjustment": _BOOLEAN,
        "caller": _described(_STRING, "the principal that created the SR (its owner)"),
        "node_id": _described(_STRING, "the node that wrote the SR's current version"),
        "score": _described(_NUMBER, "find: relevance over what the caller can read"),
        "rank": _described(_INTEGER, "find: its place in the ranking, 1 = most relevant"),
    },
    "sr_id",
    "title",
    "text",
    "lane",
    "lane_uuid",
    "content_time",
    "ingest_time",
    "created_time",
    "tags",
    "conversational",
    "has_correction",
    "has_adjustment",
    "caller",
    "node_id",
)
_PAGED = ("page", "page_size", "has_more")
_PAGING: Mapping[str, Json] = {"page": _INTEGER, "page_size": _INTEGER, "has_more": _BOOLEAN}
_READING = _object(
    {
        "action": {"type": "string", "enum": [a for a in ACTIONS if a != "changes"]},
        "results": _array(_SR),
        **_PAGING,
        "shed_terms": _described(_array(_STRING), "find, intersect: the items shed as noise"),
        "semantic_used": _BOOLEAN,
        "semantic_error": _STRING,
        "semantic_pending": _INTEGER,
    },
    "action",
    "results",
    *_PAGED,
)
_CHANGE = _object(
    {
        "sr_id": _STRING,
        "change": {"type": "string", "enum": ["new", "updated", "deleted", "undeleted"]},
        "changed_at": _described(_STRING, _INSTANT),
        "fields": _array({"type": "string", "enum": list(COMPARED)}),
        "hidden_change": _TRUE,
        "lane": _STRING,
        "lane_uuid": _STRING,
        "has_correction": _BOOLEAN,
        "has_adjustment": _BOOLEAN,
        "caller": _STRING,
        "node_id": _STRING,
    },
    "sr_id",
    "change",
    "changed_at",
    "lane",
    "lane_uuid",
    "has_correction",
    "has_adjustment",
    "caller",
    "node_id",
)
_CHANGES = _object(
    {
        "action": {"type": "string", "const": "changes"},
        "since": _STRING,
        "as_of": _described(_STRING, "pass it back for every later page"),
        "changes": _array(_CHANGE),
        **_PAGING,
    },
    "action",
    "since",
    "as_of",
    "changes",
    *_PAGED,
)

# -- e_audit --------------------------------------------------------------------------------------

_EVENT = _object(
    {
        "seq": _INTEGER,
        "event": {"type": "string", "enum": [e.value for e in AuditEvent]},
        "at": _described(_STRING, _INSTANT),
        "subject": _nullable(_STRING),
        "entry_id": _nullable(_STRING),
        "detail": {"type": "object"},
    },
    "seq",
    "event",
    "at",
    "subject",
    "entry_id",
)
_AUDIT = _object(
    {"feed_id": _STRING, "events": _array(_EVENT), "covered_seq": _INTEGER},
    "feed_id",
    "events",
    "covered_seq",
)

# -- episodes -------------------------------------------------------------------------------------

_EPISODE = _described(
    _object(
        {
            "id": _STRING,
            "ts": _described(_INTEGER, "ms since the Unix epoch"),
            "vault": _STRING,
            "session_id": _nullable(_STRING),
            "caller": _STRING,
            "channel": _STRING,
            "episode_type": _STRING,
            "task_result": _nullable(_NUMBER),
            "verdict_at": _nullable(_INTEGER),
            "tool": _nullable(_STRING),
            "status": _STRING,
            "error_code": _nullable(_STRING),
            "duration_ms": _nullable(_INTEGER),
            "result_size": _nullable(_INTEGER),
            "summary": _nullable(_STRING),
            "tags": _array(_STRING),
            "trust": _nullable(_NUMBER),
            "eligibility": _STRING,
            "blocked": _BOOLEAN,
            "prev_id": _nullable(_STRING),
        },
        "id",
        "ts",
        "status",
        "eligibility",
    ),
    f"an episode, {' or '.join(FORMATS)}: concise leaves out what is empty",
)
_CHAIN = _object(
    {"available": _BOOLEAN, "message": _STRING, "chain": _array(_EPISODE), "truncated": _BOOLEAN},
    "available",
    "chain",
    "truncated",
)
_EPISODES = _object({"episodes": _array(_EPISODE), **_PAGING}, "episodes", *_PAGED)
_RECORDED = _object(
    {"id": _STRING, "prev_id": _nullable(_STRING), "ts": _INTEGER, "ingest_time": _STRING},
    "id",
    "prev_id",
    "ts",
    "ingest_time",
)
_AMENDED = _object(
    {"id": _STRING, "entry_id": _STRING, "amended": _array(_STRING)}, "id", "entry_id", "amended"
)
_FORGOTTEN = _object({"id": _STRING, "forgotten": _TRUE}, "id", "forgotten")

# -- SR writes, call_windows ----------------------------------------------------------------------

_WRITTEN = _object(
    {"sr_id": _STRING, "entry_id": _STRING, "ingest_time": _STRING, "created": _BOOLEAN},
    "sr_id",
    "entry_id",
    "ingest_time",
    "created",
)
_DELETED = _object(
    {"sr_id": _STRING, "deleted": _BOOLEAN, "changed": _BOOLEAN}, "sr_id", "deleted", "changed"
)
_ERASED = _object(
    {
        "sr_id": _STRING,
        "erased": _BOOLEAN,
        "entries": _INTEGER,
        "entry_id": _STRING,
        "ingest_time": _STRING,
    },
    "sr_id",
    "erased",
    "entries",
    "entry_id",
    "ingest_time",
)
_ROWS = _object({"rows": _array(CALL_WINDOW), **_PAGING}, "rows", *_PAGED)

# -- by tool --------------------------------------------------------------------------------------

OUTPUTS: Mapping[str, Mapping[str, Any]] = MappingProxyType(
    {
        "e_timeline": refusable(_READING, _CHANGES),
        "e_audit": refusable(_AUDIT),
        "work_episode_chain": refusable(_CHAIN),
        "work_episodes": refusable(_EPISODES),
        "work_record": refusable(_RECORDED),
        "work_result": refusable(_AMENDED),
        "work_forget": refusable(_FORGOTTEN),
        "e_write": refusable(_WRITTEN),
        "e_correct": refusable(_WRITTEN),
        "e_adjust": refusable(_WRITTEN),
        "e_delete": refusable(_DELETED),
        "e_undelete": refusable(_DELETED),
        "e_erase": refusable(_ERASED),
        "call_windows": refusable(_ROWS),
    }
)
