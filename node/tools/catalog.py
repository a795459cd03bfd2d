"""The tool registry: what an agent is told about each tool, whatever carries the call
(docs/mcp.md §The tools) — its name, description, the JSON Schema of its arguments and of its
answers (``node.tools.outputs``), its behaviour hints — and the handler that answers it, a
function of the tool's module (``node.tools.context.Handler``).  ``Node.call`` looks a tool up
here (``by_name``), so a tool is added by its module, its entry in ``CATALOG`` and its schemas
in ``inputs.py`` and ``outputs.py``; the node, MCP and the CLI's dispatch stay as they are.

``e_timeline`` and ``work_episode_chain`` are described by their fixed specifications, which
docs/tools/e_timeline.md and docs/tools/work_episode_chain.md quote: the guidance text word
for word, the specified argument names, types, defaults and ranges.  The others describe what
the tool layer accepts; their field limits are read from the kind registry
(``protocol.kinds``), so the two cannot drift apart.

The schemas of the arguments are built in ``node.tools.inputs``.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any

from node.tools import audit, call_windows, episode_reads, episodes, srs, timeline
from node.tools.context import Handler
from node.tools.inputs import INPUTS
from node.tools.outputs import OUTPUTS

__all__ = [
    "CATALOG",
    "E_TIMELINE_GUIDANCE",
    "WORK_EPISODE_CHAIN_GUIDANCE",
    "Hints",
    "ToolSpec",
    "by_name",
    "unknown_tool",
]

# The specification's "Agent Guidance": the description the engine gives an agent, word for
# word (docs/tools/e_timeline.md §What the agent is told).
E_TIMELINE_GUIDANCE = (
    "Retrieve knowledge ordered by time (scoped to your read authority).\n"
    'Actions: list (everything), find (query="..." semantic), intersect (match=[...] '
    "filter), traverse (from an anchor sr_id), changes (what changed between two moments). "
    "Bound the window of list, intersect and traverse with start_date/end_date; find takes "
    "no window (it ranks by relevance, then orders by time); order_by ∈ {ingest_time_desc, "
    "ingest_time_asc, content_time_desc, content_time_asc}. shed_idf_noise (default true) "
    "trims over-common terms from dense result sets. Results name their lane and lane_uuid "
    "and flag has_correction / has_adjustment like e_gather.\n"
    "changes — what changed between two moments, since and as_of (a date or ISO datetime, a "
    "bare date is midnight UTC; as_of defaults to now): each SR whose state differs between "
    "them, as new, updated (with what changed; hidden_change when it is outside what you "
    "can see), deleted or undeleted, newest first, paged. changed_at is the newest entry in "
    "the window. An SR written and deleted again inside the window, or changed and changed "
    "back, did not change. Pass back the as_of page 1 returns for every later page. The "
    "moments are when each change was originally written, by the writing engine's clock — "
    "the same answer on every engine holding the same entries; deletion is local; a wrong "
    "clock places its changes where it said. Not a catch-up feed: an entry keeps its "
    "author's time and can arrive later than that, so a window already read can gain "
    "entries and its pages can reshuffle. To catch up on what arrived over the mesh, use "
    'e_audit(action="list", since_seq=N): each entry that arrives from a peer writes an '
    "sr_synced event there. A bundle import appears as one bundle_imported event; a restore "
    "from the archive writes none."
)

# The specification's description of the tool, word for word (docs/tools/work_episode_chain.md
# §What the agent is told).
WORK_EPISODE_CHAIN_GUIDANCE = (
    "Walk an episode’s amendment chain in one call. prev_id links each episode to the "
    "caller’s previous one, and following it hop by hop cost one round trip per link. "
    "Returns the chain newest-first starting at id. The work-memory reader contract applies "
    "at every hop, not just the first: tombstoned rows never surface, expired rows are "
    "excluded, and the walk stays inside the calling principal unless any_caller "
    "(admin:workspace, P1.7). The walk STOPS at the first hop that fails those filters "
    "rather than skipping over it — a gap in a returned chain would itself disclose that a "
    "hidden episode exists. response_format=concise returns each episode as work_episodes "
    "does; truncated is always kept."
)


@dataclass(frozen=True, slots=True)
class Hints:
    """The advisory behaviour hints of MCP's tool annotations, set for what the tool does to
    the node: ``read_only`` (changes nothing), ``destructive`` (may replace or hide what a
    reader saw, rather than only add), ``idempotent`` (a repeat with the same arguments has
    no further effect), ``open_world`` (reaches beyond the node's own store)."""

    read_only: bool
    destructive: bool
    idempotent: bool
    open_world: bool = False


# Read tools are marked as work_episode_chain's specification marks it (docs/mcp.md §The
# tools): read-only, not destructive, not idempotent (an answer is a view at the moment of the
# call).
_READ = Hints(read_only=True, destructive=False, idempotent=False)


@dataclass(frozen=True, slots=True)
class ToolSpec:
    name: str
    title: str
    description: str
    input_schema: Mapping[str, Any]
    hints: Hints
    handler: Handler  # what answers it: ``await handler(ctx, caller, arguments)``
    output_schema: Mapping[str, Any]  # its answers and its refusal (``node.tools.outputs``)


# -- the catalog -------------------------------------------------------------------------------


def _tool(
    name: str,
    title: str,
    description: str,
    hints: Hints,
    handler: Handler,
) -> ToolSpec:
    return ToolSpec(
        name, title, description, INPUTS[name], hints, handler, output_schema=OUTPUTS[name]
    )


CATALOG: tuple[ToolSpec, ...] = (
    _tool("e_timeline", "Timeline", E_TIMELINE_GUIDANCE, _READ, timeline.e_timeline),
    _tool(
        "e_audit",
        "Audit feed",
        (
            'This node\'s catch-up feed: e_audit(action="list", since_seq=N) answers, under '
            "events, the events with seq > N in seq order (at most limit), each with its seq — "
            "sr_written, sr_synced (an entry arrived from a peer), sr_deleted, sr_undeleted, "
            "episode_forgotten, bundle_imported (one event per bundle import, its detail "
            "counting the entries, SRs and episodes it brought that you can read). Events about "
            "SRs or episodes you cannot read are left out. Pass back covered_seq as the next "
            "since_seq; fewer than limit events means you are caught up. When feed_id changes "
            "(the node was restored from its archive), start again from since_seq 0."
        ),
        _READ,
        audit.e_audit,
    ),
    _tool(
        "work_episode_chain",
        "Episode chain",
        WORK_EPISODE_CHAIN_GUIDANCE,
        _READ,
        episode_reads.work_episode_chain,
    ),
    _tool(
        "work_episodes",
        "Episodes",
        (
            "Your episodes, newest first, one page at a time: filter by since/until (ts), status, "
            "tool and tags (every one). Forgotten and expired episodes never appear. any_caller "
            "(admin:workspace) lists every principal's episodes of the workspace. "
            "response_format=concise returns only the high-signal fields."
        ),
        _READ,
        episode_reads.work_episodes,
    ),
    _tool(
        "work_record",
        "Record an episode",
        (
            "Record an episode: one piece of work you did — what kind, with which tool, how it "
            "went, a summary, tags. The node sets id, ts, vault, caller and prev_id (your "
            "previous episode), so work_episode_chain can walk your work back. Times are "
            "ISO-8601 instants with an offset or YYYY-MM-DD dates."
        ),
        Hints(read_only=False, destructive=False, idempotent=False),
        episodes.work_record,
    ),
    _tool(
        "work_result",
        "Record an episode's outcome",
        (
            "Record an episode's later-known outcome: at least one of task_result, verdict_at, "
            "status, eligibility, trust; each replaces the value shown. Your own episodes, or "
            "any of the workspace's with admin:workspace."
        ),
        Hints(read_only=False, destructive=True, idempotent=False),
        episodes.work_result,
    ),
    _tool(
        "work_forget",
        "Forget an episode",
        (
            "Forget an episode: it is tombstoned on every node and never surfaces again; your "
            "next episode links past it. Your own episodes, or any of the workspace's with "
            "admin:workspace."
        ),
        Hints(read_only=False, destructive=True, idempotent=True),
        episodes.work_forget,
    ),
    _tool(
        "e_write",
        "Write an SR",
        (
            "Write a knowledge record (SR). Without sr_id: create one (it needs a title or a "
            "text; visibility defaults to workspace, lane to default). With the sr_id of an SR "
            "you can write: update the fields given — title, text, links, conversational, "
            "private_fields, tags; fields left out keep their value. content_time, lane, "
            "lane_uuid and visibility of an existing SR change only through e_adjust."
        ),
        Hints(read_only=False, destructive=True, idempotent=False),
        srs.e_write,
    ),
    _tool(
        "e_correct",
        "Correct an SR",
        (
            "Correct the content of an SR (title, text, links, conversational, private_fields), "
            "saying why in reason; the SR is then flagged has_correction."
        ),
        Hints(read_only=False, destructive=True, idempotent=False),
        srs.e_correct,
    ),
    _tool(
        "e_adjust",
        "Adjust an SR",
        (
            "Change the metadata of an SR (tags, content_time, lane, lane_uuid, visibility); the "
            "SR is then flagged has_adjustment. Your own SRs, or any of the workspace's with "
            "admin:workspace."
        ),
        Hints(read_only=False, destructive=True, idempotent=False),
        srs.e_adjust,
    ),
    _tool(
        "e_delete",
        "Delete an SR here",
        (
            "Hide an SR on this node only: its entries stay in the log and other nodes keep it; "
            "e_undelete restores it. Your own SRs, or any of the workspace's with "
            "admin:workspace. Deleting a deleted SR changes nothing."
        ),
        Hints(read_only=False, destructive=True, idempotent=True),
        srs.e_delete,
    ),
    _tool(
        "e_undelete",
        "Undelete an SR",
        (
            "Restore an SR this node deleted. Your own SRs, or any of the workspace's with "
            "admin:workspace. Undeleting a shown SR changes nothing."
        ),
        Hints(read_only=False, destructive=False, idempotent=True),
        srs.e_undelete,
    ),
    _tool(
        "e_erase",
        "Erase an SR everywhere",
        (
            "Erase an SR on every node of the mesh, for good: the content of all its entries "
            "and everything derived from it (versions, search index, tags, links) are removed; "
            "the signed headers stay so every log still verifies. Afterwards the SR behaves as "
            "one never written. Give a reason — it travels to every node, so put no erased "
            "content in it. Your own SRs, or any of the workspace's with admin:workspace."
        ),
        Hints(read_only=False, destructive=True, idempotent=False),
        srs.e_erase,
    ),
    _tool(
        "call_windows",
        "Call windows",
        (
            "The time windows of your tool calls (a CallWindowRow each), oldest first: for "
            "each call that carried the turn's context (_meta memlane/turn) to a tool that "
            "declares period forms, which window it read and how — filled, bound, "
            "model-chosen, model, unread, not-filled or refused (refused calls did not run). "
            "The latest row of a call is the window it ran with; latest=true lists only those. "
            "Filter by tool, turn and tool_call_id. Your own calls' rows; with admin:workspace, "
            "every principal's of the workspace."
        ),
        _READ,
        call_windows.call_windows,
    ),
)

_BY_NAME: Mapping[str, ToolSpec] = MappingProxyType({t.name: t for t in CATALOG})


def by_name(name: str) -> ToolSpec | None:
    return _BY_NAME.get(name)


def unknown_tool(name: str) -> str:
    """The refusal of a call to a tool the catalog does not hold."""
    return f"unknown tool: {name}"
