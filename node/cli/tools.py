"""The tool commands of ``memlane`` (docs/cli.md): each maps its flags onto one tool's
arguments, calls the tool through the Node, and prints its answer as a table or as JSON.

A flag left out is an argument not sent, so the tool's own defaults and refusals apply
unchanged: no tool logic lives here.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from node.cli.table import cell, count, table
from node.cli.times import moment
from node.errors import Refusal
from protocol.timefmt import fixed_millis, format_instant

__all__ = ["COMMANDS", "Opt", "ToolCommand", "add_parsers", "arguments"]

Show = Callable[[dict[str, Any]], str]


@dataclass(frozen=True, slots=True)
class Opt:
    """One argument: ``kind`` is ``str``, ``int``, ``float``, ``bool`` (``true`` or
    ``false``), ``time`` (an instant or a date, checked as ``node.cli.times.moment``),
    ``list`` (a repeatable flag), ``map`` (repeatable ``KEY=VALUE``), ``flag`` (present =
    true) or ``positional``."""

    name: str
    kind: str = "str"
    help: str = ""


@dataclass(frozen=True, slots=True)
class ToolCommand:
    path: tuple[str, ...]
    tool: str
    help: str
    opts: tuple[Opt, ...]
    show: Show
    fixed: dict[str, Any] = field(default_factory=dict)
    aliases: tuple[str, ...] = ()  # other names of the same command, same flags and output


def _pairs(items: list[str] | None) -> dict[str, str] | None:
    if items is None:
        return None
    out = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep:
            raise Refusal(f"invalid private_fields: {item!r} is not KEY=VALUE")
        out[key] = value
    return out


def arguments(command: ToolCommand, args: argparse.Namespace) -> dict[str, Any]:
    """The tool arguments the flags send (``fixed`` first, such as e_timeline's action)."""
    sent = dict(command.fixed)
    for opt in command.opts:
        value = getattr(args, opt.name)
        if opt.kind == "map":
            value = _pairs(value)
        if value is not None:
            sent[opt.name] = value
    return sent


def _bool(text: str) -> bool:
    if text not in ("true", "false"):
        raise argparse.ArgumentTypeError("must be true or false")
    return text == "true"


_TYPES: dict[str, Callable[[str], Any]] = {
    "int": int,
    "float": float,
    "bool": _bool,
    "str": str,
    "time": moment,
}


def _add(parser: argparse.ArgumentParser, opt: Opt) -> None:
    if opt.kind == "positional":
        parser.add_argument(opt.name, help=opt.help)
        return
    flag = "--" + opt.name.replace("_", "-")
    common: dict[str, Any] = {"dest": opt.name, "help": opt.help, "default": None}
    if opt.kind == "flag":
        parser.add_argument(flag, action="store_const", const=True, **common)
    elif opt.kind in ("list", "map"):
        parser.add_argument(flag, action="append", **common)
    else:
        parser.add_argument(flag, type=_TYPES[opt.kind], **common)


def add_parsers(sub: Any, run: Callable[..., Any]) -> None:
    """Register every tool command under ``sub``; ``run(command, args)`` runs one."""
    groups: dict[str, Any] = {}
    for command in COMMANDS:
        parent = sub
        if len(command.path) == 2:
            head = command.path[0]
            if head not in groups:
                group = sub.add_parser(head, help=_GROUPS[head])
                groups[head] = group.add_subparsers(dest="action", required=True)
            parent = groups[head]
        about = f"{command.help} (the {command.tool} tool)"
        parser = parent.add_parser(
            command.path[-1], aliases=list(command.aliases), help=command.help, description=about
        )
        for opt in command.opts:
            _add(parser, opt)
        parser.set_defaults(handler=lambda a, c=command: run(c, a))


# -- how answers read on a terminal -----------------------------------------------------------


def _written(answer: dict[str, Any]) -> str:
    """An SR write's line: the SR's id, the entry written and its ingest time."""
    return f"{answer['sr_id']}  entry {answer['entry_id'][:16]}  at {answer['ingest_time']}"


def _deleted(answer: dict[str, Any]) -> str:
    state = "deleted" if answer["deleted"] else "not deleted"
    return f"{answer['sr_id']}  {state}" + ("" if answer["changed"] else " (unchanged)")


def _erased(answer: dict[str, Any]) -> str:
    return (
        f"{answer['sr_id']}  erased ({answer['entries']} entries named)  entry {answer['entry_id']}"
    )


def _page(answer: dict[str, Any], header: tuple[str, ...], rows: list[list[Any]]) -> str:
    """The page's table, then which page it is and whether more follows."""
    more = "more on the next page" if answer.get("has_more") else "no more"
    return "\n".join([*table(header, rows), f"page {answer['page']} ({len(rows)} shown, {more})"])


_RESULTS = ("INGEST TIME", "SR ID", "TITLE")
_CHANGES = ("CHANGED AT", "CHANGE", "SR ID", "FIELDS")
_EVENTS = ("SEQ", "EVENT", "AT", "SUBJECT")
_EPISODES = ("TS", "ID", "STATUS", "TOOL", "SUMMARY")
_ROWS = ("TURN", "TOOL CALL ID", "TOOL NAME", "HOW", "WHY/REFUSED", "ASKED")


def _results(answer: dict[str, Any]) -> str:
    """A page as a table; find's (its results ranked) best first, with rank and score."""
    found = answer["results"]
    ranked = bool(found) and all("rank" in r for r in found)
    if ranked:
        found = sorted(found, key=lambda r: r["rank"])
    rows = [
        [
            *([r["rank"], f"{r['score']:.3f}"] if ranked else []),
            fixed_millis(r["ingest_time"]),
            r["sr_id"],
            r.get("title") or (r.get("text") or "")[:60],
        ]
        for r in found
    ]
    header = ("RANK", "SCORE", *_RESULTS) if ranked else _RESULTS
    shed = answer.get("shed_terms")
    return _page(answer, header, rows) + (f"\nshed: {', '.join(shed)}" if shed else "")


def _changes(answer: dict[str, Any]) -> str:
    rows = [
        [
            fixed_millis(c["changed_at"]),
            c["change"],
            c["sr_id"],
            "hidden change" if c.get("hidden_change") else ", ".join(c.get("fields", [])),
        ]
        for c in answer["changes"]
    ]
    window = f"changes from {answer['since']} to {answer['as_of']} (pass --as-of for later pages)"
    return window + "\n" + _page(answer, _CHANGES, rows)


def _audit(answer: dict[str, Any]) -> str:
    rows = [[e["seq"], e["event"], fixed_millis(e["at"]), _about(e)] for e in answer["events"]]
    feed = f"feed {answer['feed_id']}, covered to seq {answer['covered_seq']}"
    return "\n".join([*table(_EVENTS, rows), feed])


def _about(event: dict[str, Any]) -> str | None:
    """An event's subject; for a bundle import, what it brought the caller."""
    if event["event"] != "bundle_imported":
        return None if event["subject"] is None else str(event["subject"])
    d = event["detail"]
    brought = f"{count(d['srs'], 'SR')}, {count(d['episodes'], 'episode')}"
    return f"{count(d['entries'], 'entry', 'entries')}: {brought}"


def _episode_row(e: dict[str, Any]) -> list[Any]:
    ts = format_instant(e["ts"], fixed=True)
    return [ts, e["id"], e["status"], e.get("tool"), e.get("summary")]


def _episodes(answer: dict[str, Any]) -> str:
    return _page(answer, _EPISODES, [_episode_row(e) for e in answer["episodes"]])


def _chain(answer: dict[str, Any]) -> str:
    if not answer["available"]:
        return str(answer["message"])
    lines = table(_EPISODES, [_episode_row(e) for e in answer["chain"]])
    return "\n".join([*lines, "truncated: more lie behind" if answer["truncated"] else "end"])


def _window_row(r: dict[str, Any]) -> list[Any]:
    asked = r.get("asked")
    span = f"{asked['from']} .. {asked['to']}" if asked else None
    return [
        r["turn"],
        r["toolCallId"],
        r["toolName"],
        r["how"],
        r.get("why") or r.get("refused"),
        span,
    ]


def _windows(answer: dict[str, Any]) -> str:
    return _page(answer, _ROWS, [_window_row(r) for r in answer["rows"]])


def _recorded(answer: dict[str, Any]) -> str:
    """A recorded episode's line: its id, the episode it follows, its time."""
    return f"{answer['id']}  prev_id {cell(answer['prev_id'])}  at {answer['ingest_time']}"


def _amended(answer: dict[str, Any]) -> str:
    amended = ", ".join(answer["amended"])
    return f"{answer['id']}  entry {answer['entry_id'][:16]}  amended {amended}"


def _forgotten(answer: dict[str, Any]) -> str:
    return f"{answer['id']}  forgotten"


# -- the commands -----------------------------------------------------------------------------

_GROUPS = {
    "timeline": "e_timeline: list, find, intersect, traverse, changes",
    "episode": "record, amend, forget, list and walk work episodes",
    "windows": "the time windows of your tool calls (CallWindowRows)",
}
_SR_ID = Opt("sr_id", "positional", "the SR's id")
_CONTENT = (
    Opt("title"),
    Opt("text"),
    Opt("links", "list", "an SR id this one links to (repeat)"),
    Opt("conversational", "flag"),
    Opt("private_fields", "map", "KEY=VALUE readable by the owner and admins only (repeat)"),
)
_META = (
    Opt("tags", "list", "a tag (repeat)"),
    Opt("content_time", "time", "when the knowledge happened: an instant or a date"),
    Opt("lane"),
    Opt("lane_uuid"),
    Opt("visibility", help="workspace or private"),
)
_PAGING = (Opt("page", "int"), Opt("page_size", "int"))
_SHED = Opt("shed_idf_noise", "bool", "true (default) or false")
_DATES = (  # find takes no window: it ranks by relevance (docs/tools/e_timeline.md §find)
    Opt("start_date", "time", "from this instant or date"),
    Opt("end_date", "time", "before this instant, or to the end of this date"),
)
_READING = (
    Opt("order_by", help="ingest_time_desc (default), ingest_time_asc, content_time_desc, …"),
    Opt("is_conversational_only", "flag"),
    Opt("agent_profile"),
    *_PAGING,
)
_FORMAT = (
    Opt("any_caller", "flag", "every principal's episodes (needs admin:workspace)"),
    Opt("response_format", help="concise or detailed"),
)
_LATER = (
    Opt("task_result", "float"),
    Opt("verdict_at", "time", "an instant or a date"),
    Opt("status"),
    Opt("eligibility"),
    Opt("trust", "float", "0 to 1"),
)


def _timeline(action: str, help_: str, *opts: Opt, show: Show = _results) -> ToolCommand:
    return ToolCommand(("timeline", action), "e_timeline", help_, opts, show, {"action": action})


COMMANDS: tuple[ToolCommand, ...] = (
    ToolCommand(
        ("write",),
        "e_write",
        "create an SR, or update one by --sr-id",
        (Opt("sr_id", help="update this SR"), *_CONTENT, *_META),
        _written,
        aliases=("put",),
    ),
    ToolCommand(
        ("correct",),
        "e_correct",
        "correct an SR's content, with a reason",
        (_SR_ID, Opt("reason"), *_CONTENT),
        _written,
    ),
    ToolCommand(
        ("adjust",),
        "e_adjust",
        "change an SR's tags, lane, time or visibility",
        (_SR_ID, *_META),
        _written,
    ),
    ToolCommand(("delete",), "e_delete", "hide an SR on this node", (_SR_ID,), _deleted),
    ToolCommand(("undelete",), "e_undelete", "show a deleted SR again", (_SR_ID,), _deleted),
    ToolCommand(
        ("erase",),
        "e_erase",
        "erase an SR on every node, with a reason",
        (_SR_ID, Opt("reason", help="why; it travels to every node")),
        _erased,
    ),
    _timeline("list", "SRs in time order", *_DATES, *_READING),
    _timeline(
        "find", "SRs matching a query, by relevance", Opt("query", "positional"), _SHED, *_READING
    ),
    _timeline(
        "intersect",
        "SRs carrying every match (a tag or its terms)",
        Opt("match", "list", "a tag or term (repeat)"),
        _SHED,
        *_DATES,
        *_READING,
    ),
    _timeline("traverse", "SRs linked to or from an SR", _SR_ID, *_DATES, *_READING),
    _timeline(
        "changes",
        "what changed between two moments",
        Opt("since", "time", "after this instant or date"),
        Opt("as_of", "time", "default now; pass page 1's as_of for later pages"),
        *_PAGING,
        show=_changes,
    ),
    ToolCommand(
        ("audit",),
        "e_audit",
        "this node's audit feed after a seq",
        (Opt("since_seq", "int"), Opt("limit", "int")),
        _audit,
    ),
    ToolCommand(
        ("episode", "record"),
        "work_record",
        "record a work episode",
        (
            Opt("summary"),
            Opt("tool"),
            Opt("session_id"),
            Opt("channel"),
            Opt("episode_type"),
            Opt("error_code"),
            Opt("duration_ms", "int"),
            Opt("result_size", "int"),
            Opt("tags", "list", "a tag (repeat)"),
            Opt("expires_at", "time", "an instant or a date"),
            *_LATER,
        ),
        _recorded,
    ),
    ToolCommand(
        ("episode", "result"),
        "work_result",
        "record an episode's later-known outcome",
        (Opt("id", "positional", "the episode's id"), *_LATER),
        _amended,
    ),
    ToolCommand(
        ("episode", "forget"),
        "work_forget",
        "tombstone an episode on every node",
        (Opt("id", "positional", "the episode's id"),),
        _forgotten,
    ),
    ToolCommand(
        ("episode", "list"),
        "work_episodes",
        "your episodes, newest first",
        (
            Opt("since", "time", "from this instant or date"),
            Opt("until", "time", "before this instant or date"),
            Opt("status"),
            Opt("tool"),
            Opt("tags", "list", "a tag every episode carries (repeat)"),
            *_PAGING,
            *_FORMAT,
        ),
        _episodes,
    ),
    ToolCommand(
        ("episode", "chain"),
        "work_episode_chain",
        "walk back along prev_id from an episode",
        (
            Opt("id", "positional", "the episode to start from"),
            Opt("k", "int", "at most this many (1-200, default 50)"),
            *_FORMAT,
        ),
        _chain,
    ),
    ToolCommand(
        ("windows", "list"),
        "call_windows",
        "the rows filed for your tool calls, oldest first",
        (
            Opt("tool", help="only calls to this tool"),
            Opt("turn", "int", "only this turn"),
            Opt("tool_call_id", help="only this call"),
            Opt("latest", "flag", "only each call's latest row"),
            *_PAGING,
        ),
        _windows,
    ),
)
