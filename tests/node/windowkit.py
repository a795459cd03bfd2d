"""Fixtures of the worked examples (``test_windows_examples.py``) for the windows tests: NOW,
the zone LA, the ranges M, Y, T, YD, TD and the forms EPOCH, LB, DAY and WALL, over one input
schema."""

from __future__ import annotations

from typing import Any
from zoneinfo import ZoneInfo

from node.windows.convert import Conversion, Ctx, convert_exact, convert_for_tool
from node.windows.decide import Call, Decision, decide
from node.windows.forms import Period, declare
from node.windows.spans import TimeSpan, parse_span
from node.windows.turn import Turn, parse_turn
from protocol.timefmt import parse_instant

NOW_TEXT = "2026-10-09T15:40:00Z"
NOW = parse_instant(NOW_TEXT).ms
LA_NAME = "America/Los_Angeles"
LA = ZoneInfo(LA_NAME)
BERLIN = ZoneInfo("Europe/Berlin")
MIN = 60_000
HOUR = 60 * MIN
DAY_MS = 24 * HOUR

SCHEMA: dict[str, Any] = {
    "properties": {
        "start": {"type": ["string", "integer"]},
        "end": {"type": ["string", "integer"]},
        "w": {"type": "string"},
        "date": {"type": "string"},
        "tz": {"type": "string"},
        "r": {"type": "object"},
        "action": {"type": "string", "enum": ["list", "changes"]},
    }
}


def rng(start: str, end: str) -> dict[str, str]:
    return {"from": start, "to": end}


M = rng("2026-10-09T08:00:00-07:00", "2026-10-09T08:41:00-07:00")
Y = rng("2026-10-08T08:00:00-07:00", "2026-10-08T08:41:00-07:00")
T = rng("2026-10-10T08:00:00-07:00", "2026-10-10T08:41:00-07:00")
YD = rng("2026-10-08T00:00:00-07:00", "2026-10-09T00:00:00-07:00")
TD = rng("2026-10-09T00:00:00-07:00", "2026-10-10T00:00:00-07:00")


def bounds(enc: str, edge: str, *, zone: bool = False, **more: Any) -> dict[str, Any]:
    form: dict[str, Any] = {
        "kind": "bounds",
        "from": {"argument": "start", "as": enc},
        "to": {"argument": "end", "as": enc, "edge": edge},
        **more,
    }
    if zone:
        form["zone"] = {"argument": "tz"}
    return form


EPOCH = bounds("epoch-ms", "exclusive")
LB = {"kind": "lookback", "argument": "w", "signed": False}
SLB = {"kind": "lookback", "argument": "w", "signed": True}
DAY = {"kind": "day", "argument": "date", "zone": {"argument": "tz"}}
WALL = bounds("wall", "exclusive", zone=True)


def period(*forms: Any, **facts: Any) -> Period:
    return declare("t", SCHEMA, {"forms": list(forms), "facts": facts})


def span(r: dict[str, str]) -> TimeSpan:
    return parse_span(r, "range")


def ctx(zone: ZoneInfo | None = LA, app_zone: ZoneInfo | None = None) -> Ctx:
    return Ctx(NOW, zone, app_zone)


def sugar(**decl: Any) -> Period:
    return declare("t", SCHEMA, decl)


def exact(form: Any, r: dict[str, str], lookback: int | None = None, **kw: Any) -> Any:
    p = form if isinstance(form, Period) else period(form)
    found = convert_exact(p.forms[0], span(r), lookback, ctx(**kw))
    return None if found is None else found[0]


def convert(
    forms: list[Any], r: dict[str, str] | TimeSpan, lookback: int | None = None, **facts: Any
) -> Conversion | str:
    p = period(*forms, **facts)
    s = r if isinstance(r, TimeSpan) else span(r)
    return convert_for_tool(s, lookback, p.forms, p.facts, ctx())


def answered(r: dict[str, str] | None = None, mention: int = 0, **more: Any) -> dict[str, Any]:
    w: dict[str, Any] = {"source": "answered", "mention": mention, "zone": LA_NAME, **more}
    if r is not None:
        w["range"] = r
    return w


def turn(**raw: Any) -> Turn:
    return parse_turn(
        {"turn": 1, "toolCallId": "c1", "now": NOW_TEXT, "zone": LA_NAME, **raw}, clock=0
    )


def decision(
    forms: list[Any], args: dict[str, Any], t: Turn | None = None, **facts: Any
) -> Decision:
    p = period(*forms, **facts)
    return decide(Call("t", args, p.forms, p.facts, t or turn()))


def row(
    forms: list[Any], args: dict[str, Any], t: Turn | None = None, **facts: Any
) -> dict[str, Any]:
    return decision(forms, args, t, **facts).row.wire()


HEAD = {"kind": "call-window", "turn": 1, "iteration": 0, "toolCallId": "c1", "toolName": "t"}
