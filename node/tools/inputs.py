"""The JSON Schema of each tool's arguments, as the catalog lists it (docs/mcp.md §The tools).

The schemas describe; they do not refuse.  Every argument is checked by the tool layer, which
answers with the documented refusal texts — a transport must pass arguments through as sent
and never validate them against these schemas first (an out-of-range ``k`` must reach
``work_episode_chain`` and come back as ``invalid k: must be an integer from 1 to 200``).
No schema forbids unknown properties, for the same reason.

Every field has one type.  A payload field that may be null is not declared nullable here: an
argument sent as null counts as not sent (``args.present``), so null is never a value to offer —
and a list of types (``["string", "null"]``) is what strict checkers warn of and clients that
take one type per field cannot read.
"""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType
from typing import Any

from node.tools import audit, call_windows, episode_reads, timeline_spec
from protocol.kinds import KINDS
from protocol.schema import Choice, Flag, Integer, Number, Text, TextList, TextMap

__all__ = ["INPUTS"]


# -- schema pieces ---------------------------------------------------------------------------

_MOMENT = "a date (YYYY-MM-DD, midnight UTC) or an ISO-8601 instant with an offset"
_INSTANT = "an ISO-8601 instant with an offset, or a date (YYYY-MM-DD, midnight UTC)"
_DAY_MOMENT = (
    "a date (YYYY-MM-DD, midnight in the node's zone, UTC by default) or an ISO-8601 instant "
    "with an offset"
)


def _object(properties: dict[str, dict[str, Any]], *required: str) -> Mapping[str, Any]:
    schema: dict[str, Any] = {"type": "object", "properties": properties}
    if required:
        schema["required"] = list(required)
    return MappingProxyType(schema)


def _string(description: str | None = None, **limits: Any) -> dict[str, Any]:
    schema: dict[str, Any] = {"type": "string", **limits}
    return schema | ({"description": description} if description else {})


def _integer(
    lo: int, hi: int, default: int | None = None, description: str | None = None
) -> dict[str, Any]:
    schema: dict[str, Any] = {"type": "integer", "minimum": lo, "maximum": hi}
    if default is not None:
        schema["default"] = default
    return schema | ({"description": description} if description else {})


def _boolean(default: bool, description: str | None = None) -> dict[str, Any]:
    schema: dict[str, Any] = {"type": "boolean", "default": default}
    return schema | ({"description": description} if description else {})


def _enum(values: tuple[str, ...], description: str | None = None, **extra: Any) -> dict[str, Any]:
    schema: dict[str, Any] = {"type": "string", "enum": list(values), **extra}
    return schema | ({"description": description} if description else {})


def _text(t: Text) -> dict[str, Any]:
    schema: dict[str, Any] = {"type": "string", "minLength": t.min_len, "maxLength": t.max_len}
    if t.pattern:
        schema["pattern"] = f"^(?:{t.pattern})$"
    return schema


def _field(kind: str, name: str, description: str | None = None) -> dict[str, Any]:
    """A payload field of ``kind`` as the tool layer takes it (``protocol.kinds`` limits)."""
    spec = KINDS[kind].schema.by_name[name]
    t = spec.type
    schema: dict[str, Any]
    if isinstance(t, Text):
        schema = _text(t)
    elif isinstance(t, TextList):
        schema = {"type": "array", "items": _text(t.item), "maxItems": t.max_items}
        schema |= {"uniqueItems": True} if t.unique else {}
    elif isinstance(t, TextMap):
        schema = {
            "type": "object",
            "maxProperties": t.max_keys,
            "propertyNames": _text(t.key),
            "additionalProperties": _text(t.value),
        }
    elif isinstance(t, Flag):
        schema = {"type": "boolean"}
    elif isinstance(t, Choice):
        schema = {"type": "string", "enum": list(t.values)}
    elif isinstance(t, Integer):
        schema = {"type": "integer", "minimum": t.lo, "maximum": t.hi}
    elif isinstance(t, Number):
        schema = {"type": "number", "minimum": t.lo, "maximum": t.hi}
    else:  # pragma: no cover - every field a tool takes is one of the above
        raise TypeError(f"{kind}.{name}: no JSON Schema for {type(t).__name__}")
    return schema | ({"description": description} if description else {})


def _time(kind: str, name: str, description: str) -> dict[str, Any]:
    """A time field: milliseconds in the payload, text at the tool (``args.optional_time``)."""
    assert name in KINDS[kind].schema.by_name
    return {"type": "string", "description": description}


# -- e_timeline (docs/tools/e_timeline.md §Arguments) ---------------------------------------

_PAGE_SIZE = f"when not sent: the profile's, else {timeline_spec.DEFAULT_PAGE_SIZE}"
_MATCH = "intersect: every string must hold (as a tag, or as terms)"

_TIMELINE = _object(
    {
        "action": _enum(timeline_spec.ACTIONS),
        "query": _string("find: what to look for", minLength=1, maxLength=timeline_spec.MAX_QUERY),
        "match": {
            "type": "array",
            "items": {"type": "string", "minLength": 1, "maxLength": 64},
            "minItems": 1,
            "maxItems": timeline_spec.MAX_MATCH,
            "description": _MATCH,
        },
        "sr_id": _string("traverse: the anchor SR", minLength=1, maxLength=64),
        "start_date": _string(f"window start, inclusive: {_DAY_MOMENT}"),
        "end_date": _string(f"window end: {_DAY_MOMENT} (a bare date includes that day)"),
        "order_by": _enum(timeline_spec.ORDERS, default=timeline_spec.DEFAULTS["order_by"]),
        "shed_idf_noise": _boolean(timeline_spec.DEFAULTS["shed_idf_noise"]),
        "page": _integer(1, timeline_spec.MAX_PAGE, timeline_spec.DEFAULTS["page"]),
        "page_size": _integer(1, timeline_spec.MAX_PAGE_SIZE, None, _PAGE_SIZE),
        "is_conversational_only": _boolean(timeline_spec.DEFAULTS["is_conversational_only"]),
        "as_of": _string(f"changes: the later moment, inclusive ({_MOMENT}); default now"),
        "since": _string(f"changes: the earlier moment, exclusive ({_MOMENT})"),
        "agent_profile": _string("a profile named in the node's configuration"),
    },
    "action",
)

# -- work_episode_chain (docs/tools/work_episode_chain.md §Arguments) -----------------------

_FORMAT = (
    "concise returns only the high-signal fields; detailed (the shipped default) returns the "
    "full payload. Errors and safety warnings are never trimmed. When omitted, the server’s "
    "tools.defaults.responseFormat applies."
)
_VERBOSITY = "Legacy alias for response_format: terse = concise, full = detailed."
_ANY_CALLER = "every principal's episodes of the workspace; needs admin:workspace"


def _formats() -> dict[str, dict[str, Any]]:
    return {
        "response_format": _enum(episode_reads.FORMATS, _FORMAT),
        "verbosity": _enum(("full", "terse"), _VERBOSITY),
    }


_CHAIN = _object(
    {
        "id": _string(
            "the episode to start from; length ≥ 1", minLength=1, maxLength=episode_reads.MAX_ID
        ),
        "k": _integer(1, episode_reads.MAX_K, episode_reads.DEFAULT_K, "range 1–200"),
        "any_caller": _boolean(False, _ANY_CALLER),
        **_formats(),
    },
    "id",
)

# -- the other read tools --------------------------------------------------------------------

_AUDIT = _object(
    {
        "action": _enum(("list",), default="list"),
        "since_seq": _integer(
            0, 1 << 62, 0, "the events with seq above this (pass back covered_seq)"
        ),
        "limit": _integer(1, audit.MAX_LIMIT, audit.DEFAULT_LIMIT, "at most this many events"),
    }
)

_EPISODES = _object(
    {
        "since": _string(f"ts at or after: {_INSTANT}"),
        "until": _string(f"ts before: {_INSTANT}"),
        "status": _string("the current status equals it", minLength=1, maxLength=64),
        "tool": _string("tool equals it", minLength=1, maxLength=128),
        "tags": {
            "type": "array",
            "items": {"type": "string", "minLength": 1, "maxLength": 64},
            "maxItems": 16,
            "description": "the episode carries every one of them",
        },
        "page": _integer(1, episode_reads.MAX_PAGE, 1),
        "page_size": _integer(1, episode_reads.MAX_PAGE_SIZE, episode_reads.DEFAULT_PAGE_SIZE),
        "any_caller": _boolean(False, _ANY_CALLER),
        **_formats(),
    }
)

# -- episode writes ---------------------------------------------------------------------------

_RECORD, _AMEND = "episode.record", "episode.amend"


def _later(kind: str, **defaults: str) -> dict[str, dict[str, Any]]:
    """The later-known fields; ``defaults`` for those a record sets when not sent."""
    fields = {
        "task_result": _field(kind, "task_result"),
        "verdict_at": _time(kind, "verdict_at", f"when the verdict was reached: {_INSTANT}"),
        "status": _field(kind, "status"),
        "eligibility": _field(kind, "eligibility"),
        "trust": _field(kind, "trust", "0 to 1"),
    }
    return {
        name: schema | ({"default": defaults[name]} if name in defaults else {})
        for name, schema in fields.items()
    }


_WORK_RECORD = _object(
    {
        "session_id": _field(_RECORD, "session_id"),
        "channel": _field(_RECORD, "channel") | {"default": "api"},
        "episode_type": _field(_RECORD, "episode_type") | {"default": "task"},
        "tool": _field(_RECORD, "tool"),
        "error_code": _field(_RECORD, "error_code"),
        "duration_ms": _field(_RECORD, "duration_ms"),
        "result_size": _field(_RECORD, "result_size"),
        "summary": _field(_RECORD, "summary"),
        "tags": _field(_RECORD, "tags") | {"default": []},
        "expires_at": _time(_RECORD, "expires_at", f"not shown after: {_INSTANT}"),
        **_later(_RECORD, status="recorded", eligibility="eligible"),
    }
)

_EPISODE_ID = _string("the episode's id")
_WORK_RESULT = _object({"id": _EPISODE_ID, **_later(_AMEND)}, "id")
_WORK_FORGET = _object({"id": _EPISODE_ID}, "id")

# -- SR writes --------------------------------------------------------------------------------
# No defaults here: a value sent to an update is a change (``visibility`` sent to an existing
# SR is refused), so creation's defaults are described, not declared.

_PUT, _CORRECT, _ADJUST = "sr.put", "sr.correct", "sr.adjust"
_SR_ID = _string("the SR's id")


def _content(kind: str) -> dict[str, dict[str, Any]]:
    return {
        "title": _field(kind, "title"),
        "text": _field(kind, "text"),
        "links": _field(kind, "links", "ids of SRs this one links to"),
        "conversational": _field(kind, "conversational"),
        "private_fields": _field(
            kind, "private_fields", "readable by the owner and admins only; never searched"
        ),
    }


def _meta(kind: str) -> dict[str, dict[str, Any]]:
    return {
        "tags": _field(kind, "tags"),
        "content_time": _time(kind, "content_time", f"when the knowledge happened: {_INSTANT}"),
        "lane": _field(kind, "lane", "when creating: default"),
        "lane_uuid": _field(kind, "lane_uuid", "when creating: derived from workspace and lane"),
        "visibility": _field(kind, "visibility", "when creating: workspace"),
    }


_E_WRITE = _object(
    {
        "sr_id": _string("leave out to create; an SR you can write, to update it"),
        **_content(_PUT),
        **_meta(_PUT),
    }
)
_E_CORRECT = _object(
    {"sr_id": _SR_ID, "reason": _field(_CORRECT, "reason"), **_content(_CORRECT)}, "sr_id", "reason"
)
_E_ADJUST = _object({"sr_id": _SR_ID, **_meta(_ADJUST)}, "sr_id")
_SR_ONLY = _object({"sr_id": _SR_ID}, "sr_id")
_E_ERASE = _object(
    {"sr_id": _SR_ID, "reason": _field("sr.erase", "reason", "why; it travels to every node")},
    "sr_id",
    "reason",
)

# -- call_windows (docs/time-windows.md §Reading rows) -----------------------------------------

_CALL_WINDOWS = _object(
    {
        "tool": _string("rows of calls to this tool", minLength=1, maxLength=128),
        "turn": _integer(0, (1 << 53) - 1, None, "rows of this conversation turn"),
        "tool_call_id": _string("rows of this call (its toolCallId)", minLength=1, maxLength=256),
        "latest": _boolean(False, "only each call's latest row: the window it ran with"),
        "page": _integer(1, 100_000, 1),
        "page_size": _integer(1, call_windows.MAX_PAGE_SIZE, call_windows.DEFAULT_PAGE_SIZE),
    }
)

# -- by tool ----------------------------------------------------------------------------------

INPUTS: Mapping[str, Mapping[str, Any]] = MappingProxyType(
    {
        "e_timeline": _TIMELINE,
        "e_audit": _AUDIT,
        "work_episode_chain": _CHAIN,
        "work_episodes": _EPISODES,
        "work_record": _WORK_RECORD,
        "work_result": _WORK_RESULT,
        "work_forget": _WORK_FORGET,
        "e_write": _E_WRITE,
        "e_correct": _E_CORRECT,
        "e_adjust": _E_ADJUST,
        "e_delete": _SR_ONLY,
        "e_undelete": _SR_ONLY,
        "e_erase": _E_ERASE,
        "call_windows": _CALL_WINDOWS,
    }
)
