"""Properties of the decision (docs/time-windows.md §What the node decides) over generated windows,
zones and forms: a fill never narrows the person's window, an exact fill reads back to exactly the
window, ``differs.extra`` and the window together are exactly ``sent``, and no sent value makes the
read-back raise."""

from __future__ import annotations

import itertools
from typing import Any
from zoneinfo import ZoneInfo

from hypothesis import given, settings
from hypothesis import strategies as st

from node.windows.decide import Call, Decision, decide
from node.windows.errors import WindowError
from node.windows.forms import Form
from node.windows.readback import read_back
from node.windows.spans import TimeSpan, lookback_range
from node.windows.turn import parse_turn
from protocol.timefmt import format_instant
from tests.node.windowkit import (
    BERLIN,
    DAY,
    DAY_MS,
    EPOCH,
    LA,
    LB,
    MIN,
    NOW,
    NOW_TEXT,
    SLB,
    WALL,
    answered,
    bounds,
    period,
    rng,
    turn,
)

UTC = ZoneInfo("UTC")
GRANULARITY = 60_000
POOL = [
    EPOCH,
    bounds("iso", "inclusive"),
    bounds("iso", "exclusive"),
    bounds("epoch-s", "exclusive"),
    bounds("epoch-ms", "inclusive"),
    WALL,
    DAY,
    LB,
    SLB,
    LB | {"units": "d"},
    bounds("date", "inclusive", zone=True),
    {"kind": "day", "argument": "date"},
    {"kind": "joined", "argument": "w", "as": "wall", "joiner": "..", "edge": "exclusive"},
    {
        "kind": "object",
        "argument": "r",
        "as": "epoch-s",
        "edge": "inclusive",
        "keys": {"from": "a", "to": "b"},
    },
]
SETTINGS = settings(max_examples=200, deadline=None)


@st.composite
def windows(draw: st.DrawFn) -> TimeSpan:
    start = NOW + draw(st.integers(-40 * DAY_MS, DAY_MS))
    length = draw(st.integers(1, 3 * DAY_MS))
    if draw(st.booleans()):  # most windows people name are on whole minutes
        start, length = start // MIN * MIN, max(1, length // MIN) * MIN
    return TimeSpan(start, start + length)


def _decided(
    window: TimeSpan, zone: ZoneInfo, forms: list[dict[str, Any]]
) -> tuple[Decision, Call]:
    p = period(*forms)
    w = answered(rng(format_instant(window.start), format_instant(window.end)), zone=zone.key)
    call = Call("t", {}, p.forms, p.facts, turn(windows=[w]), zone)
    return decide(call), call


def _read(call: Call, found: Decision) -> TimeSpan | None:
    form: Form = call.forms[found.row.form or 0]
    return read_back(form, dict(found.values or {}), NOW, call.app_zone)


forms_st = st.lists(st.sampled_from(POOL), min_size=1, max_size=3, unique_by=repr)
zones = st.sampled_from([LA, BERLIN, UTC])


@SETTINGS
@given(windows(), zones, forms_st)
def test_a_fill_never_narrows_the_persons_window(
    window: TimeSpan, zone: ZoneInfo, forms: Any
) -> None:
    found, call = _decided(window, zone, forms)
    if found.row.how != "filled":
        return
    read = _read(call, found)
    assert read is not None
    assert read.start <= window.start
    if found.row.sent is not None:
        assert read.same(found.row.sent)
    # A look-back "ends at now" within the granularity (docs/time-windows.md, decision 10), so
    # a window ending just after now is read to now; nothing else may end early.
    slack = GRANULARITY if call.forms[found.row.form or 0].kind == "lookback" else 0
    assert read.end >= window.end - slack


@SETTINGS
@given(windows(), zones, forms_st)
def test_an_exact_fill_reads_back_to_exactly_the_window(
    window: TimeSpan, zone: ZoneInfo, forms: Any
) -> None:
    found, call = _decided(window, zone, forms)
    exact = found.row.how == "filled" and found.row.sent is None and not found.row.rounded
    if exact and call.forms[found.row.form or 0].kind != "lookback":
        read = _read(call, found)
        assert read is not None
        assert read.same(window)


@SETTINGS
@given(st.integers(1, 60 * 24 * 30), st.sampled_from([LB, SLB, LB | {"units": "hd"}]))
def test_a_lookback_fill_reads_back_to_the_lookback(minutes: int, form: dict[str, Any]) -> None:
    p = period(form)
    w = {"source": "answered", "mention": 0, "lookback": f"{minutes}m"}
    found = decide(Call("t", {}, p.forms, p.facts, turn(windows=[w]), UTC))
    if found.row.how == "filled":
        read = read_back(p.forms[0], dict(found.values or {}), NOW, UTC)
        assert read is not None
        assert read.same(lookback_range(NOW, minutes * MIN))
    else:  # the units cannot spell it: no form holds a look-back exactly, and none is widened
        assert found.row.refused == "no-form-holds"
        assert minutes % 60 != 0


@SETTINGS
@given(windows(), zones, forms_st)
def test_extra_and_the_window_are_exactly_sent(
    window: TimeSpan, zone: ZoneInfo, forms: Any
) -> None:
    found, _ = _decided(window, zone, forms)
    sent = found.row.sent
    if found.row.how != "filled" or sent is None or found.row.trimmed_by_tool:
        return
    pieces = sorted([*found.row.extra, window], key=lambda s: s.start)
    assert pieces[0].start == sent.start
    assert pieces[-1].end == sent.end
    assert all(a.end == b.start for a, b in itertools.pairwise(pieces))
    assert 1 <= len(found.row.extra) <= 2


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=40),
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=5), inner, max_size=3)
    ),
    max_leaves=6,
)


@SETTINGS
@given(
    st.sampled_from(POOL),
    st.dictionaries(
        st.sampled_from(["start", "end", "w", "date", "tz", "r"]), json_values, max_size=4
    ),
)
def test_no_sent_value_makes_read_back_raise(form: dict[str, Any], args: dict[str, Any]) -> None:
    found = read_back(period(form).forms[0], args, NOW, LA)
    assert found is None or found.start < found.end
    p = period(form)
    decide(
        Call(
            "t",
            args,
            p.forms,
            p.facts,
            turn(windows=[answered(rng("2026-10-09T08:00:00-07:00", "2026-10-09T08:41:00-07:00"))]),
            LA,
        )
    )


window_dicts = st.fixed_dictionaries(
    {},
    optional={
        "source": st.sampled_from(["answered", "control", "said"]) | json_values,
        "mention": st.integers(-1, 3) | json_values,
        "range": st.fixed_dictionaries(
            {
                "from": st.sampled_from(["2026-10-09T08:00:00-07:00", "1969-01-01T00:00:00Z", "x"]),
                "to": st.sampled_from(["2026-10-09T08:41:00-07:00", "9999-12-31T00:00:00Z"]),
            }
        )
        | json_values,
        "lookback": st.sampled_from(["40m", "0m", "99999999999w", "1d"]) | json_values,
        "zone": st.sampled_from(["America/Los_Angeles", "PST", "+05:30", "Etc/GMT+5"]),
        "quote": json_values,
        "answer": st.sampled_from(["confirmed", "edited", "maybe"]),
    },
)
turns = st.fixed_dictionaries(
    {"turn": st.integers(-1, 5) | json_values, "toolCallId": st.text(max_size=3) | json_values},
    optional={
        "iteration": json_values,
        "now": st.sampled_from([NOW_TEXT, "2026-10-09", "nope"]),
        "zone": st.sampled_from(["UTC", "Europe/Berlin", "Mars/Olympus"]) | json_values,
        "windows": st.lists(window_dicts, max_size=3) | json_values,
        "open": st.lists(st.lists(json_values, max_size=2), max_size=2) | json_values,
        "mentions": st.integers(-1, 4) | json_values,
        "quotes": json_values,
    },
)


@SETTINGS
@given(turns)
def test_a_turn_context_either_reads_or_is_refused(raw: dict[str, Any]) -> None:
    text = ""
    try:
        parse_turn(raw, clock=NOW)
    except WindowError as exc:
        text = exc.text
    assert text == "" or text.startswith("invalid memlane/turn: ")
