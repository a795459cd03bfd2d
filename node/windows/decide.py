"""One call's decision (docs/time-windows.md §What the node decides; agentfootprint's
``callWindowOf``): the CallWindowRow a call carries, the values a fill adds to it, and the range
a trimming tool keeps.

If any period argument (every argument of every form, zone arguments included) is present, the
sent value is read back and judged (*Sent*); otherwise the person's window is filled in
(*Left out*).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Any
from zoneinfo import ZoneInfo

from node.windows.convert import Conversion, Ctx, convert_for_tool
from node.windows.facts import fact_problem, partly_beyond_retention
from node.windows.forms import Facts, Form, form_facts
from node.windows.readback import is_missing, read_back, wall_gap_argument
from node.windows.rows import CallWindowRow, Person
from node.windows.spans import TimeSpan, lookback_as_bounds
from node.windows.turn import Turn, Window

__all__ = ["Call", "Decision", "decide"]


@dataclass(frozen=True, slots=True)
class Call:
    """What the decision reads: the tool, its arguments and forms, its facts, the turn, and
    the node's (app) zone for forms without a zone argument."""

    tool: str
    args: Mapping[str, Any]
    forms: tuple[Form, ...]
    facts: Facts
    turn: Turn
    app_zone: ZoneInfo | None = None


@dataclass(frozen=True, slots=True)
class Decision:
    row: CallWindowRow
    values: Mapping[str, Any] | None = None  # a fill: the arguments it adds
    trim: TimeSpan | None = None  # a widened fill to a tool that filters: keep only this


def _row(call: Call, how: str, **fields: Any) -> CallWindowRow:
    t = call.turn
    return CallWindowRow(t.turn, t.iteration, t.tool_call_id, call.tool, how, **fields)


def _person(w: Window) -> Person:
    return Person(w.span, w.source, None if w.source == "control" else w.mention)


def _ctx(call: Call, zone: ZoneInfo) -> Ctx:
    t = call.turn
    return Ctx(t.now, zone, call.app_zone, t.now_offset, call.facts.granularity_ms)


def decide(call: Call) -> Decision:
    names = {a for f in call.forms for a in (*f.arguments(), f.zone_argument) if a}
    if all(is_missing(call.args, name) for name in names):
        return _fill(call)
    return _present(call)


# -- left out: the fill ------------------------------------------------------------------------


def _fill(call: Call) -> Decision:
    t = call.turn
    if t.mentions == 0:
        return Decision(_row(call, "not-filled", why="no-window"))
    if t.mentions > 1:
        return Decision(_row(call, "not-filled", why="several-mentions"))
    if not t.windows:
        return Decision(_open_reading(call))
    w = t.windows[0]
    found = convert_for_tool(w.span, w.lookback, call.forms, call.facts, _ctx(call, w.zone))
    if isinstance(found, str):
        return Decision(_row(call, "refused", refused=found, asked=w.span, person=_person(w)))
    return _filled(call, w, found)


def _open_reading(call: Call) -> CallWindowRow:
    """One open mention: refused when the tool can take none of its readings."""
    ranges = call.turn.open[0] if call.turn.open else ()
    ctx = _ctx(call, call.turn.zone)
    codes = [convert_for_tool(r, None, call.forms, call.facts, ctx) for r in ranges]
    if codes and all(isinstance(c, str) for c in codes):
        return _row(call, "refused", refused=codes[0])
    return _row(call, "not-filled", why="open-reading")


def _filled(call: Call, w: Window, conv: Conversion) -> Decision:
    trimmed = conv.sent is not None and call.facts.filters_to_asked
    row = _row(
        call,
        "filled",
        form=conv.form,
        asked=w.span,
        person=_person(w),
        rounded=conv.rounded,
        sent=conv.sent,
        extra=() if trimmed else conv.extra,
        trimmed_by_tool=trimmed,
        partly_beyond_retention=conv.partly_beyond_retention,
    )
    return Decision(row, conv.values, w.span if trimmed else None)


# -- sent: read back and judged ----------------------------------------------------------------


def _read(call: Call) -> tuple[int, TimeSpan] | None:
    for i, form in enumerate(call.forms):
        asked = read_back(form, call.args, call.turn.now, call.app_zone)
        if asked is not None:
            return i, asked
    return None


def _unread(call: Call) -> CallWindowRow:
    for i, form in enumerate(call.forms):
        if any(is_missing(call.args, a) for a in form.arguments()):
            continue
        argument = wall_gap_argument(form, call.args, call.app_zone)
        if argument is not None:
            return _row(call, "refused", refused="dst-gap", form=i, argument=argument)
    return _row(call, "unread")


def _present(call: Call) -> Decision:
    read = _read(call)
    if read is None:
        return Decision(_unread(call))
    form, asked = read
    windows = call.turn.windows
    if not windows:
        return _judged(call, _row(call, "model", form=form, asked=asked))
    named = _named(call, asked)
    if named is not None:
        w, matches = named
        how = "bound" if matches else "model-chosen"
        fields = {"by": "quote"} if matches else {}
        return _judged(call, _row(call, how, form=form, asked=asked, person=_person(w), **fields))
    matching = [w for w in windows if _is_window(asked, w, call.turn.now)]
    if matching:
        person = _person(matching[0])
        return _judged(call, _row(call, "bound", form=form, asked=asked, person=person, by="value"))
    only = _person(windows[0]) if len(windows) == 1 else None
    return _judged(call, _row(call, "model-chosen", form=form, asked=asked, person=only))


def _is_window(asked: TimeSpan, w: Window, now: int) -> bool:
    if asked.same(w.span):
        return True
    return w.lookback is not None and asked.same(lookback_as_bounds(now, w.lookback))


def _norm(text: str | None) -> str:
    return re.sub(r"\s+", " ", (text or "").lower()).strip()


def _named(call: Call, asked: TimeSpan) -> tuple[Window, bool] | None:
    """The window a quote of the person's names (``by: quote``), and whether it is the one
    sent; None when no quote names one."""
    if call.turn.quotes is None:
        return None
    names = {a for f in call.forms for a in (*f.arguments(), f.zone_argument) if a}
    quotes = [_norm(q) for k, q in call.turn.quotes.items() if k in names and _norm(q)]
    named = [
        w
        for w in call.turn.windows
        if _norm(w.quote) and any(q in _norm(w.quote) or _norm(w.quote) in q for q in quotes)
    ]
    if not named:
        return None
    for w in named:
        if _is_window(asked, w, call.turn.now):
            return w, True
    return named[0], False


def _judged(call: Call, row: CallWindowRow) -> Decision:
    """The form's facts against the sent range; never converted or widened."""
    assert row.form is not None
    assert row.asked is not None
    facts = form_facts(call.forms[row.form], call.facts)
    problem = fact_problem(row.asked, facts, call.turn.now)
    if problem is not None:
        refused = _row(
            call, "refused", refused=problem, form=row.form, asked=row.asked, person=row.person
        )
        return Decision(refused)
    partly = partly_beyond_retention(row.asked, facts, call.turn.now)
    return Decision(replace(row, partly_beyond_retention=partly))
