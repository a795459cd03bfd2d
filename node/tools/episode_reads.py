"""Episode read tools: work_episode_chain and work_episodes (docs/tools/work_episode_chain.md,
docs/tools/episodes.md).

Arguments are checked in a fixed order, before the caller's scopes, so a refusal never
depends on what is stored.  The queries and the reader contract live in
``node.views.episode_reads``; docs/tools/work_episode_chain.md describes both tools.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from node.access.callers import Caller
from node.errors import Forbidden, Refusal
from node.store import Store
from node.tools.args import check_names, flag, integer, one_of, optional_time, text
from node.tools.context import ToolContext
from node.views.episode_reads import Filters, Scope, page, walk

__all__ = ["CONCISE", "FORMATS", "work_episode_chain", "work_episodes"]

FORMATS = ("concise", "detailed")
_VERBOSITY = {"full": "detailed", "terse": "concise"}  # the specification lists full, terse
# Concise keeps these, and of them drops the empty ones (null, "" or []) but the first four.
CONCISE = (
    "id",
    "ts",
    "status",
    "eligibility",
    "episode_type",
    "tool",
    "task_result",
    "verdict_at",
    "error_code",
    "summary",
    "tags",
    "prev_id",
)
_ALWAYS = frozenset(CONCISE[:4])
_SHARED = frozenset({"any_caller", "response_format", "verbosity"})
_CHAIN = _SHARED | {"id", "k"}
_LIST = _SHARED | {"since", "until", "status", "tool", "tags", "page", "page_size"}
DEFAULT_K, MAX_K = 50, 200
DEFAULT_PAGE_SIZE, MAX_PAGE_SIZE, MAX_PAGE = 20, 100, 10_000
MAX_ID = 256


def response_format(args: Mapping[str, Any], default: str) -> str:
    """``response_format``, or its legacy alias ``verbosity``, or the node's default."""
    chosen = one_of(args, "response_format", FORMATS)
    legacy = one_of(args, "verbosity", tuple(_VERBOSITY))
    if legacy is not None:
        if chosen is not None and chosen != _VERBOSITY[legacy]:
            raise Refusal("response_format and verbosity disagree; send response_format alone")
        chosen = _VERBOSITY[legacy]
    return chosen or default


def render(episode: dict[str, Any], form: str) -> dict[str, Any]:
    if form == "detailed":
        return episode
    return {k: episode[k] for k in CONCISE if k in _ALWAYS or episode[k] not in (None, "", [])}


async def _scope(store: Store, caller: Caller, any_caller: bool) -> Scope:
    caller.require("read:workspace")
    if any_caller and not caller.is_admin:
        raise Forbidden(
            f"any_caller needs the admin:workspace scope on workspace {caller.workspace}"
        )
    await store.catch_up_views()
    return Scope(caller, any_caller, store.now_ms())


def unavailable(episode_id: str) -> str:
    return f"no episode {episode_id} is available to this caller"


async def work_episode_chain(
    ctx: ToolContext, caller: Caller, args: Mapping[str, Any]
) -> dict[str, Any]:
    """The chain from ``id`` along ``prev_id``, newest first, at most ``k`` episodes."""
    store = ctx.store
    check_names("work_episode_chain", args, _CHAIN)
    start = text(args, "id", MAX_ID)
    if start is None:
        raise Refusal(f"invalid id: must be a string of 1 to {MAX_ID} characters")
    k = integer(args, "k", 1, MAX_K, DEFAULT_K)
    any_caller = flag(args, "any_caller", False)
    form = response_format(args, ctx.response_format)
    scope = await _scope(store, caller, any_caller)
    assert store.reader is not None
    found = await walk(store.reader, scope, start, k)
    if found is None:
        return {"available": False, "message": unavailable(start), "chain": [], "truncated": False}
    chain, truncated = found
    return {"available": True, "chain": [render(e, form) for e in chain], "truncated": truncated}


def _tags(args: Mapping[str, Any]) -> tuple[str, ...]:
    value = args.get("tags")
    if value is None:
        return ()
    if (
        not isinstance(value, list)
        or len(value) > 16
        or not all(isinstance(t, str) and 1 <= len(t) <= 64 for t in value)
    ):
        raise Refusal("invalid tags: must be a list of at most 16 tags of 1 to 64 characters")
    return tuple(dict.fromkeys(value))


async def work_episodes(
    ctx: ToolContext, caller: Caller, args: Mapping[str, Any]
) -> dict[str, Any]:
    """The caller's episodes, newest first, one page at a time."""
    store = ctx.store
    check_names("work_episodes", args, _LIST)
    filters = Filters(
        optional_time(args, "since"),
        optional_time(args, "until"),
        text(args, "status", 64),
        text(args, "tool", 128),
        _tags(args),
    )
    if None not in (filters.since, filters.until) and filters.since >= filters.until:  # type: ignore[operator]
        raise Refusal("invalid until: must be after since")
    number = integer(args, "page", 1, MAX_PAGE, 1)
    size = integer(args, "page_size", 1, MAX_PAGE_SIZE, DEFAULT_PAGE_SIZE)
    any_caller = flag(args, "any_caller", False)
    form = response_format(args, ctx.response_format)
    scope = await _scope(store, caller, any_caller)
    assert store.reader is not None
    episodes, more = await page(store.reader, scope, filters, number, size)
    return {
        "episodes": [render(e, form) for e in episodes],
        "page": number,
        "page_size": size,
        "has_more": more,
    }
